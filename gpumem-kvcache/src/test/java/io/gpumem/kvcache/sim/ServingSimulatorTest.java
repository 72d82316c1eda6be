package io.gpumem.kvcache.sim;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import io.gpumem.device.SimulatedDevice;
import io.gpumem.kvcache.manager.PreemptionMode;
import io.gpumem.kvcache.memory.KvMemory;
import java.util.List;
import java.util.SplittableRandom;
import java.util.function.ToDoubleFunction;
import java.util.function.ToLongFunction;
import org.junit.jupiter.api.Test;

class ServingSimulatorTest {

    private static SimReport run(SimConfig c) {
        System.out.println("seed=" + c.seed());
        SimulatedDevice d = SimulatedDevice.builder()
                .capacity(ServingSimulator.deviceBytes(c) + (64L << 20))
                .backed(true)
                .build();
        return ServingSimulator.run(c, d);
    }

    /**
     * With prefix caching off every request after the first computes the shared prefix's 21 full blocks (336 tokens)
     * again, however its prefill is cut into chunks: a block an earlier chunk began and a later one completed was
     * not counted, so a token budget of 100 reported fewer recomputed tokens than one of 2,048.
     */
    @Test
    void recomputedTokensDoNotDependOnHowPrefillsAreChunked() {
        SimConfig c = SimConfig.builder()
                .workload(Workload.SHARED_PREFIX)
                .prefixCaching(false)
                .requests(20)
                .seed(1)
                .build();
        SimReport whole = run(c.toBuilder().tokenBudget(2048).build());
        SimReport chunked = run(c.toBuilder().tokenBudget(100).build());
        assertThat(whole.requestsFinished()).isEqualTo(20);
        assertThat(chunked.requestsFinished()).isEqualTo(20);
        assertThat(whole.timing().recomputedTokens()).isEqualTo(19L * 336);
        assertThat(chunked.timing().recomputedTokens()).isEqualTo(19L * 336);
    }

    /** Every figure but the wall-clock one. */
    private static SimReport withoutTiming(SimReport r) {
        return new SimReport(
                r.requestsFinished(),
                r.requestsTotal(),
                r.requestsNotArrived(),
                r.steps(),
                r.tokensPerStep(),
                r.outputTokens(),
                r.preemptions(),
                r.recomputePreemptions(),
                r.swapPreemptions(),
                r.prefixHitRate(),
                r.prefixHitRateWindow(),
                r.kvWaste(),
                r.contiguousWaste(),
                r.meanUsage(),
                r.peakUsage(),
                r.meanRunning(),
                r.copyOnWriteBlocks(),
                r.swapOutBytes(),
                r.swapInBytes(),
                r.swapInReusedBlocks(),
                0,
                r.timing(),
                r.tiers(),
                r.instances());
    }

    @Test
    void theSameSeedGivesTheSameRunAndAnotherSeedAnother() {
        SimConfig c = SimConfig.builder().requests(150).blocks(512).seed(42).build();
        SimReport a = run(c);
        SimReport b = run(c);
        assertThat(withoutTiming(a)).isEqualTo(withoutTiming(b));
        assertThat(withoutTiming(run(c.toBuilder().seed(43).build()))).isNotEqualTo(withoutTiming(a));
    }

    @Test
    void shareGptWasteStaysUnderFourPercentWithBlockSize16() {
        SimReport r = run(SimConfig.builder().requests(300).seed(7).build());
        assertThat(r.requestsFinished()).isEqualTo(300);
        assertThat(r.kvWaste()).isBetween(0.001, 0.04);
        assertThat(r.contiguousWaste()).isGreaterThan(0.6);
    }

    @Test
    void aTightPoolPreemptsAndStillFinishesEveryRequest() {
        for (PreemptionMode mode : PreemptionMode.values()) {
            SimReport r = run(SimConfig.builder()
                    .requests(200)
                    .blocks(300)
                    .seed(3)
                    .preemption(mode)
                    .build());
            assertThat(r.requestsFinished()).as(mode.name()).isEqualTo(200);
            assertThat(r.preemptions()).as(mode.name()).isPositive();
            assertThat(r.peakUsage()).isCloseTo(1.0, within(0.02));
            if (mode == PreemptionMode.SWAP) {
                assertThat(r.swapPreemptions()).isPositive();
                assertThat(r.swapInBytes() + r.swapInReusedBlocks()).isPositive();
                assertThat(r.swapInBytes()).isLessThanOrEqualTo(r.swapOutBytes());
            } else {
                assertThat(r.swapPreemptions()).isZero();
                assertThat(r.prefixHitRate())
                        .as("no shared prefixes: vLLM's rate leaves out preempted requests re-hitting their blocks")
                        .isZero();
            }
        }
    }

    @Test
    void anAdmissionWatermarkCutsPreemptions() {
        SimConfig c = SimConfig.builder().requests(200).blocks(300).seed(3).build();
        SimReport off = run(c);
        SimReport on = run(c.toBuilder().watermark(0.05).build());
        assertThat(on.requestsFinished()).isEqualTo(200);
        assertThat(on.preemptions()).isLessThan(off.preemptions() / 2);
    }

    @Test
    void aSharedPrefixIsServedFromTheCacheOnlyWhenCachingIsOn() {
        SimConfig c = SimConfig.builder()
                .workload(Workload.SHARED_PREFIX)
                .requests(200)
                .seed(5)
                .build();
        SimReport on = run(c);
        SimReport off = run(c.toBuilder().prefixCaching(false).build());
        assertThat(on.prefixHitRate()).isGreaterThan(0.8);
        assertThat(off.prefixHitRate()).isZero();
        assertThat(on.tokensPerStep()).isLessThan(off.tokensPerStep());
        assertThat(on.requestsFinished()).isEqualTo(off.requestsFinished());
    }

    @Test
    void chatTurnsReHitTheirHistory() {
        SimReport r = run(
                SimConfig.builder().workload(Workload.CHAT).requests(60).seed(9).build());
        assertThat(r.requestsTotal()).isGreaterThan(60);
        assertThat(r.requestsFinished()).isEqualTo(r.requestsTotal());
        assertThat(r.prefixHitRate()).isGreaterThan(0.5);
    }

    @Test
    void theShortestModelLengthAChatIsAllowedServesEveryTurn() {
        SimReport r = run(SimConfig.builder()
                .workload(Workload.CHAT)
                .maxModelLen(67)
                .blocks(64)
                .requests(40)
                .seed(3)
                .build());
        assertThat(r.requestsTotal())
                .as("no room for a second turn: a follow-up prompt is capped at maxModelLen - 2 tokens")
                .isEqualTo(40);
        assertThat(r.requestsFinished()).isEqualTo(40);
    }

    @Test
    void aRunStoppedByMaxStepsCountsTheRequestsThatHadNotArrived() {
        SimConfig whole = SimConfig.builder().requests(50).seed(4).build();
        SimReport done = run(whole);
        assertThat(done.requestsNotArrived()).isZero();
        assertThat(done.servedEverything()).isTrue();

        SimReport cut = run(whole.toBuilder().maxSteps(40).build());
        assertThat(cut.steps()).isEqualTo(40);
        assertThat(cut.requestsNotArrived())
                .as("arrivals at 0.2 a step: most are still to come")
                .isPositive();
        assertThat(cut.requestsTotal() + cut.requestsNotArrived())
                .as("every request arrived or is counted as not arrived")
                .isEqualTo(50);
        assertThat(cut.servedEverything()).isFalse();

        SimReport none = run(whole.toBuilder().maxSteps(1).build());
        assertThat(none.requestsFinished()).isZero();
        assertThat(none.servedEverything())
                .as("nothing unfinished among the arrived, yet the workload was not served")
                .isFalse();
    }

    @Test
    void aFleetBeyondTheLimitIsRefusedBeforeAnyInstanceIsBuilt() {
        SimConfig c = SimConfig.builder().requests(5).build();
        int[] built = {0};
        for (int n : new int[] {0, ServingSimulator.MAX_INSTANCES + 1}) {
            assertThatThrownBy(() -> ServingSimulator.run(c, TierSettings.NONE, TimeModel.defaults(), n, i -> {
                        built[0]++;
                        return KvMemory.direct(SimulatedDevice.builder()
                                .capacity(ServingSimulator.deviceBytes(c) + (64L << 20))
                                .build());
                    }))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessage("instances must be in 1..1024, got " + n);
        }
        assertThat(built[0]).isZero();
    }

    @Test
    void aTotalOverSeveralInstancesAddsUpTheirReports() {
        SimConfig c = SimConfig.builder()
                .workload(Workload.SHARED_PREFIX)
                .requests(150)
                .blocks(160)
                .arrivalRate(18)
                .seed(8)
                .build();
        System.out.println("seed=" + c.seed());
        SimReport t = ServingSimulator.run(
                c,
                TierSettings.NONE,
                TimeModel.defaults(),
                3,
                i -> KvMemory.direct(SimulatedDevice.builder()
                        .capacity(ServingSimulator.deviceBytes(c) + (64L << 20))
                        .backed(true)
                        .build()));
        List<SimReport> each = t.instances();
        assertThat(each).hasSize(3);
        assertThat(t.requestsTotal()).isEqualTo(150);
        assertThat(each).allSatisfy(r -> assertThat(r.requestsTotal()).isEqualTo(50)); // dealt round-robin
        assertThat(t.requestsFinished())
                .isEqualTo(sum(each, SimReport::requestsFinished))
                .isEqualTo(150);
        assertThat(t.outputTokens()).isEqualTo(sum(each, SimReport::outputTokens));
        assertThat(t.preemptions()).isEqualTo(sum(each, SimReport::preemptions)).isPositive();
        assertThat(t.recomputePreemptions()).isEqualTo(sum(each, SimReport::recomputePreemptions));
        assertThat(t.swapPreemptions()).isEqualTo(sum(each, SimReport::swapPreemptions));
        assertThat(t.copyOnWriteBlocks()).isEqualTo(sum(each, SimReport::copyOnWriteBlocks));
        assertThat(t.timing().recomputedTokens())
                .isEqualTo(sum(each, r -> r.timing().recomputedTokens()));
        assertThat(t.timing().prefixQueriedTokens())
                .isEqualTo(sum(each, r -> r.timing().prefixQueriedTokens()))
                .isPositive();
        assertThat(t.timing().prefixHitTokens())
                .isEqualTo(sum(each, r -> r.timing().prefixHitTokens()));
        assertThat(t.prefixHitRate())
                .isCloseTo((double) t.timing().prefixHitTokens() / t.timing().prefixQueriedTokens(), within(1e-12));
        // the instances step in lock step: the same steps, so per-step figures add up and usage averages
        assertThat(each).allSatisfy(r -> assertThat(r.steps()).isEqualTo(t.steps()));
        assertThat(t.tokensPerStep()).isCloseTo(sumD(each, SimReport::tokensPerStep), within(1e-9));
        assertThat(t.meanRunning()).isCloseTo(sumD(each, SimReport::meanRunning), within(1e-9));
        assertThat(t.meanUsage()).isCloseTo(sumD(each, SimReport::meanUsage) / 3, within(1e-12));
        assertThat(t.peakUsage())
                .isEqualTo(each.stream().mapToDouble(SimReport::peakUsage).max().orElseThrow());
        assertThat(t.timing().simulatedSeconds())
                .isEqualTo(each.stream()
                        .mapToDouble(r -> r.timing().simulatedSeconds())
                        .max()
                        .orElseThrow());
        assertThat(t.timing().outputTokensPerSecond())
                .isCloseTo(t.outputTokens() / t.timing().simulatedSeconds(), within(1e-6));
        double lowest =
                each.stream().mapToDouble(r -> r.timing().ttftMsMean()).min().orElseThrow();
        double highest =
                each.stream().mapToDouble(r -> r.timing().ttftMsMean()).max().orElseThrow();
        assertThat(t.timing().ttftMsMean())
                .as("a pooled mean lies among the parts'")
                .isBetween(lowest, highest);
    }

    private static long sum(List<SimReport> each, ToLongFunction<SimReport> f) {
        return each.stream().mapToLong(f).sum();
    }

    private static double sumD(List<SimReport> each, ToDoubleFunction<SimReport> f) {
        return each.stream().mapToDouble(f).sum();
    }

    @Test
    void everyReportKeepsItsFiguresInRangeAndConsistentWithEachOther() {
        long seed = System.nanoTime();
        System.out.println("seed=" + seed);
        SplittableRandom rnd = new SplittableRandom(seed);
        for (Workload w : Workload.values()) {
            SimConfig c = SimConfig.builder()
                    .workload(w)
                    .requests(40 + rnd.nextInt(80))
                    .blocks(140 + rnd.nextInt(400))
                    .arrivalRate(0.2 + 4 * rnd.nextDouble())
                    .lookahead(rnd.nextInt(3))
                    .seed(rnd.nextLong())
                    .build();
            SimReport r = run(c);
            String what = w + " " + c.seed();
            assertThat(r.servedEverything()).as(what).isTrue();
            assertThat(r.kvWaste()).as(what).isBetween(0.0, 1.0);
            assertThat(r.contiguousWaste())
                    .as("%s: paging never wastes more than max-length reservations (2048 is a multiple of 16)", what)
                    .isBetween(r.kvWaste(), 1.0);
            assertThat(r.meanUsage()).as(what).isBetween(0.0, r.peakUsage());
            assertThat(r.peakUsage()).as(what).isBetween(0.0, 1.0);
            assertThat(r.prefixHitRate())
                    .as(what)
                    .isCloseTo(
                            r.timing().prefixQueriedTokens() == 0
                                    ? 0
                                    : (double) r.timing().prefixHitTokens()
                                            / r.timing().prefixQueriedTokens(),
                            within(1e-12));
            assertThat(r.outputTokens())
                    .as("%s: at least one token a request", what)
                    .isGreaterThanOrEqualTo(r.requestsFinished());
            assertThat(r.tokensPerStep() * r.steps())
                    .as("%s: every output token but each request's last is computed", what)
                    .isGreaterThanOrEqualTo(r.outputTokens() - r.requestsFinished() - 1e-6);
            assertThat(r.timing().ttftMsP50())
                    .as(what)
                    .isLessThanOrEqualTo(r.timing().ttftMsP99());
            assertThat(r.timing().outputTokensPerSecond())
                    .as(what)
                    .isCloseTo(r.outputTokens() / r.timing().simulatedSeconds(), within(1e-6));
            assertThat(r.preemptions()).as(what).isEqualTo(r.recomputePreemptions() + r.swapPreemptions());
        }
    }
}
