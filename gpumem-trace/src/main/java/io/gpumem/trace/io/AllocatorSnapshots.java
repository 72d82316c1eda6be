package io.gpumem.trace.io;

import io.gpumem.history.Frame;
import io.gpumem.history.MemorySnapshot;
import io.gpumem.history.TraceAction;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Converts snapshots of gpumem's own allocator ({@link MemorySnapshot}, one per device) into the
 * {@link TraceSnapshot} model, so that {@link PytorchSnapshotWriter} can write them in PyTorch's current format.
 *
 * <p>Every key of allocator.md §10 is present: segments carry {@code requested_size}, {@code segment_pool_id} (0, 0)
 * and {@code is_expandable}; blocks and entries carry their frames ({@code []} when none was captured, except
 * that entries recorded without context keep no {@code frames} key, as PyTorch writes them);
 * {@code external_annotations} is an empty list. {@code oom} entries carry {@code device_free} and no
 * {@code addr}. Frames, block states and actions are the allocator's own objects (the file model reuses
 * them), so identical frame lists stay shared.
 */
public final class AllocatorSnapshots {

    private AllocatorSnapshots() {
    }

    /** One device's snapshot, as device {@code 0}. */
    public static TraceSnapshot toTraceSnapshot(MemorySnapshot snapshot, String source) {
        return toTraceSnapshot(List.of(snapshot), source);
    }

    /**
     * Several allocators' snapshots as one file: the i-th becomes device i (segments renumbered, its first
     * device trace becomes {@code device_traces[i]}; a {@code null} element is a device with no segments and an
     * empty trace); settings are taken from the first non-null one. Trailing {@code null}s are dropped.
     */
    public static TraceSnapshot toTraceSnapshot(List<MemorySnapshot> perDevice, String source) {
        List<SegmentInfo> segments = new ArrayList<>();
        List<List<TraceEntry>> traces = new ArrayList<>();
        Map<String, Object> settings = null;
        int devices = perDevice.size();
        while (devices > 0 && perDevice.get(devices - 1) == null) {
            devices--;
        }
        for (int d = 0; d < devices; d++) {
            MemorySnapshot s = perDevice.get(d);
            if (s == null) {
                traces.add(List.of());
                continue;
            }
            for (io.gpumem.history.SegmentInfo seg : s.segments()) {
                List<BlockInfo> blocks = new ArrayList<>(seg.blocks().size());
                for (io.gpumem.history.BlockInfo b : seg.blocks()) {
                    blocks.add(new BlockInfo(b.address(), b.size(), b.requestedSize(), b.state(), b.state().wireName(),
                            orEmpty(b.frames()),                            null, Map.of(), BlockInfo.ADDRESS | BlockInfo.REQUESTED_SIZE));
                }
                segments.add(new SegmentInfo(d, seg.address(), seg.totalSize(), seg.allocatedSize(), seg.activeSize(),
                        seg.requestedSize(), seg.stream(), seg.segmentType(), PoolId.DEFAULT, seg.expandable(),
                        orEmpty(seg.frames()), List.copyOf(blocks), Map.of(),
                        SegmentInfo.REQUESTED_SIZE | SegmentInfo.POOL_ID | SegmentInfo.EXPANDABLE));
            }
            List<TraceEntry> trace = new ArrayList<>();
            if (!s.deviceTraces().isEmpty()) {
                for (io.gpumem.history.TraceEntry e : s.deviceTraces().getFirst()) {
                    TraceAction a = e.action();
                    int fields = TraceEntry.SIZE | TraceEntry.STREAM | TraceEntry.TIME_US;
                    if (a == TraceAction.OOM) {
                        fields |= TraceEntry.DEVICE_FREE;
                    } else {
                        fields |= TraceEntry.ADDR;
                    }
                    trace.add(new TraceEntry(a, a.wireName(), a == TraceAction.OOM ? 0 : e.addr(), e.size(),
                            e.stream(), e.timeUs(), a == TraceAction.OOM ? e.deviceFree() : 0,
                            e.frames(), Map.of(), fields));
                }
            }
            traces.add(List.copyOf(trace));
            if (settings == null && s.allocatorSettings() != null) {
                settings = new LinkedHashMap<>(s.allocatorSettings());
            }
        }
        segments.sort((x, y) -> Long.compareUnsigned(x.address(), y.address()));
        return new TraceSnapshot(source, SourceFormat.GENERATED, segments, traces, settings, List.of(), Map.of(), true);
    }

    /**
     * Writes one allocator's snapshot (as device 0) to {@code file} in PyTorch's current pickle format;
     * {@link PytorchSnapshotWriter} writes a temporary sibling and moves it into place, so a failure leaves no
     * half-written snapshot.
     *
     * @throws IOException when the file cannot be written
     */
    public static void write(MemorySnapshot snapshot, Path file) throws IOException {
        write(List.of(snapshot), file);
    }

    /**
     * Writes several allocators' snapshots as one file (device i = the i-th, as
     * {@link #toTraceSnapshot(List, String)}), atomically like {@link #write(MemorySnapshot, Path)}.
     *
     * @throws IOException when the file cannot be written
     */
    public static void write(List<MemorySnapshot> perDevice, Path file) throws IOException {
        new PytorchSnapshotWriter().write(toTraceSnapshot(perDevice, file.toString()), file);
    }

    private static List<Frame> orEmpty(List<Frame> frames) {
        return frames == null ? List.of() : frames;
    }
}
