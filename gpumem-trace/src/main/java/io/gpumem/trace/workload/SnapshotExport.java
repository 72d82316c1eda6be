package io.gpumem.trace.workload;

import io.gpumem.history.MemorySnapshot;
import io.gpumem.trace.io.BlockInfo;
import io.gpumem.trace.io.PoolId;
import io.gpumem.trace.io.PytorchSnapshotWriter;
import io.gpumem.trace.io.SegmentInfo;
import io.gpumem.trace.io.SourceFormat;
import io.gpumem.history.TraceAction;
import io.gpumem.trace.io.TraceEntry;
import io.gpumem.trace.io.TraceSnapshot;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Writes a simulated allocator's snapshot as a PyTorch snapshot pickle: converts the allocator's
 * {@link MemorySnapshot} into the trace model of {@code io.gpumem.trace.io} and hands it to
 * {@link PytorchSnapshotWriter}, which writes atomically.
 *
 * <p>Frames, block states and actions are the allocator's own objects (the file model reuses them), so frame
 * lists shared between entries stay shared, as PyTorch's pickles share identical stacks.
 */
public final class SnapshotExport {
    private SnapshotExport() {
    }

    /** Converts an allocator snapshot to the trace model. */
    public static TraceSnapshot toTrace(MemorySnapshot snapshot, String source) {
        List<SegmentInfo> segments = new ArrayList<>();
        for (io.gpumem.history.SegmentInfo s : snapshot.segments()) {
            List<BlockInfo> blocks = new ArrayList<>(s.blocks().size());
            for (io.gpumem.history.BlockInfo b : s.blocks()) {
                blocks.add(new BlockInfo(b.address(), b.size(), b.requestedSize(), b.state(), b.state().wireName(),
                        b.frames(), null, Map.of(), BlockInfo.ADDRESS | BlockInfo.REQUESTED_SIZE));
            }
            segments.add(new SegmentInfo(s.device(), s.address(), s.totalSize(), s.allocatedSize(), s.activeSize(),
                    s.requestedSize(), s.stream(), s.segmentType(), PoolId.DEFAULT, s.expandable(),
                    s.frames(), blocks, Map.of(),
                    SegmentInfo.REQUESTED_SIZE | SegmentInfo.POOL_ID | SegmentInfo.EXPANDABLE));
        }
        List<List<TraceEntry>> traces = new ArrayList<>();
        for (List<io.gpumem.history.TraceEntry> trace : snapshot.deviceTraces()) {
            List<TraceEntry> entries = new ArrayList<>(trace.size());
            for (io.gpumem.history.TraceEntry e : trace) {
                TraceAction action = e.action();
                int fields = TraceEntry.SIZE | TraceEntry.STREAM | TraceEntry.TIME_US
                        | (action == TraceAction.OOM ? TraceEntry.DEVICE_FREE : TraceEntry.ADDR);
                entries.add(new TraceEntry(action, action.wireName(), e.addr(), e.size(), e.stream(), e.timeUs(),
                        Math.max(0, e.deviceFree()), e.frames(), Map.of(), fields));
            }
            traces.add(entries);
        }
        return new TraceSnapshot(source, SourceFormat.PYTORCH_SNAPSHOT, segments, traces, snapshot.allocatorSettings(),
                null, Map.of(), true);
    }

    /**
     * Writes the snapshot as a pickle to {@code file}; {@link PytorchSnapshotWriter} writes a temporary sibling
     * and moves it into place, so a failure leaves no half-written snapshot.
     *
     * @throws IOException when the file cannot be written
     */
    public static void write(MemorySnapshot snapshot, Path file) throws IOException {
        new PytorchSnapshotWriter().write(toTrace(snapshot, file.toString()), file);
    }

}
