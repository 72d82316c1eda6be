package io.gpumem.history;

import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * How a snapshot file had one record (a {@link SegmentInfo}, {@link BlockInfo} or {@link TraceEntry}) beyond the
 * values the model keeps: which optional keys were present (bits the record type defines, e.g.
 * {@link TraceEntry#TIME_US}), a name spelled otherwise than the model's own (an action or block state this version
 * does not know, {@code active_awaiting_free}, an odd {@code segment_type}), a 2.0 block's per-block
 * {@code history}, and the keys this version does not interpret ({@code compile_context}, {@code user_metadata},
 * ...) with their values as unpickled, in file order. The writer reproduces the record key for key from it, so a
 * read → write round trip is lossless; what gpumem's allocator records carries its own plain form.
 *
 * <p>Compact by sharing: a record that differs from its kind's plain form only in which optional keys it has
 * shares one instance per key set ({@link #of(int)}), so the millions of entries of a large file cost no object
 * each; only records with unknown keys, an odd spelling or history get their own.
 *
 * @param present bits of the optional keys the record had (meaning per record type)
 * @param spelled the record's name as the file spelled it, or {@code null} when it is the model's own name
 * @param history a 2.0 block's {@code history} list, or {@code null} when absent (every other record)
 * @param extra   keys this version does not interpret, in file order; empty when none
 */
public record FileKeys(
        int present, @Nullable String spelled, @Nullable List<BlockHistory> history, Map<String, Object> extra) {

    private static final FileKeys[] PLAIN = new FileKeys[64];

    static {
        for (int i = 0; i < PLAIN.length; i++) {
            PLAIN[i] = new FileKeys(i, null, null, Map.of());
        }
    }

    public FileKeys {
        extra = extra == null ? Map.of() : extra;
    }

    /** The shared form with these keys present and nothing else (no odd spelling, history or unknown keys). */
    public static FileKeys of(int present) {
        return present >= 0 && present < PLAIN.length ? PLAIN[present] : new FileKeys(present, null, null, Map.of());
    }

    /** A record's form; the shared {@link #of(int)} instance when it has nothing beyond its present keys. */
    public static FileKeys of(
            int present,
            @Nullable String spelled,
            @Nullable List<BlockHistory> history,
            @Nullable Map<String, Object> extra) {
        if (spelled == null && history == null && (extra == null || extra.isEmpty())) {
            return of(present);
        }
        return new FileKeys(present, spelled, history, extra == null ? Map.of() : extra);
    }

    /** Whether the key (a bit of the record type) was present. */
    public boolean has(int key) {
        return (present & key) != 0;
    }

    /** The same form with other keys present. */
    public FileKeys withPresent(int keys) {
        return keys == present ? this : of(keys, spelled, history, extra);
    }
}
