package io.gpumem.stats;

import java.util.Map;

/**
 * Renders {@code torch.cuda.memory_summary()} (allocator.md §8) from a {@code memory_stats()}-shaped map.
 *
 * <p>Layout: a 75-column table wrapped in {@code |...|} borders, a header with the device, OOM and retry
 * counts, nine metric groups (the "all" row, then the large- and small-pool rows unless abbreviated) and
 * two single-row oversize groups, closed by a rule of {@code =}. The text ends with a newline, as PyTorch's
 * return value does.
 *
 * <p>Unit choice follows PyTorch's {@code _format_size}/{@code _format_count}: for each column the unit is
 * picked from the group's "all" value (the oversize rows use their own values), climbing one unit while that
 * value is at least 768 KiB (sizes) or 750,000 (counts) in the current unit; every row of the group is then
 * divided the same number of times with floor division, which is why 1000 bytes in the small pool prints
 * {@code 0 KiB} when the "all" column is in KiB.
 */
public final class MemorySummary {

    /** Inner width of the table; each line is this plus the two border characters. */
    static final int WIDTH = 75;

    private static final String[] SIZE_UNITS = {"B  ", "KiB", "MiB", "GiB", "TiB", "PiB"};
    private static final String[] COUNT_UNITS = {" ", "K", "M"};
    private static final long SIZE_STEP_THRESHOLD = 768 * 1024;
    private static final long COUNT_STEP_THRESHOLD = 750 * 1000;
    private static final String[] POOLS = {"all", "large_pool", "small_pool"};
    private static final String[] POOL_LABELS = {null, "      from large pool", "      from small pool"};
    private static final String[] FIELDS = {"current", "peak", "allocated", "freed"};

    private record Metric(String key, String label, boolean bytes) {}

    private static final Metric[] POOLED = {
        new Metric("allocated_bytes", "Allocated memory", true),
        new Metric("active_bytes", "Active memory", true),
        new Metric("requested_bytes", "Requested memory", true),
        new Metric("reserved_bytes", "GPU reserved memory", true),
        new Metric("inactive_split_bytes", "Non-releasable memory", true),
        new Metric("allocation", "Allocations", false),
        new Metric("active", "Active allocs", false),
        new Metric("segment", "GPU reserved segments", false),
        new Metric("inactive_split", "Non-releasable allocs", false),
    };

    private static final Metric[] SINGLE = {
        new Metric("oversize_allocations", "Oversize allocations", false),
        new Metric("oversize_segments", "Oversize GPU segments", false),
    };

    private MemorySummary() {}

    /**
     * Formats the summary table.
     *
     * @param stats        {@code memory_stats()} keys, e.g. {@code allocated_bytes.all.current}; every key the table
     *                     reads must be present
     * @param deviceIndex  the device number printed in the title
     * @param abbreviated  true to omit the per-pool rows, as {@code memory_summary(abbreviated=True)}
     * @return the table, each line 77 characters, ending with a newline
     * @throws IllegalArgumentException naming the first missing key
     */
    public static String format(Map<String, Long> stats, int deviceIndex, boolean abbreviated) {
        StringBuilder sb = new StringBuilder(64 * 80);
        line(sb, "=".repeat(WIDTH));
        line(
                sb,
                " " + " ".repeat(16) + " PyTorch CUDA memory summary, device ID "
                        + padRight(Integer.toString(deviceIndex), 17) + " ");
        line(sb, "-".repeat(WIDTH));
        line(
                sb,
                "  " + " ".repeat(9) + " CUDA OOMs: " + padRight(Long.toString(get(stats, "num_ooms")), 12) + " | "
                        + " ".repeat(6) + " cudaMalloc retries: "
                        + padRight(Long.toString(get(stats, "num_alloc_retries")), 8)
                        + "  ");
        line(sb, "=".repeat(WIDTH));
        line(sb, "        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  ");
        int rows = abbreviated ? 1 : POOLS.length;
        for (Metric m : POOLED) {
            line(sb, "-".repeat(WIDTH));
            long[] unitBase = new long[FIELDS.length];
            for (int p = 0; p < rows; p++) {
                long[] values = new long[FIELDS.length];
                for (int f = 0; f < FIELDS.length; f++) {
                    values[f] = get(stats, m.key + "." + POOLS[p] + "." + FIELDS[f]);
                    if (p == 0) {
                        unitBase[f] = values[f];
                    }
                }
                row(sb, p == 0 ? m.label : POOL_LABELS[p], m.bytes, values, unitBase);
            }
        }
        for (Metric m : SINGLE) {
            line(sb, "-".repeat(WIDTH));
            long[] values = new long[FIELDS.length];
            for (int f = 0; f < FIELDS.length; f++) {
                values[f] = get(stats, m.key + "." + FIELDS[f]);
            }
            row(sb, m.label, m.bytes, values, values);
        }
        line(sb, "=".repeat(WIDTH));
        return sb.toString();
    }

    private static void row(StringBuilder sb, String label, boolean bytes, long[] values, long[] unitBase) {
        StringBuilder r = new StringBuilder(WIDTH);
        r.append(' ').append(padRight(label, 21));
        for (int f = 0; f < values.length; f++) {
            r.append(" | ").append(bytes ? formatSize(values[f], unitBase[f]) : formatCount(values[f], unitBase[f]));
        }
        r.append(' ');
        line(sb, r.toString());
    }

    /** PyTorch's {@code _format_size}: {@code f"{sz:6d} {unit}"}. */
    static String formatSize(long value, long unitBase) {
        return scaled(value, unitBase, SIZE_UNITS, SIZE_STEP_THRESHOLD, 1024, 6);
    }

    /** PyTorch's {@code _format_count}: {@code f"{cnt:7d} {unit} "}. */
    static String formatCount(long value, long unitBase) {
        return scaled(value, unitBase, COUNT_UNITS, COUNT_STEP_THRESHOLD, 1000, 7) + " ";
    }

    /**
     * The unit stepping both formats share: the unit is chosen by the row's {@code unitBase} (not by the value),
     * stepping up by {@code step} while the base is at least {@code threshold}; the value is floor-divided alike
     * and right-aligned in {@code width}.
     */
    private static String scaled(long value, long unitBase, String[] units, long threshold, long step, int width) {
        int unit = 0;
        long v = value;
        long base = unitBase;
        while (unit + 1 < units.length && base >= threshold) {
            unit++;
            v = Math.floorDiv(v, step);
            base = Math.floorDiv(base, step);
        }
        return padLeft(Long.toString(v), width) + " " + units[unit];
    }

    private static long get(Map<String, Long> stats, String key) {
        Long v = stats.get(key);
        if (v == null) {
            throw new IllegalArgumentException("memory stats lack key " + key);
        }
        return v;
    }

    private static void line(StringBuilder sb, String content) {
        sb.append('|').append(content).append("|\n");
    }

    private static String padRight(String s, int width) {
        return s.length() >= width ? s : s + " ".repeat(width - s.length());
    }

    private static String padLeft(String s, int width) {
        return s.length() >= width ? s : " ".repeat(width - s.length()) + s;
    }
}
