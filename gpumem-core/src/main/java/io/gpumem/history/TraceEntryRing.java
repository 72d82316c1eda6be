package io.gpumem.history;

import java.util.ArrayList;
import java.util.List;

/**
 * The bounded buffer behind {@code _record_memory_history}'s {@code max_entries}: the most recent trace entries,
 * the oldest overwritten first. Shared by the PyTorch-exact allocator's recorder and the other policies' history,
 * so both keep and trim entries the same way. Not thread-safe: its owner serialises access.
 *
 * <p>Invariant: {@code slots.size() <= capacity}; while not full, entries sit in arrival order from slot 0; once
 * full, {@code oldest} is the slot of the oldest entry and the next one to be overwritten.
 */
public final class TraceEntryRing {
    private final ArrayList<TraceEntry> slots = new ArrayList<>();
    private int capacity = 1;
    private int oldest;

    /** Appends {@code e}, dropping the oldest entry when the ring is full. */
    public void add(TraceEntry e) {
        if (slots.size() < capacity) {
            slots.add(e);
        } else {
            slots.set(oldest++, e);
            if (oldest == capacity) {
                oldest = 0;
            }
        }
    }

    /**
     * Sets how many entries are kept (clamped to 1 .. {@code Integer.MAX_VALUE - 8}); when it shrinks, the newest
     * entries are the ones kept, as PyTorch's {@code max_entries} does.
     */
    public void setCapacity(long maxEntries) {
        int max = (int) Math.max(1, Math.min(Integer.MAX_VALUE - 8, maxEntries));
        if (max != capacity && !slots.isEmpty()) {
            List<TraceEntry> kept = entries();
            slots.clear();
            oldest = 0;
            slots.addAll(kept.subList(Math.max(0, kept.size() - max), kept.size()));
        }
        capacity = max;
    }

    public void clear() {
        slots.clear();
        oldest = 0;
    }

    public boolean isEmpty() {
        return slots.isEmpty();
    }

    /** The buffered entries, oldest first, as a new list. */
    public List<TraceEntry> entries() {
        List<TraceEntry> out = new ArrayList<>(slots.size());
        out.addAll(slots.subList(oldest, slots.size()));
        out.addAll(slots.subList(0, oldest));
        return out;
    }
}
