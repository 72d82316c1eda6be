package io.gpumem.kvcache.sim;

import io.gpumem.device.SimulatedDevice;
import io.gpumem.kvcache.manager.PreemptionMode;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

class ServingSimulatorTest {

    private static SimReport run(SimConfig c) {
        System.out.println("seed=" + c.seed());
        SimulatedDevice d = SimulatedDevice.builder().capacity(ServingSimulator.deviceBytes(c) + (64L << 20)).backed(true).build();
        return ServingSimulator.run(c, d);
    }

    /** Every figure but the wall-clock one. */
    private static SimReport withoutTiming(SimReport r) {
        return new SimReport(r.requestsFinished(), r.requestsTotal(), r.steps(), r.tokensPerStep(), r.outputTokens(),
                r.preemptions(), r.recomputePreemptions(), r.swapPreemptions(), r.prefixHitRate(), r.prefixHitRateWindow(),
                r.kvWaste(), r.contiguousWaste(), r.meanUsage(), r.peakUsage(), r.meanRunning(), r.copyOnWriteBlocks(), r.swapOutBytes(), r.swapInBytes(), r.swapInReusedBlocks(), 0, r.timing(), r.tiers(),
                r.instances());
    }

    @Test
    void theSameSeedGivesTheSameRunAndAnotherSeedAnother() {
        SimConfig c = SimConfig.defaults().withRequests(150).withBlocks(512).withSeed(42);
        SimReport a = run(c);
        SimReport b = run(c);
        assertThat(withoutTiming(a)).isEqualTo(withoutTiming(b));
        assertThat(withoutTiming(run(c.withSeed(43)))).isNotEqualTo(withoutTiming(a));
    }

    @Test
    void shareGptWasteStaysUnderFourPercentWithBlockSize16() {
        SimReport r = run(SimConfig.defaults().withRequests(300).withSeed(7));
        assertThat(r.requestsFinished()).isEqualTo(300);
        assertThat(r.kvWaste()).isBetween(0.001, 0.04);
        assertThat(r.contiguousWaste()).isGreaterThan(0.6);
    }

    @Test
    void aTightPoolPreemptsAndStillFinishesEveryRequest() {
        for (PreemptionMode mode : PreemptionMode.values()) {
            SimReport r = run(SimConfig.defaults().withRequests(200).withBlocks(300).withSeed(3).withPreemption(mode));
            assertThat(r.requestsFinished()).as(mode.name()).isEqualTo(200);
            assertThat(r.preemptions()).as(mode.name()).isPositive();
            assertThat(r.peakUsage()).isCloseTo(1.0, within(0.02));
            if (mode == PreemptionMode.SWAP) {
                assertThat(r.swapPreemptions()).isPositive();
                assertThat(r.swapInBytes() + r.swapInReusedBlocks()).isPositive();
                assertThat(r.swapInBytes()).isLessThanOrEqualTo(r.swapOutBytes());
            } else {
                assertThat(r.swapPreemptions()).isZero();
                assertThat(r.prefixHitRate()).as("preempted requests re-hit their blocks").isPositive();
            }
        }
    }

    @Test
    void anAdmissionWatermarkCutsPreemptions() {
        SimConfig c = SimConfig.defaults().withRequests(200).withBlocks(300).withSeed(3);
        SimReport off = run(c);
        SimReport on = run(c.withWatermark(0.05));
        assertThat(on.requestsFinished()).isEqualTo(200);
        assertThat(on.preemptions()).isLessThan(off.preemptions() / 2);
    }

    @Test
    void aSharedPrefixIsServedFromTheCacheOnlyWhenCachingIsOn() {
        SimConfig c = SimConfig.defaults().withWorkload(Workload.SHARED_PREFIX).withRequests(200).withSeed(5);
        SimReport on = run(c);
        SimReport off = run(c.withPrefixCaching(false));
        assertThat(on.prefixHitRate()).isGreaterThan(0.8);
        assertThat(off.prefixHitRate()).isZero();
        assertThat(on.tokensPerStep()).isLessThan(off.tokensPerStep());
        assertThat(on.requestsFinished()).isEqualTo(off.requestsFinished());
    }

    @Test
    void chatTurnsReHitTheirHistory() {
        SimReport r = run(SimConfig.defaults().withWorkload(Workload.CHAT).withRequests(60).withSeed(9));
        assertThat(r.requestsTotal()).isGreaterThan(60);
        assertThat(r.requestsFinished()).isEqualTo(r.requestsTotal());
        assertThat(r.prefixHitRate()).isGreaterThan(0.5);
    }
}
