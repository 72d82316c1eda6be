package io.gpumem.history;

import java.util.ArrayList;
import java.util.List;

/**
 * The bounded buffer behind {@code _record_memory_history}'s {@code max_entries}: PyTorch's {@code RingBuffer}
 * (2.1+), a vector of entries and the index of the next slot to overwrite. Shared by the PyTorch-exact allocator's
 * recorder and the other policies' history, so both keep and trim entries the same way. Not thread-safe: its owner
 * serialises access.
 *
 * <p>Under one capacity it keeps the most recent {@code capacity} entries, oldest first. A capacity change (a second
 * {@code _record_memory_history} call while recording is on) only sets the limit, as PyTorch's
 * {@code setMaxEntries} does: nothing is dropped or reordered. After a growth, new entries are appended after the
 * slots as they lie, so the buffer is read from the overwrite position and the entries of the old ring's start come
 * after the new ones; after a shrink, the slots past the new capacity keep their old entries while the first
 * {@code capacity} slots are overwritten in turn. PyTorch writes past its vector when the overwrite position reaches
 * its end without meeting the capacity (a shrink below that position); there the position starts again at slot 0
 * (allocator.md §11).
 *
 * <p>Invariant: {@code 0 <= next <= slots.size()}; {@code next == 0} while {@code slots.size() < capacity}, unless
 * the capacity grew after the ring had wrapped.
 */
public final class TraceEntryRing {
    private final ArrayList<TraceEntry> slots = new ArrayList<>();
    private int capacity = 1;
    /** {@code alloc_trace_next}: the slot the next entry overwrites once the buffer holds {@code capacity}. */
    private int next;

    /** Appends {@code e} while the buffer holds fewer than {@code capacity} entries, else overwrites the next slot. */
    public void add(TraceEntry e) {
        if (slots.size() < capacity) {
            slots.add(e);
            return;
        }
        if (next >= slots.size()) {
            next = 0; // PyTorch would write past its vector here (see the class comment)
        }
        slots.set(next++, e);
        if (next == capacity) {
            next = 0;
        }
    }

    /**
     * Sets how many entries are kept (clamped to 1 .. {@code Integer.MAX_VALUE - 8}); the entries already held stay,
     * in place, as PyTorch's {@code setMaxEntries} leaves them.
     */
    public void setCapacity(long maxEntries) {
        capacity = (int) Math.max(1, Math.min(Integer.MAX_VALUE - 8, maxEntries));
    }

    public void clear() {
        slots.clear();
        next = 0;
    }

    public boolean isEmpty() {
        return slots.isEmpty();
    }

    /** The buffered entries from the overwrite position on, then those before it ({@code getEntries}), as a new list. */
    public List<TraceEntry> entries() {
        List<TraceEntry> out = new ArrayList<>(slots.size());
        out.addAll(slots.subList(next, slots.size()));
        out.addAll(slots.subList(0, next));
        return out;
    }
}
