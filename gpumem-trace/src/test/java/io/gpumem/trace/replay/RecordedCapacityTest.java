package io.gpumem.trace.replay;

import static io.gpumem.testing.TestSizes.GiB;
import static io.gpumem.testing.TestSizes.MiB;
import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.alloc.Pool;
import io.gpumem.history.BlockInfo;
import io.gpumem.history.BlockState;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.window.RecordedConfig;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The device memory a what-if takes the recorded run to have had ({@link WhatIfReplay#recordedCapacity}), rule by
 * rule on hand-built windows: a script's device line (less what it holds), else what the recording shows, else, for
 * request-only sources, the peak reserved of a run with ample memory, doubled until the window fits (ten times at
 * most). PIT showed these rules unpinned: the shared traces all take the second.
 */
class RecordedCapacityTest {

    private static long recordedCapacity(TraceSnapshot s) {
        return HandWindows.replay(s, 0).recordedCapacity(RecordedConfig.of(s));
    }

    @Test
    void aScriptsDeviceLineGivesItsCapacityLessWhatItHolds() {
        assertThat(recordedCapacity(HandWindows.script("device capacity=100MiB held=30MiB\nalloc a 3MiB\n")))
                .isEqualTo(70 * MiB);
        assertThat(recordedCapacity(HandWindows.script("device capacity=100MiB\nalloc a 3MiB\n")))
                .isEqualTo(100 * MiB);
    }

    /** The recording's own capacity: its peak reserved, or more where an oom saw more free memory (60 MiB here). */
    @Test
    void aRecordingThatReservedMemoryGetsTheCapacityItShows() {
        long base = 0x7f0000000000L;
        List<TraceEntry> trace = List.of(
                TraceEntry.of(TraceAction.SEGMENT_ALLOC, base, 20 * MiB, 0),
                TraceEntry.of(TraceAction.ALLOC, base, 3 * MiB, 0),
                new TraceEntry(
                        TraceAction.OOM, 0, 64 * MiB, 0, 0, null, 40 * MiB, TraceEntry.recordedKeys(TraceAction.OOM)));
        SegmentInfo end = SegmentInfo.ofBlocks(
                0,
                base,
                0,
                Pool.LARGE,
                false,
                List.of(
                        BlockInfo.of(base, 3 * MiB, 3 * MiB, BlockState.ACTIVE_ALLOCATED),
                        BlockInfo.of(base + 3 * MiB, 17 * MiB, 0, BlockState.INACTIVE)));
        WhatIfReplay r = HandWindows.replay(HandWindows.snapshot(List.of(end), List.of(trace), Map.of()), 0);
        assertThat(r.recorded().peakReserved()).isEqualTo(20 * MiB);
        assertThat(r.recordedCapacity(RecordedConfig.of(r.snapshot()))).isEqualTo(60 * MiB);
        // a window that starts with reserved memory and reserves no more: that memory
        assertThat(recordedCapacity(HandWindows.loop(10, 10))).isEqualTo(20 * MiB);
    }

    /** 3 MiB takes a 20 MiB segment, 30 MiB one of its own: 50 MiB reserved at the peak. */
    @Test
    void aRequestOnlyScriptGetsThePeakReservedOfARunWithAmpleMemory() {
        assertThat(recordedCapacity(HandWindows.script("alloc a 3MiB\nalloc b 30MiB\nfree a\nfree b\n")))
                .isEqualTo(50 * MiB);
    }

    @Test
    void aRequestBeyondTheAmpleMemoryDoublesItUntilTheWindowFits() {
        // 8 GiB fails, then 16 GiB, then 32 GiB holds it
        assertThat(recordedCapacity(HandWindows.script("alloc a 20GiB\nfree a\n")))
                .isEqualTo(20 * GiB);
    }

    /**
     * After ten doublings (8 TiB) the window still fails: the capacity is then what that last run reserved (the
     * 1 GiB request that fitted), not a doubling more (16 TiB would hold the 10 TiB request), nor an endless search.
     */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aWindowThatFailsAfterTenDoublingsGetsWhatItsLastRunReserved() {
        assertThat(recordedCapacity(HandWindows.script("alloc a 1GiB\nalloc b 10240GiB\nfree a\n")))
                .isEqualTo(GiB);
    }
}
