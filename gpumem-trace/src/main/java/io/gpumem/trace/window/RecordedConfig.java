package io.gpumem.trace.window;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.config.ConfigException;
import io.gpumem.trace.io.TraceSnapshot;
import java.util.Map;

/**
 * The allocator configuration a snapshot was recorded under, from its {@code allocator_settings}
 * (allocator.md §10.2). The effective values ({@code max_split_size}, {@code expandable_segments},
 * {@code roundup_power2_divisions}, {@code garbage_collection_threshold}) are read directly rather than
 * re-parsing the raw string, because they are what the allocator actually used (and older files have no
 * string). A snapshot without settings was recorded with the defaults, unless its segments say expandable
 * segments were on; settings holding only the string (ops scripts) are parsed.
 */
public final class RecordedConfig {

    private RecordedConfig() {}

    /**
     * The configuration {@code snapshot} was recorded under.
     *
     * @throws ConfigException when the settings hold only a string, and it does not parse
     */
    public static AllocatorConfig of(TraceSnapshot snapshot) {
        Map<String, Object> s = snapshot.allocatorSettings();
        AllocatorConfig.Builder b = AllocatorConfig.defaults().toBuilder();
        boolean expandable = snapshot.segments().stream().anyMatch(seg -> seg.expandable());
        if (s == null) {
            return b.expandableSegments(expandable).build();
        }
        String raw = snapshot.recordedConfString();
        if (raw != null && !s.containsKey("max_split_size") && !s.containsKey("expandable_segments")) {
            // Only the string was recorded (an ops script): its meaning is what the parser says.
            return AllocatorConfig.parse(raw);
        }
        if (raw != null) {
            b.raw(raw);
        }
        if (s.get("max_split_size") instanceof Number n && n.longValue() > 0) {
            b.maxSplitSize(n.longValue());
        } else if (s.get("max_split_size") instanceof Number n
                && n.longValue() == AllocatorConfig.NEGATIVE_MAX_SPLIT_SIZE_REPORTED) {
            // recorded under a negative max_split_size_mb: 2^64 - 1 MiB, reported as its int64 cast
            b.maxSplitSize(AllocatorConfig.NEGATIVE_MAX_SPLIT_SIZE);
        }
        if (s.get("expandable_segments") instanceof Boolean e) {
            expandable = e;
        }
        b.expandableSegments(expandable);
        if (s.get("garbage_collection_threshold") instanceof Number g) {
            b.garbageCollectionThreshold(g.doubleValue());
        }
        if (s.get("max_non_split_rounding") instanceof Number r && r.longValue() > 0) {
            b.maxNonSplitRounding(r.longValue());
        }
        if (s.get("roundup_power2_divisions") instanceof Map<?, ?> table) {
            int[] divisions = new int[AllocatorConfig.ROUNDUP_INTERVALS];
            for (Map.Entry<?, ?> e : table.entrySet()) {
                try {
                    long mb = Long.parseLong(String.valueOf(e.getKey()));
                    int index = 63 - Long.numberOfLeadingZeros(Math.max(1, mb));
                    if (index < divisions.length && e.getValue() instanceof Number v) {
                        divisions[index] = v.intValue();
                    }
                } catch (NumberFormatException ignored) {
                    // an unknown key in a newer format: keep the default for it
                }
            }
            b.roundupPower2Divisions(divisions);
        }
        return b.build();
    }
}
