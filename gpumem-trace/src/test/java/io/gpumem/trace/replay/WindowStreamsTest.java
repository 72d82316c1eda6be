package io.gpumem.trace.replay;

import static io.gpumem.testing.TestSizes.MiB;
import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.alloc.Pool;
import io.gpumem.engine.RequestStream;
import io.gpumem.history.BlockInfo;
import io.gpumem.history.BlockState;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.window.RecordedConfig;
import io.gpumem.trace.window.WindowRebuilder;
import io.gpumem.trace.window.WindowStart;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** Compiling a trace window into the request stream: which slot each op names. */
class WindowStreamsTest {
    private static final long BASE = 0x7f0000000000L;

    /**
     * A request the recording saw fail, asked again by a what-if run ({@code replay --snapshot} of an RMM log with a
     * failed allocation), takes a slot of its own: the frees after it must still release their own allocs' slots, not
     * their neighbours' (they did, one slot off, before the compile counted the asks).
     */
    @Test
    void aFailedRequestAskedAgainDoesNotShiftTheSlotsLaterFreesRelease() {
        List<TraceEntry> trace = List.of(
                TraceEntry.of(TraceAction.ALLOC, BASE, MiB, 0),
                TraceEntry.of(TraceAction.OOM, 0, 64 * MiB, 0),
                TraceEntry.of(TraceAction.ALLOC, BASE + MiB, MiB, 0),
                TraceEntry.of(TraceAction.ALLOC, BASE + 2 * MiB, 2 * MiB, 0),
                TraceEntry.of(TraceAction.FREE_REQUESTED, BASE + 2 * MiB, 2 * MiB, 0),
                TraceEntry.of(TraceAction.FREE_REQUESTED, BASE + MiB, MiB, 0),
                TraceEntry.of(TraceAction.FREE_REQUESTED, BASE, MiB, 0));
        SegmentInfo segment = SegmentInfo.ofBlocks(
                0, BASE, 0, Pool.LARGE, false, List.of(BlockInfo.of(BASE, 20 * MiB, 0, BlockState.INACTIVE)));
        TraceSnapshot s = HandWindows.snapshot(List.of(segment), List.of(trace), Map.of());
        WindowStart start = new WindowRebuilder(RecordedConfig.of(s)).rebuild(s, 0);

        RequestStream stream = WindowStreams.compile(trace, start, new boolean[trace.size()], false, true);

        // every free releases the slot its own address's alloc filled
        for (int k = 0; k < stream.length(); k++) {
            if (stream.op(k) == RequestStream.FREE && stream.entry(k) > 1) {
                long freed = trace.get(stream.entry(k)).addr();
                int allocOp = -1;
                for (int j = 0; j < k; j++) {
                    if (stream.op(j) == RequestStream.ALLOC
                            && trace.get(stream.entry(j)).addr() == freed
                            && trace.get(stream.entry(j)).action() == TraceAction.ALLOC) {
                        allocOp = j;
                    }
                }
                assertThat(stream.slot(k))
                        .as("free at entry %d", stream.entry(k))
                        .isEqualTo(stream.slot(allocOp));
            }
        }
        assertThat(stream.length()).isEqualTo(3 + 2 + 3);
    }
}
