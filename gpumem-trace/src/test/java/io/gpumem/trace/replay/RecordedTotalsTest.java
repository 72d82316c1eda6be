package io.gpumem.trace.replay;

import static io.gpumem.testing.TestSizes.MiB;
import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.history.FileKeys;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * What the recording itself says about reserved memory ({@link RecordedTotals#of}): the sums over a hand-built
 * trace, exact. PIT showed the OOM entries' part unpinned (their count, and the free memory they report).
 */
class RecordedTotalsTest {

    private static TraceEntry driver(TraceAction a, long size) {
        return TraceEntry.of(a, 0x7f0000000000L, size, 0);
    }

    /** An oom entry as PyTorch records it: the rounded request and the free device memory it saw. */
    private static TraceEntry oom(long request, long deviceFree) {
        return new TraceEntry(
                TraceAction.OOM, 0, request, 0, 0, null, deviceFree, TraceEntry.recordedKeys(TraceAction.OOM));
    }

    /** An oom entry of an older recording, without {@code device_free}. */
    private static TraceEntry oomWithoutDeviceFree(long request) {
        return new TraceEntry(
                TraceAction.OOM, 0, request, 0, 0, null, 0, FileKeys.of(TraceEntry.SIZE | TraceEntry.STREAM));
    }

    @Test
    void driverCallsMoveReservedAndAnOomsFreeMemoryRaisesTheCapacity() {
        List<TraceEntry> trace = List.of(
                driver(TraceAction.SEGMENT_ALLOC, 20 * MiB), // 40 MiB
                driver(TraceAction.SEGMENT_MAP, 4 * MiB), // 44 MiB: the peak
                TraceEntry.of(TraceAction.ALLOC, 0x7f0000000000L, 3 * MiB, 0),
                driver(TraceAction.SEGMENT_FREE, 20 * MiB), // 24 MiB
                driver(TraceAction.SEGMENT_UNMAP, 2 * MiB), // 22 MiB
                oom(64 * MiB, 30 * MiB + 1), // 22 MiB reserved + the free memory: 52 MiB + 1 byte
                oomWithoutDeviceFree(64 * MiB),
                driver(TraceAction.SEGMENT_ALLOC, 2 * MiB)); // 24 MiB
        RecordedTotals t = RecordedTotals.of(20 * MiB, trace);
        assertThat(t).isEqualTo(new RecordedTotals(20 * MiB, 44 * MiB, 24 * MiB, 54 * MiB, 2));
    }

    @Test
    void withoutAnOomLargerThanThePeakTheCapacityIsThePeakRoundedUpToTwoMiB() {
        List<TraceEntry> trace = List.of(
                driver(TraceAction.SEGMENT_ALLOC, 20 * MiB), // 21 MiB + 1 byte: the peak
                driver(TraceAction.SEGMENT_FREE, 14 * MiB), // 7 MiB + 1 byte
                oom(40 * MiB, 2 * MiB), // 7 MiB + 1 byte + 2 MiB: below the peak
                oomWithoutDeviceFree(40 * MiB));
        RecordedTotals t = RecordedTotals.of(MiB + 1, trace);
        assertThat(t).isEqualTo(new RecordedTotals(MiB + 1, 21 * MiB + 1, 7 * MiB + 1, 22 * MiB, 2));
    }

    @Test
    void anEmptyTraceKeepsTheStartReserved() {
        assertThat(RecordedTotals.of(6 * MiB, List.of()))
                .isEqualTo(new RecordedTotals(6 * MiB, 6 * MiB, 6 * MiB, 6 * MiB, 0));
    }
}
