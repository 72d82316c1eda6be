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
 * The one conversion between the two models of a snapshot: the allocator's ({@link MemorySnapshot} and
 * {@code io.gpumem.history}'s records, what gpumem's allocator records on its hot path and knows about) and the
 * file model of this package ({@link TraceSnapshot}, which also keeps which keys a file had, names as spelled,
 * pool ids and unknown keys, so that read → write is lossless). Nothing else converts between them;
 * {@code AllocatorSnapshotsTest} checks that allocator → file → pickle → file → allocator is the identity.
 *
 * <p>Towards files every key of allocator.md §10 is present: segments carry {@code requested_size},
 * {@code segment_pool_id} (0, 0) and {@code is_expandable}; blocks and entries carry their frames ({@code []} when
 * none was captured, except that entries recorded without context keep no {@code frames} key, as PyTorch writes
 * them); {@code external_annotations} is an empty list. {@code oom} entries carry {@code device_free} and no
 * {@code addr}; both models say −1 for the {@code deviceFree} of other entries (no such key). Frames, block
 * states and actions are the allocator's own objects (the file model reuses them), so identical frame lists stay
 * shared. Entries a replay makes for a recorded request take that request's frames, unknown keys and time
 * ({@link #entry(io.gpumem.history.TraceEntry, TraceEntry)}).
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
                segments.add(segment(seg, d));
            }
            List<TraceEntry> trace = new ArrayList<>();
            if (!s.deviceTraces().isEmpty()) {
                for (io.gpumem.history.TraceEntry e : s.deviceTraces().getFirst()) {
                    trace.add(entry(e));
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
     * One segment of the allocator's snapshot as the file model has it, renumbered to {@code device}: every key
     * present, the default pool, frames {@code []} when none were captured.
     */
    public static SegmentInfo segment(io.gpumem.history.SegmentInfo seg, int device) {
        List<BlockInfo> blocks = new ArrayList<>(seg.blocks().size());
        for (io.gpumem.history.BlockInfo b : seg.blocks()) {
            blocks.add(block(b));
        }
        return new SegmentInfo(device, seg.address(), seg.totalSize(), seg.allocatedSize(), seg.activeSize(),
                seg.requestedSize(), seg.stream(), seg.segmentType(), PoolId.DEFAULT, seg.expandable(),
                orEmpty(seg.frames()), List.copyOf(blocks), Map.of(),
                SegmentInfo.REQUESTED_SIZE | SegmentInfo.POOL_ID | SegmentInfo.EXPANDABLE);
    }

    /** One block of the allocator's snapshot as the file model has it (frames {@code []} when none). */
    public static BlockInfo block(io.gpumem.history.BlockInfo b) {
        return new BlockInfo(b.address(), b.size(), b.requestedSize(), b.state(), b.state().wireName(),
                orEmpty(b.frames()), null, Map.of(), BlockInfo.ADDRESS | BlockInfo.REQUESTED_SIZE);
    }

    /**
     * One entry of the allocator's history as the file model has it: {@code addr}, {@code size}, {@code stream},
     * {@code time_us} and the captured frames (no {@code frames} key when none were captured); an {@code oom}
     * entry has {@code device_free} instead of {@code addr}; other entries have none (−1 in both models).
     */
    public static TraceEntry entry(io.gpumem.history.TraceEntry e) {
        boolean oom = e.action() == TraceAction.OOM;
        int fields = TraceEntry.SIZE | TraceEntry.STREAM | TraceEntry.TIME_US
                | (oom ? TraceEntry.DEVICE_FREE : TraceEntry.ADDR);
        return new TraceEntry(e.action(), e.action().wireName(), oom ? 0 : e.addr(), e.size(), e.stream(),
                e.timeUs(), e.deviceFree(), e.frames(), Map.of(), fields);
    }

    /**
     * An entry the allocator made while serving the recorded request {@code cause}, in the vocabulary of the
     * recording: the allocator's action, address, size and stream; the request's frames, unknown keys
     * ({@code compile_context}, {@code user_metadata}, ...) and {@code time_us}, each present exactly when the
     * request had it.
     */
    public static TraceEntry entry(io.gpumem.history.TraceEntry e, TraceEntry cause) {
        TraceEntry own = entry(e);
        int fields = (own.fields() & ~TraceEntry.TIME_US) | (cause.fields() & TraceEntry.TIME_US);
        return new TraceEntry(own.action(), own.actionName(), own.addr(), own.size(), own.stream(), cause.timeUs(),
                own.deviceFree(), cause.frames(), cause.extra(), fields);
    }

    /**
     * The allocator-side view of one device of a file ({@link MemorySnapshot}, as the allocator's own
     * {@code snapshot()} returns it): the inverse of {@link #toTraceSnapshot(List, String)} for what the
     * allocator models. Keys the file model keeps beyond that (pool ids, unknown keys, which keys were present)
     * have no place in it.
     */
    public static MemorySnapshot toMemorySnapshot(TraceSnapshot file, int device) {
        List<io.gpumem.history.SegmentInfo> segments = new ArrayList<>();
        for (SegmentInfo seg : file.segmentsOf(device)) {
            List<io.gpumem.history.BlockInfo> blocks = new ArrayList<>(seg.blocks().size());
            for (BlockInfo b : seg.blocks()) {
                blocks.add(new io.gpumem.history.BlockInfo(b.address(), b.size(), b.requestedSize(), b.state(),
                        orEmpty(b.frames())));
            }
            segments.add(new io.gpumem.history.SegmentInfo(device, seg.address(), seg.totalSize(),
                    seg.allocatedSize(), seg.activeSize(), seg.requestedSize(), seg.stream(),
                    io.gpumem.alloc.Pool.ofSegmentType(seg.segmentType()),
                    seg.expandable(), orEmpty(seg.frames()), List.copyOf(blocks)));
        }
        List<io.gpumem.history.TraceEntry> trace = new ArrayList<>();
        for (TraceEntry e : file.traceOf(device)) {
            trace.add(new io.gpumem.history.TraceEntry(e.action(), e.addr(), e.size(), e.stream(), e.timeUs(),
                    e.frames(), e.deviceFree()));
        }
        return new MemorySnapshot(List.copyOf(segments), List.of(List.copyOf(trace)), file.allocatorSettings());
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
