package io.gpumem.stats;

import java.util.Map;
import java.util.TreeMap;

/**
 * Test helper that builds a {@code memory_stats()}-shaped map by applying stat changes the way PyTorch's
 * {@code Stat} does (an increase raises current, allocated and maybe peak; a decrease lowers current and
 * raises freed), so golden tests can replay a worked example event by event instead of typing 100 numbers.
 */
final class StatsMapBuilder {
    static final String[] ARRAY_STATS = {
        "allocation",
        "allocated_bytes",
        "active",
        "active_bytes",
        "requested_bytes",
        "segment",
        "reserved_bytes",
        "inactive_split",
        "inactive_split_bytes"
    };

    private final Map<String, Long> stats = new TreeMap<>();

    StatsMapBuilder() {
        for (String s : ARRAY_STATS) {
            for (String pool : new String[] {"all", "large_pool", "small_pool"}) {
                for (String f : new String[] {"current", "peak", "allocated", "freed"}) {
                    stats.put(s + "." + pool + "." + f, 0L);
                }
            }
        }
        for (String s : new String[] {"oversize_allocations", "oversize_segments"}) {
            for (String f : new String[] {"current", "peak", "allocated", "freed"}) {
                stats.put(s + "." + f, 0L);
            }
        }
        for (String s : new String[] {
            "num_alloc_retries", "num_ooms", "num_sync_all_streams", "num_device_alloc", "num_device_free"
        }) {
            stats.put(s, 0L);
        }
        stats.put("max_split_size", -1L);
    }

    /** Applies {@code delta} to {@code stat} for "all" and the pool ({@code small} or {@code large}). */
    StatsMapBuilder pool(String stat, boolean small, long delta) {
        apply(stat + ".all.", delta);
        apply(stat + (small ? ".small_pool." : ".large_pool."), delta);
        return this;
    }

    StatsMapBuilder single(String stat, long delta) {
        apply(stat + ".", delta);
        return this;
    }

    StatsMapBuilder counter(String key, long delta) {
        stats.merge(key, delta, Long::sum);
        return this;
    }

    private void apply(String prefix, long delta) {
        long current = stats.get(prefix + "current") + delta;
        stats.put(prefix + "current", current);
        if (delta >= 0) {
            stats.merge(prefix + "allocated", delta, Long::sum);
            stats.put(prefix + "peak", Math.max(stats.get(prefix + "peak"), current));
        } else {
            stats.merge(prefix + "freed", -delta, Long::sum);
        }
    }

    Map<String, Long> build() {
        return new TreeMap<>(stats);
    }
}
