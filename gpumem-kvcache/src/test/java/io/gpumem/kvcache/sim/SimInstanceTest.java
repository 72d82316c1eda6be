package io.gpumem.kvcache.sim;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import io.gpumem.device.SimulatedDevice;
import io.gpumem.kvcache.manager.KvCacheManager;
import io.gpumem.kvcache.manager.KvRequest;
import io.gpumem.kvcache.memory.KvMemory;
import io.gpumem.kvcache.sched.Scheduler;
import java.util.HashSet;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

/**
 * One instance's figures on a request worked out by hand: a 40-token prompt with blocks of 16 and 3 output tokens
 * takes a prefill step and two decode steps; its three blocks hold 40, 41 and 42 computed tokens; the clock advances
 * by the time model's cost of each step, and the time to first token is the first step's. A second request with the
 * same prompt on another instance that shares the record of computed blocks counts its two full blocks as
 * recomputed.
 */
class SimInstanceTest {
    private static final int BLOCKS = 200;
    private static final int MAX_LEN = 2048;

    private final SimConfig config = SimConfig.builder()
            .blocks(BLOCKS)
            .blockSize(16)
            .maxModelLen(MAX_LEN)
            .build();
    private final TimeModel time = TimeModel.defaults();
    private final Set<Long> everComputed = new HashSet<>();

    private SimInstance instance() {
        SimulatedDevice device = SimulatedDevice.builder()
                .capacity(ServingSimulator.deviceBytes(config) + (64L << 20))
                .backed(true)
                .build();
        KvCacheManager manager = new KvCacheManager(config.spec(), KvMemory.direct(device), config.cache());
        return new SimInstance(config, time, manager, new Scheduler(manager, config.scheduler()), everComputed);
    }

    private static KvRequest prompt40(String id) {
        return KvRequest.of(id, IntStream.range(1000, 1040).toArray());
    }

    @Test
    void aPrefillAndTwoDecodeStepsGiveTheFiguresWorkedOutByHand() {
        try (SimInstance inst = instance()) {
            KvRequest r = prompt40("r");
            inst.admit(r, new SimInstance.Live(3, 0, new SplittableRandom(1), 0));
            for (long step = 0; step < 3; step++) {
                assertThat(inst.done).as("before step %d", step).isEmpty();
                assertThat(inst.busy()).isTrue();
                inst.step(step);
            }
            assertThat(inst.done).containsExactly(r);
            assertThat(inst.busy()).isFalse();
            SimReport rep = inst.report(0);

            assertThat(rep.steps()).isEqualTo(3);
            assertThat(rep.requestsFinished()).isEqualTo(1);
            assertThat(rep.requestsTotal()).isEqualTo(1);
            assertThat(rep.outputTokens()).isEqualTo(3);
            assertThat(rep.tokensPerStep()).as("40 + 1 + 1 tokens over 3 steps").isEqualTo(14.0);
            assertThat(rep.kvWaste()).as("3 blocks of 16 holding 40, 41, 42").isEqualTo((8 + 7 + 6) / 144.0);
            assertThat(rep.contiguousWaste())
                    .isCloseTo((3.0 * MAX_LEN - (40 + 41 + 42)) / (3.0 * MAX_LEN), within(1e-15));
            double usage = 3.0 / (BLOCKS - 1);
            assertThat(rep.meanUsage()).isCloseTo(usage, within(1e-15));
            assertThat(rep.peakUsage()).isCloseTo(usage, within(1e-15));
            assertThat(rep.meanRunning()).isEqualTo(1.0);

            double prefill = time.computeUs(40, 0, 40);
            double clock = prefill + time.computeUs(0, 1, 41) + time.computeUs(0, 1, 42);
            assertThat(rep.timing().simulatedSeconds()).isCloseTo(clock / 1e6, within(1e-12));
            assertThat(rep.timing().ttftMsMean()).isCloseTo(prefill / 1e3, within(1e-9));
            assertThat(rep.timing().ttftMsP99()).isCloseTo(prefill / 1e3, within(1e-9));
            assertThat(rep.timing().outputTokensPerSecond()).isCloseTo(3 / (clock / 1e6), within(1e-6));
            assertThat(rep.timing().recomputedTokens())
                    .as("nothing computed before")
                    .isZero();
            assertThat(rep.timing().prefixQueriedTokens()).isEqualTo(40);
            assertThat(rep.timing().prefixHitTokens()).isZero();
        }
    }

    @Test
    void blocksAnotherInstanceComputedBeforeCountAsRecomputed() {
        try (SimInstance first = instance();
                SimInstance second = instance()) {
            first.admit(prompt40("a"), new SimInstance.Live(1, 0, new SplittableRandom(1), 0));
            first.step(0);
            second.admit(prompt40("b"), new SimInstance.Live(1, 0, new SplittableRandom(2), 0));
            second.step(0);
            assertThat(first.report(0).timing().recomputedTokens()).isZero();
            assertThat(second.report(0).timing().recomputedTokens())
                    .as("the prompt's two full blocks; its last 8 tokens fill none")
                    .isEqualTo(32);
        }
    }
}
