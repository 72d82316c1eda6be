package io.gpumem.history;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import org.junit.jupiter.api.Test;

/** The history ring keeps the newest {@code max_entries} entries, oldest first, through wrap-around and resizes. */
class TraceEntryRingTest {

    private static TraceEntry entry(long addr) {
        return new TraceEntry(
                TraceAction.ALLOC, addr, 512, 0, addr, null, -1, TraceEntry.recordedKeys(TraceAction.ALLOC));
    }

    private static List<Long> addrs(TraceEntryRing ring) {
        return ring.entries().stream().map(TraceEntry::addr).toList();
    }

    @Test
    void keepsTheNewestEntriesOldestFirstAfterWrapping() {
        TraceEntryRing ring = new TraceEntryRing();
        ring.setCapacity(3);
        for (long a = 1; a <= 7; a++) {
            ring.add(entry(a));
        }
        assertThat(addrs(ring)).containsExactly(5L, 6L, 7L);
    }

    @Test
    void shrinkingKeepsTheNewestAndGrowingKeepsAll() {
        TraceEntryRing ring = new TraceEntryRing();
        ring.setCapacity(4);
        for (long a = 1; a <= 6; a++) {
            ring.add(entry(a));
        }
        ring.setCapacity(2);
        assertThat(addrs(ring)).containsExactly(5L, 6L);
        ring.setCapacity(5);
        ring.add(entry(7));
        assertThat(addrs(ring)).containsExactly(5L, 6L, 7L);
        ring.clear();
        assertThat(ring.isEmpty()).isTrue();
        assertThat(addrs(ring)).isEmpty();
    }

    @Test
    void capacityIsAtLeastOne() {
        TraceEntryRing ring = new TraceEntryRing();
        ring.setCapacity(0);
        ring.add(entry(1));
        ring.add(entry(2));
        assertThat(addrs(ring)).containsExactly(2L);
    }
}
