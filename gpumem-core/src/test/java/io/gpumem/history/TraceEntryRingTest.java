package io.gpumem.history;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The history ring keeps the newest {@code max_entries} entries, oldest first, through wrap-around; a resize keeps the
 * slots as PyTorch's {@code RingBuffer} does.
 */
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

    /**
     * PyTorch's {@code RingBuffer::setMaxEntries} only sets the limit (allocator.md §10.1): growing a ring that has
     * wrapped appends after the slots as they lie and reads from the overwrite position, so the old ring's start
     * comes after the new entries. Worked by hand on PyTorch's vector: [3, 2] next 1; append 4, 5 gives
     * [3, 2, 4, 5] read from 1; 6 overwrites slot 1, next 2.
     */
    @Test
    void growingAWrappedRingKeepsItsSlotsWherePyTorchKeepsThem() {
        TraceEntryRing ring = new TraceEntryRing();
        ring.setCapacity(2);
        for (long a = 1; a <= 3; a++) {
            ring.add(entry(a));
        }
        assertThat(addrs(ring)).containsExactly(2L, 3L);
        ring.setCapacity(4);
        assertThat(addrs(ring)).containsExactly(2L, 3L);
        ring.add(entry(4));
        ring.add(entry(5));
        assertThat(addrs(ring)).containsExactly(2L, 4L, 5L, 3L);
        ring.add(entry(6));
        assertThat(addrs(ring)).containsExactly(4L, 5L, 3L, 6L);
    }

    /**
     * Shrinking drops nothing: PyTorch's vector keeps its entries and the overwrite position runs on from where it
     * was. Worked by hand: capacity 4, entries 1..6 give [5, 6, 3, 4] next 2; at capacity 2, 7 and 8 overwrite slots
     * 2 and 3 (the position never meets the capacity); where PyTorch would then write past its vector, gpumem starts
     * again at slot 0 and from there cycles in the first two slots.
     */
    @Test
    void shrinkingDropsNothingAndOverwritesFromTheSamePosition() {
        TraceEntryRing ring = new TraceEntryRing();
        ring.setCapacity(4);
        for (long a = 1; a <= 6; a++) {
            ring.add(entry(a));
        }
        ring.setCapacity(2);
        assertThat(addrs(ring)).containsExactly(3L, 4L, 5L, 6L);
        ring.add(entry(7));
        assertThat(addrs(ring)).containsExactly(4L, 5L, 6L, 7L);
        ring.add(entry(8));
        assertThat(addrs(ring)).containsExactly(5L, 6L, 7L, 8L);
        ring.add(entry(9)); // PyTorch: undefined (past the vector); gpumem: slot 0
        assertThat(addrs(ring)).containsExactly(6L, 7L, 8L, 9L);
        ring.add(entry(10)); // slot 1, and the position meets the capacity: back to 0
        assertThat(addrs(ring)).containsExactly(9L, 10L, 7L, 8L);
        ring.add(entry(11));
        assertThat(addrs(ring)).containsExactly(10L, 7L, 8L, 11L);
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
