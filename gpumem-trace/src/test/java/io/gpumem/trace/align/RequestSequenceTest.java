package io.gpumem.trace.align;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.alloc.Pool;
import io.gpumem.history.BlockInfo;
import io.gpumem.history.BlockState;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.io.SourceFormat;
import io.gpumem.trace.io.TraceSnapshot;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * A device trace's requests and levels, on a hand-written window whose figures are worked out below: frees requested
 * and completed (the completion not counted twice), a block at address 0, driver calls raising and lowering reserved
 * bytes, two streams, and the device's index.
 */
class RequestSequenceTest {

    private static final long MIB = 1L << 20;
    private static final long A1 = 0x7f0000000000L;
    private static final long A2 = A1 + 2 * MIB;
    private static final long A3 = A1 + 6 * MIB;
    private static final long A4 = A1 + 8 * MIB;

    private static TraceEntry at(TraceAction a, long addr, long size, long stream) {
        return TraceEntry.of(a, addr, size, stream);
    }

    /**
     * <pre>
     *  entry  what                       allocated after   reserved after
     *   0     segment_alloc 20 MiB              0               20 MiB   (peak reserved so far)
     *   1     alloc a1 2 MiB                    2 MiB
     *   2     alloc a2 4 MiB (stream 7)         6 MiB
     *   3     free_requested a1                 4 MiB
     *   4     free_completed a1                 4 MiB   (counted at the request)
     *   5     alloc a3 1 MiB                    5 MiB
     *   6     segment_alloc 2 MiB                               22 MiB   (peak reserved...)
     *   7     alloc at 0x0, 512 bytes           5 MiB + 512             (...for this request: its moment)
     *   8     free_requested 0x0                5 MiB
     *   9     segment_free 2 MiB                                20 MiB
     *  10     alloc a4 6 MiB                    11 MiB  (peak allocated)
     * </pre>
     */
    private static RequestSequence window(int device) {
        List<TraceEntry> t = List.of(
                at(TraceAction.SEGMENT_ALLOC, A1, 20 * MIB, 0),
                at(TraceAction.ALLOC, A1, 2 * MIB, 0),
                at(TraceAction.ALLOC, A2, 4 * MIB, 7),
                at(TraceAction.FREE_REQUESTED, A1, 2 * MIB, 0),
                at(TraceAction.FREE_COMPLETED, A1, 2 * MIB, 0),
                at(TraceAction.ALLOC, A3, MIB, 0),
                at(TraceAction.SEGMENT_ALLOC, 1L << 46, 2 * MIB, 0),
                at(TraceAction.ALLOC, 0, 512, 0),
                at(TraceAction.FREE_REQUESTED, 0, 512, 0),
                at(TraceAction.SEGMENT_FREE, 1L << 46, 2 * MIB, 0),
                at(TraceAction.ALLOC, A4, 6 * MIB, 0));
        List<List<TraceEntry>> devices = device == 0 ? List.of(t) : List.of(List.of(), t);
        TraceSnapshot s = new TraceSnapshot(
                "hand", SourceFormat.PYTORCH_SNAPSHOT, List.of(), devices, null, null, Map.of(), true);
        return RequestSequence.of(s, device, new FrameSignatures());
    }

    @Test
    void levelsAndPeaksAreTheWindowsAsWorkedOut() {
        RequestSequence s = window(0);
        assertThat(s.size()).isEqualTo(5);
        assertThat(s.entryCount()).isEqualTo(11);
        assertThat(s.startAllocated()).isZero();
        assertThat(s.startReserved()).isZero();
        assertThat(s.peakAllocated()).isEqualTo(11 * MIB);
        assertThat(s.peakAllocatedEntry()).isEqualTo(10);
        assertThat(s.peakReserved()).isEqualTo(22 * MIB);
        // the segment was reserved for the alloc written after it: the peak's moment holds that request
        assertThat(s.peakReservedEntry()).isEqualTo(7);
        assertThat(s.allocatedAtPeakReserved()).isEqualTo(5 * MIB + 512);
        assertThat(s.allocatedBeforeEachRequest()).containsExactly(0, 2 * MIB, 4 * MIB, 5 * MIB, 5 * MIB);
    }

    /**
     * A warm window that never reserves more than its start: one 20 MiB segment holding a 4 MiB block from before the
     * window; a 2 MiB request (6 MiB allocated), the old block's free (2 MiB), a 4 MiB request (6 MiB again). Its peak
     * reserved is the start's, and the moment of it is the first request that holds the most.
     */
    @Test
    void aWindowAtItsStartsPeakReservedTakesItsMostAllocatedMomentThere() {
        List<TraceEntry> t = List.of(
                at(TraceAction.ALLOC, A1 + 4 * MIB, 2 * MIB, 0),
                at(TraceAction.FREE_REQUESTED, A1, 4 * MIB, 0),
                at(TraceAction.ALLOC, A1, 4 * MIB, 0));
        SegmentInfo end = SegmentInfo.ofBlocks(
                0,
                A1,
                0,
                Pool.LARGE,
                false,
                List.of(
                        BlockInfo.of(A1, 4 * MIB, 4 * MIB, BlockState.ACTIVE_ALLOCATED),
                        BlockInfo.of(A1 + 4 * MIB, 2 * MIB, 2 * MIB, BlockState.ACTIVE_ALLOCATED),
                        BlockInfo.of(A1 + 6 * MIB, 14 * MIB, 0, BlockState.INACTIVE)));
        TraceSnapshot snap = new TraceSnapshot(
                "warm", SourceFormat.PYTORCH_SNAPSHOT, List.of(end), List.of(t), null, null, Map.of(), true);
        RequestSequence s = RequestSequence.of(snap, 0, new FrameSignatures());
        assertThat(s.startReserved()).isEqualTo(20 * MIB);
        assertThat(s.startAllocated()).isEqualTo(4 * MIB);
        assertThat(s.peakReserved()).isEqualTo(20 * MIB);
        assertThat(s.peakReservedEntry()).isZero();
        assertThat(s.allocatedAtPeakReserved()).isEqualTo(6 * MIB);
        assertThat(s.liveAt(0, s.peakReservedEntry())).isTrue();
    }

    @Test
    void eachRequestKnowsItsEntriesItsStreamAndWhenItIsLive() {
        RequestSequence s = window(0);
        int[] alloc = new int[5];
        int[] free = new int[5];
        for (int r = 0; r < 5; r++) {
            alloc[r] = s.allocEntryOf(r);
            free[r] = s.freeEntryOf(r);
        }
        assertThat(alloc).containsExactly(1, 2, 5, 7, 10);
        assertThat(free)
                .as("the free request, not its completion; the block at 0x0 too")
                .containsExactly(3, -1, -1, 8, -1);
        assertThat(s.roundedSizeOf(3)).isEqualTo(512);
        assertThat(s.liveAt(0, 0)).as("before its alloc").isFalse();
        assertThat(s.liveAt(0, 1)).isTrue();
        assertThat(s.liveAt(0, 2)).isTrue();
        assertThat(s.liveAt(0, 3)).as("freed at 3").isFalse();
        assertThat(s.liveAt(1, 10)).as("never freed").isTrue();
        assertThat(s.streamOf(0)).as("streams ranked as first seen").isZero();
        assertThat(s.streamOf(1)).isEqualTo(1);
        assertThat(s.streamOf(2)).isZero();
        assertThat(s.framed()).isFalse();
        assertThat(s.device()).isZero();
        assertThat(window(1).device()).isEqualTo(1);
        assertThat(window(1).peakAllocated()).isEqualTo(11 * MIB);
    }
}
