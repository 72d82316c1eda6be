package io.gpumem.stats;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.Map;
import org.junit.jupiter.api.Test;

class MemorySummaryTest {

    /**
     * The allocator.md §6.3 worked example (defaults, one stream), replayed stat by stat: a = 1000 B, b = 3 MiB,
     * c = 25,000,000 B, then free b and free a.
     */
    static Map<String, Long> section63Stats() {
        StatsMapBuilder s = new StatsMapBuilder();
        // 1. a = 1000 B: small pool, new 2 MiB segment, 1024-byte block plus an inactive remainder.
        s.pool("segment", true, 1).pool("reserved_bytes", true, 2 * 1048576).counter("num_device_alloc", 1);
        s.pool("inactive_split", true, 1).pool("inactive_split_bytes", true, 2_096_128);
        s.pool("allocation", true, 1)
                .pool("allocated_bytes", true, 1024)
                .pool("active", true, 1)
                .pool("active_bytes", true, 1024)
                .pool("requested_bytes", true, 1000);
        // 2. b = 3 MiB: large pool, 20 MiB segment, 17 MiB remainder.
        s.pool("segment", false, 1).pool("reserved_bytes", false, 20 * 1048576).counter("num_device_alloc", 1);
        s.pool("inactive_split", false, 1).pool("inactive_split_bytes", false, 17 * 1048576);
        s.pool("allocation", false, 1)
                .pool("allocated_bytes", false, 3 * 1048576)
                .pool("active", false, 1)
                .pool("active_bytes", false, 3 * 1048576)
                .pool("requested_bytes", false, 3 * 1048576);
        // 3. c = 25,000,000 B: rounded 25,000,448, segment 25,165,824, no split (remainder 165,376).
        s.pool("segment", false, 1).pool("reserved_bytes", false, 25_165_824).counter("num_device_alloc", 1);
        s.pool("allocation", false, 1)
                .pool("allocated_bytes", false, 25_165_824)
                .pool("active", false, 1)
                .pool("active_bytes", false, 25_165_824)
                .pool("requested_bytes", false, 25_000_000);
        // 4. free b: merges with its remainder into one free 20 MiB segment.
        s.pool("allocation", false, -1).pool("allocated_bytes", false, -3 * 1048576);
        s.pool("inactive_split", false, -1).pool("inactive_split_bytes", false, -17 * 1048576);
        s.pool("active", false, -1)
                .pool("active_bytes", false, -3 * 1048576)
                .pool("requested_bytes", false, -3 * 1048576);
        // 5. free a: merges back into a free 2 MiB segment.
        s.pool("allocation", true, -1).pool("allocated_bytes", true, -1024);
        s.pool("inactive_split", true, -1).pool("inactive_split_bytes", true, -2_096_128);
        s.pool("active", true, -1).pool("active_bytes", true, -1024).pool("requested_bytes", true, -1000);
        return s.build();
    }

    @Test
    void section63ExampleGivesTheSection83TableExactly() {
        Map<String, Long> stats = section63Stats();
        // The worked example's stated results, so a slip in the replay above cannot pass unnoticed.
        assertThat(stats.get("reserved_bytes.all.current")).isEqualTo(48_234_496L);
        assertThat(stats.get("allocated_bytes.all.current")).isEqualTo(25_165_824L);
        assertThat(stats.get("requested_bytes.all.current")).isEqualTo(25_000_000L);
        assertThat(stats.get("segment.all.current")).isEqualTo(3L);
        assertThat(stats.get("inactive_split.all.peak")).isEqualTo(2L);

        assertThat(MemorySummary.format(stats, 0, false)).isEqualTo(GoldenSummaries.SECTION_8_3);
    }

    @Test
    void everyLineIs77CharactersAndTheTextEndsWithANewline() {
        String text = MemorySummary.format(section63Stats(), 0, false);
        assertThat(text).endsWith("|\n");
        assertThat(text.split("\n", -1)).hasSize(48);
        for (String line : text.substring(0, text.length() - 1).split("\n", -1)) {
            assertThat(line).hasSize(77).startsWith("|").endsWith("|");
        }
    }

    @Test
    void abbreviatedDropsThePoolRows() {
        String full = MemorySummary.format(section63Stats(), 0, false);
        String abbreviated = MemorySummary.format(section63Stats(), 0, true);
        assertThat(abbreviated).doesNotContain("from large pool").doesNotContain("from small pool");
        StringBuilder expected = new StringBuilder();
        for (String line : full.lines().toList()) {
            if (!line.contains("      from ")) {
                expected.append(line).append('\n');
            }
        }
        assertThat(abbreviated).isEqualTo(expected.toString());
        assertThat(abbreviated.split("\n")).hasSize(47 - 18);
    }

    @Test
    void deviceOomAndRetryCountsAreLeftAlignedInTheirFields() {
        Map<String, Long> stats = section63Stats();
        stats.put("num_ooms", 12L);
        stats.put("num_alloc_retries", 345L);
        String[] lines = MemorySummary.format(stats, 7, false).split("\n", -1);
        assertThat(lines[1]).isEqualTo("|                  PyTorch CUDA memory summary, device ID 7                 |");
        assertThat(lines[3]).isEqualTo("|            CUDA OOMs: 12           |        cudaMalloc retries: 345       |");
    }

    @Test
    void sizeUnitsClimbAt768KiBOfTheAllRowValue() {
        assertThat(MemorySummary.formatSize(0, 0)).isEqualTo("     0 B  ");
        assertThat(MemorySummary.formatSize(786_431, 786_431)).isEqualTo("786431 B  ");
        assertThat(MemorySummary.formatSize(786_432, 786_432)).isEqualTo("   768 KiB");
        assertThat(MemorySummary.formatSize(805_306_368, 805_306_368)).isEqualTo("   768 MiB");
        assertThat(MemorySummary.formatSize(805_306_367, 805_306_367)).isEqualTo("786431 KiB");
        // 80 GiB is 81920 MiB, below 768 Ki of MiB, so it stays in MiB.
        assertThat(MemorySummary.formatSize(80L << 30, 80L << 30)).isEqualTo(" 81920 MiB");
        assertThat(MemorySummary.formatSize(768L << 30, 768L << 30)).isEqualTo("   768 GiB");
        assertThat(MemorySummary.formatSize(3L << 50, 3L << 50)).isEqualTo("  3072 TiB");
        // Beyond PiB there is no larger unit: the number just grows.
        assertThat(MemorySummary.formatSize(1L << 62, 1L << 62)).isEqualTo("  4096 PiB");
        // A pool row uses the unit of its "all" row, truncated.
        assertThat(MemorySummary.formatSize(1000, 28_146_728)).isEqualTo("     0 KiB");
        assertThat(MemorySummary.formatSize(5_000_000, 1L << 40)).isEqualTo("     0 GiB");
    }

    @Test
    void countUnitsClimbAt750Thousand() {
        assertThat(MemorySummary.formatCount(0, 0)).isEqualTo("      0   ");
        assertThat(MemorySummary.formatCount(749_999, 749_999)).isEqualTo(" 749999   ");
        assertThat(MemorySummary.formatCount(750_000, 750_000)).isEqualTo("    750 K ");
        assertThat(MemorySummary.formatCount(750_000_000, 750_000_000)).isEqualTo("    750 M ");
        assertThat(MemorySummary.formatCount(7_500_000_000L, 7_500_000_000L)).isEqualTo("   7500 M ");
        // M is the last prefix: a count of 750 thousand million or more stays in it, as _format_count's loop ends
        assertThat(MemorySummary.formatCount(1_000_000_000_000L, 1_000_000_000_000L))
                .isEqualTo("1000000 M ");
        assertThat(MemorySummary.formatCount(1234, 800_000)).isEqualTo("      1 K ");
    }

    @Test
    void oversizeRowsPickTheirUnitFromTheirOwnValues() {
        Map<String, Long> stats = section63Stats();
        stats.put("oversize_allocations.current", 800_000L);
        stats.put("oversize_allocations.peak", 800_000L);
        stats.put("oversize_allocations.allocated", 900_000L);
        stats.put("oversize_allocations.freed", 100_000L);
        String text = MemorySummary.format(stats, 0, false);
        assertThat(text).contains("| Oversize allocations  |     800 K  |     800 K  |     900 K  |  100000    |\n");
    }

    @Test
    void aMissingKeyIsNamed() {
        Map<String, Long> stats = section63Stats();
        stats.remove("active_bytes.small_pool.freed");
        assertThatThrownBy(() -> MemorySummary.format(stats, 0, false))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("active_bytes.small_pool.freed");
        // Abbreviated output does not read the pool rows, so it does not need them (as in PyTorch).
        assertThat(MemorySummary.format(stats, 0, true)).contains("Active memory");
    }
}
