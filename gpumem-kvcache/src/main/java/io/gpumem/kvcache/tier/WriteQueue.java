package io.gpumem.kvcache.tier;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import org.jspecify.annotations.Nullable;

/**
 * A bounded FIFO of block records waiting to be written into one tier: a ring of fixed record slots
 * (allocated on first use, then reused), so queueing copies bytes once and allocates nothing in steady
 * state. A producer {@link #claim}s the tail slot, fills it and {@link #commit}s; when every slot is
 * taken, claim answers null and the caller drops the write (it never waits).
 *
 * <p>Invariant: a key is queued at most once ({@link KvTiers} asks {@link #contains} first), so a block
 * evicted twice before the pump is copied and written once. {@link #contains} scans the waiting keys: the
 * ring is small (a few hundred slots at most) and the scan reads two arrays, where a set of keys would
 * allocate on every eviction. A lookup reads a waiting record in place ({@link #recordOf}): a block evicted a moment
 * ago is a hit before the pump has written it.
 */
final class WriteQueue {
    private final Arena arena;
    private final long recordBytes;
    private final MemorySegment[] slots;
    private final long[] keyHi;
    private final long[] keyLo;
    private int head;
    private int size;

    WriteQueue(Arena arena, long recordBytes, int capacity) {
        this.arena = arena;
        this.recordBytes = recordBytes;
        this.slots = new MemorySegment[capacity];
        this.keyHi = new long[capacity];
        this.keyLo = new long[capacity];
    }

    /** The slot to fill next, or null when the queue is full. */
    MemorySegment claim() {
        if (size == slots.length) {
            return null;
        }
        int i = (head + size) % slots.length;
        if (slots[i] == null) {
            slots[i] = arena.allocate(recordBytes, 64);
        }
        return slots[i];
    }

    /** Appends the claimed slot; the key must not be waiting already. */
    void commit(long hi, long lo) {
        int i = (head + size) % slots.length;
        keyHi[i] = hi;
        keyLo[i] = lo;
        size++;
    }

    /** Whether a record of the key waits in the queue. */
    boolean contains(long hi, long lo) {
        return recordOf(hi, lo) != null;
    }

    /** The record of the key waiting in the queue (valid until it is popped), or null. */
    @Nullable
    MemorySegment recordOf(long hi, long lo) {
        for (int k = 0, i = head; k < size; k++, i = i + 1 == slots.length ? 0 : i + 1) {
            if (keyHi[i] == hi && keyLo[i] == lo) {
                return slots[i];
            }
        }
        return null;
    }

    int size() {
        return size;
    }

    MemorySegment headRecord() {
        return slots[head];
    }

    long headHi() {
        return keyHi[head];
    }

    long headLo() {
        return keyLo[head];
    }

    void pop() {
        head = (head + 1) % slots.length;
        size--;
    }
}
