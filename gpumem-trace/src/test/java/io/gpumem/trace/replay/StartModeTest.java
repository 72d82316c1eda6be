package io.gpumem.trace.replay;

import static io.gpumem.testing.TestSizes.MiB;
import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.engine.RunOutcome;
import io.gpumem.policy.PolicySpec;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.window.RecordedConfig;
import org.junit.jupiter.api.Test;

/**
 * Where a what-if's evaluations start ({@link StartMode}) on hand-built windows: whether a window starts warm,
 * when each mode chooses the steady state (under {@link StartMode#AUTO} a warm window closing as a loop body by at
 * least {@link WhatIfReplay#MIN_LOOP_CLOSURE}), and the warm-up passes a steady evaluation reports. PIT showed
 * these unpinned: the shared traces are either clearly warm loops or clearly cold.
 */
class StartModeTest {

    private static WhatIfReplay loop(int live, int again, StartMode mode) {
        return HandWindows.replay(HandWindows.loop(live, again), 0).startMode(mode);
    }

    @Test
    void aScriptStartsColdSoOnlyTheSteadyModeIteratesIt() {
        WhatIfReplay r = HandWindows.replay(HandWindows.script("alloc a 30MiB\nalloc b 30MiB\nfree a\nfree b\n"), 0);
        assertThat(r.startsWarm()).isFalse();
        assertThat(r.liveBlocksAtStart()).isZero();
        assertThat(r.steady()).as("the default mode: the window as recorded").isFalse();
        assertThat(r.startMode(StartMode.AUTO).steady()).isFalse();
        assertThat(r.startMode(StartMode.STEADY).steady()).isTrue();
        assertThat(r.startMode(StartMode.WINDOW).steady()).isFalse();
    }

    @Test
    void aWarmWindowIsSteadyUnderAutoWhenItClosesAsALoopBodyByNineTenthsOrMore() {
        WhatIfReplay nineTenths = loop(10, 9, StartMode.AUTO);
        assertThat(nineTenths.startsWarm())
                .as("15 MiB live in a 20 MiB segment")
                .isTrue();
        assertThat(nineTenths.liveBlocksAtStart()).isEqualTo(10);
        assertThat(nineTenths.stream().loopClosure()).isEqualTo(0.9);
        assertThat(nineTenths.steady()).isTrue();
        assertThat(nineTenths.startMode(StartMode.WINDOW).steady()).isFalse();

        WhatIfReplay eightTenths = loop(10, 8, StartMode.AUTO);
        assertThat(eightTenths.stream().loopClosure()).isEqualTo(0.8);
        assertThat(eightTenths.steady()).isFalse();
        assertThat(eightTenths.startMode(StartMode.STEADY).steady()).isTrue();
    }

    @Test
    void aWindowThatAllocatesNothingIsNeverSteady() {
        WhatIfReplay r = loop(10, 0, StartMode.STEADY);
        assertThat(r.stream().allocs()).isZero();
        assertThat(r.steady()).isFalse();
        assertThat(r.startMode(StartMode.AUTO).steady()).isFalse();
    }

    /**
     * The loop body reserves the same from its second pass on: one warm-up pass, then the measured one, for the
     * exact allocator (the recorded 20 MiB segment) and for a policy (stitch maps 2 MiB pages: 16 MiB for 15 MiB).
     */
    @Test
    void aSteadyEvaluationReportsTheWarmUpPassesItPlayed() {
        WhatIfReplay r = loop(10, 10, StartMode.AUTO);
        AllocatorConfig recorded = RecordedConfig.of(r.snapshot());
        assertThat(r.recordedCapacity(recorded)).isEqualTo(20 * MiB);
        assertThat(r.steadyPeakReserved(recorded)).isEqualTo(20 * MiB);
        RunOutcome exact = r.evaluate(recorded, true);
        assertThat(exact.warmUpPasses()).isEqualTo(1);
        assertThat(exact.peakReserved()).isEqualTo(20 * MiB);
        assertThat(exact.label()).isEqualTo(recorded.raw());
        assertThat(exact.recorded()).isTrue();
        RunOutcome stitch = r.evaluate(PolicySpec.parse("stitch"), 20 * MiB);
        assertThat(stitch.warmUpPasses()).isEqualTo(1);
        assertThat(stitch.peakReserved()).isEqualTo(16 * MiB);
        assertThat(stitch.policy()).isEqualTo("stitch");

        r.startMode(StartMode.WINDOW);
        assertThat(r.evaluate(recorded, true).warmUpPasses()).isZero();
        RunOutcome windowStitch = r.evaluate(PolicySpec.parse("stitch"), 20 * MiB);
        assertThat(windowStitch.warmUpPasses()).isZero();
        assertThat(windowStitch.peakReserved()).isEqualTo(16 * MiB);
    }

    /** A window that fails even with ample memory never settles: it is evaluated with every pass. */
    @Test
    void aWindowThatFailsWithAmpleMemoryIsEvaluatedWithEveryPass() {
        TraceSnapshot s = HandWindows.script("alloc a 20GiB\nfree a\n");
        WhatIfReplay r = HandWindows.replay(s, 0).startMode(StartMode.STEADY);
        RunOutcome exact = r.evaluate(RecordedConfig.of(s), true, 64 * MiB);
        assertThat(exact.warmUpPasses()).isEqualTo(WhatIfReplay.MAX_PASSES - 1);
        RunOutcome stitch = r.evaluate(PolicySpec.parse("stitch"), 64 * MiB);
        assertThat(stitch.warmUpPasses()).isEqualTo(WhatIfReplay.MAX_PASSES - 1);
        assertThat(stitch.ooms()).isEqualTo(WhatIfReplay.MAX_PASSES);
    }
}
