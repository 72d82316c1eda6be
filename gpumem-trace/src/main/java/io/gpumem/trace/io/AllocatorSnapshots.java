package io.gpumem.trace.io;

import io.gpumem.history.BlockInfo;
import io.gpumem.history.FileKeys;
import io.gpumem.history.MemorySnapshot;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceEntry;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Allocator snapshots as files: one or several allocators' {@link MemorySnapshot}s as one {@link TraceSnapshot}
 * (device numbers assigned, settings, no annotations), and the entries a replay writes for a recorded request.
 * Both sides share one model ({@link SegmentInfo}, {@link BlockInfo}, {@link TraceEntry} of
 * {@code io.gpumem.history}); what the allocator records has every key of allocator.md §10 (segments carry
 * {@code requested_size}, {@code segment_pool_id} (0, 0) and {@code is_expandable}; blocks their frames, {@code []}
 * when none was captured; entries their frames, except that entries recorded without context keep no
 * {@code frames} key, as PyTorch writes them; {@code oom} entries carry {@code device_free} and no {@code addr}),
 * so nothing is converted. {@code AllocatorSnapshotsTest} checks that allocator → pickle → file is the identity.
 */
public final class AllocatorSnapshots {

    private AllocatorSnapshots() {}

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
            for (SegmentInfo seg : s.segments()) {
                segments.add(seg.onDevice(d));
            }
            traces.add(
                    s.deviceTraces().isEmpty()
                            ? List.of()
                            : List.copyOf(s.deviceTraces().getFirst()));
            if (settings == null && s.allocatorSettings() != null) {
                settings = new LinkedHashMap<>(s.allocatorSettings());
            }
        }
        segments.sort((x, y) -> Long.compareUnsigned(x.address(), y.address()));
        return new TraceSnapshot(source, SourceFormat.GENERATED, segments, traces, settings, List.of(), Map.of(), true);
    }

    /**
     * An entry the allocator made while serving the recorded request {@code cause}, in the vocabulary of the
     * recording: the allocator's action, address, size and stream; the request's frames, unknown keys
     * ({@code compile_context}, {@code user_metadata}, ...) and {@code time_us}, each present exactly when the
     * request had it.
     */
    public static TraceEntry entry(TraceEntry made, TraceEntry cause) {
        int fields = (made.fields() & ~TraceEntry.TIME_US) | (cause.fields() & TraceEntry.TIME_US);
        return new TraceEntry(
                made.action(),
                made.has(TraceEntry.ADDR) ? made.addr() : 0,
                made.size(),
                made.stream(),
                cause.timeUs(),
                cause.frames(),
                made.deviceFree(),
                FileKeys.of(fields, null, null, cause.extra()));
    }

    /**
     * One device of a file as the allocator's own {@code snapshot()} would return it: its segments and its
     * trace, with the file's settings.
     */
    public static MemorySnapshot toMemorySnapshot(TraceSnapshot file, int device) {
        return new MemorySnapshot(file.segmentsOf(device), List.of(file.traceOf(device)), file.allocatorSettings());
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
}
