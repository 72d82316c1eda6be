package io.gpumem.trace.io;

import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceEntry;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * A memory snapshot with its trace, whatever file it came from: the end-state {@code segments} (sorted by
 * address, all devices) and one trace list per device, oldest entry first (allocator.md §10.2). Readers of the
 * CSV formats produce an empty segment list and one device trace of alloc / free entries.
 *
 * <p>{@code allocatorSettings} and {@code externalAnnotations} are {@code null} when the file lacks the key;
 * {@code extra} keeps unknown top-level keys. {@code addressesRecorded} is false when the addresses in the
 * trace are not a PyTorch caching allocator's decisions (synthetic handles of a lifetime CSV, RMM's own
 * pointers): such a file records requests but no allocator state, so it can be replayed for what-if questions (and
 * its states are a replay's) but not checked for placement fidelity.
 *
 * <p>Immutable by convention: readers hand out unmodifiable lists.
 */
public record TraceSnapshot(
        String source,
        SourceFormat format,
        List<SegmentInfo> segments,
        List<List<TraceEntry>> deviceTraces,
        Map<String, Object> allocatorSettings,
        List<Map<String, Object>> externalAnnotations,
        Map<String, Object> extra,
        boolean addressesRecorded) {

    public TraceSnapshot {
        Objects.requireNonNull(source, "source");
        Objects.requireNonNull(format, "format");
        segments = List.copyOf(segments);
        deviceTraces = List.copyOf(deviceTraces);
        extra = extra == null ? Map.of() : extra;
    }

    /** The segments of one device, in address order (unmodifiable; the file's own list when it has one device). */
    public List<SegmentInfo> segmentsOf(int device) {
        int n = segments.size();
        for (int i = 0; i < n; i++) {
            if (segments.get(i).device() != device) {
                List<SegmentInfo> out = new ArrayList<>(segments.subList(0, i));
                for (int j = i + 1; j < n; j++) {
                    SegmentInfo s = segments.get(j);
                    if (s.device() == device) {
                        out.add(s);
                    }
                }
                return Collections.unmodifiableList(out);
            }
        }
        return segments; // every segment is this device's: no copy (a check reads them twice per device)
    }

    /** The trace of one device; empty when the file has none for it (a negative device included). */
    public List<TraceEntry> traceOf(int device) {
        return device >= 0 && device < deviceTraces.size() ? deviceTraces.get(device) : List.of();
    }

    /** Number of trace entries over all devices. */
    public long entryCount() {
        long n = 0;
        for (List<TraceEntry> t : deviceTraces) {
            n += t.size();
        }
        return n;
    }

    /**
     * The {@code PYTORCH_CUDA_ALLOC_CONF} string recorded in {@code allocator_settings} (or its newer name
     * {@code PYTORCH_ALLOC_CONF}); {@code null} when the file has no settings.
     */
    public String recordedConfString() {
        if (allocatorSettings == null) {
            return null;
        }
        Object v = allocatorSettings.get("PYTORCH_CUDA_ALLOC_CONF");
        if (v == null) {
            v = allocatorSettings.get("PYTORCH_ALLOC_CONF");
        }
        return v instanceof String s ? s : null;
    }
}
