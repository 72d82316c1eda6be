package io.gpumem.kvcache.pool;

import java.util.Arrays;

/**
 * Multimap from a 128-bit block key to block ids, for prefix-cache lookup.
 *
 * <p>Open addressing with linear probing over three parallel primitive arrays (key high, key low,
 * block id; id −1 marks an empty slot), so no object exists per entry. A key may appear several
 * times (vLLM does not de-duplicate identical blocks because block tables are append-only); all
 * entries of one key lie in the probe run that starts at the key's home slot and ends at the first
 * empty slot, which is what {@link #homeSlot}/{@link #nextSlot} let a caller walk. Removal shifts
 * later entries of the run back (no tombstones), so runs stay short.
 *
 * <p>Invariants: capacity is a power of two at least twice the maximum number of entries (one per
 * block), so the table never fills and probe runs end; every entry is reachable from its home slot
 * without crossing an empty slot.
 */
final class BlockHashMap {
    static final int EMPTY = -1;

    final long[] keyHi;
    final long[] keyLo;
    final int[] block;
    private final int mask;
    private int size;

    BlockHashMap(int maxEntries) {
        int cap = Integer.highestOneBit(Math.max(16, maxEntries) * 2 - 1) << 1;
        keyHi = new long[cap];
        keyLo = new long[cap];
        block = new int[cap];
        Arrays.fill(block, EMPTY);
        mask = cap - 1;
    }

    int size() {
        return size;
    }

    int homeSlot(long hi, long lo) {
        long h = (lo ^ (hi >>> 29)) * 0x9E3779B97F4A7C15L;
        return (int) (h >>> 40) & mask;
    }

    int nextSlot(int slot) {
        return (slot + 1) & mask;
    }

    void put(long hi, long lo, int blockId) {
        int i = homeSlot(hi, lo);
        while (block[i] != EMPTY) {
            i = (i + 1) & mask;
        }
        keyHi[i] = hi;
        keyLo[i] = lo;
        block[i] = blockId;
        size++;
    }

    /** Whether the entry (key, blockId) exists. */
    boolean contains(long hi, long lo, int blockId) {
        return find(hi, lo, blockId) >= 0;
    }

    private int find(long hi, long lo, int blockId) {
        for (int i = homeSlot(hi, lo); block[i] != EMPTY; i = (i + 1) & mask) {
            if (block[i] == blockId && keyHi[i] == hi && keyLo[i] == lo) {
                return i;
            }
        }
        return -1;
    }

    /** Removes the entry (key, blockId); returns whether it was present. */
    boolean remove(long hi, long lo, int blockId) {
        int i = find(hi, lo, blockId);
        if (i < 0) {
            return false;
        }
        // Backward-shift deletion: move later entries of the run into the hole when their home slot
        // does not lie cyclically in (hole, position].
        int hole = i;
        int j = i;
        while (true) {
            j = (j + 1) & mask;
            if (block[j] == EMPTY) {
                break;
            }
            int home = homeSlot(keyHi[j], keyLo[j]);
            boolean homeInRange = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
            if (!homeInRange) {
                keyHi[hole] = keyHi[j];
                keyLo[hole] = keyLo[j];
                block[hole] = block[j];
                hole = j;
            }
        }
        block[hole] = EMPTY;
        size--;
        return true;
    }

    void clear() {
        Arrays.fill(block, EMPTY);
        size = 0;
    }
}
