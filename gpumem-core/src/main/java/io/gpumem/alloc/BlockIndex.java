package io.gpumem.alloc;

import java.util.function.Consumer;

/**
 * Map from the address of an allocated block to the block: PyTorch's {@code allocated_blocks}. Open
 * addressing with linear probing on primitive keys, so lookups and updates box nothing.
 *
 * <p>Hashing is Fibonacci hashing (the top bits of {@code key × 2^64/φ}), which spreads the aligned, regularly
 * spaced addresses a device hands out; the table is kept at most a quarter full, so probe runs, and the runs that
 * a deletion shifts back, stay a slot or two long (at half full they reached a dozen slots on the benchmark's
 * 64 live blocks, and every free paid for it).
 *
 * <p>Invariants: {@code keys[i] == 0} marks an empty slot (address 0 is never allocated); the table is at most
 * a quarter full; {@code shift == 64 − log2(keys.length)}; deletion shifts later entries of the probe run back (no tombstones), so every key is reachable
 * from its home slot without crossing an empty slot.
 */
final class BlockIndex {
    private long[] keys = new long[64];
    private Block[] values = new Block[64];
    private int shift = 64 - 6;
    private int count;

    int size() {
        return count;
    }

    private int hash(long key) {
        return (int) ((key * 0x9E3779B97F4A7C15L) >>> shift);
    }

    Block get(long key) {
        int mask = keys.length - 1;
        for (int i = hash(key); ; i = (i + 1) & mask) {
            long k = keys[i];
            if (k == key) {
                return values[i];
            }
            if (k == 0) {
                return null;
            }
        }
    }

    /** Adds key → block; the key must be absent and non-zero. */
    void put(long key, Block block) {
        if (!putIfAbsent(key, block)) {
            throw new IllegalStateException("address already indexed: 0x" + Long.toHexString(key));
        }
    }

    /** Adds key → block unless the key is present; returns whether it was added. The key must be non-zero. */
    boolean putIfAbsent(long key, Block block) {
        if (key == 0) {
            throw new IllegalArgumentException("address 0 cannot be indexed");
        }
        if ((count + 1) * 4 > keys.length) {
            grow();
        }
        int mask = keys.length - 1;
        int i = hash(key);
        while (keys[i] != 0) {
            if (keys[i] == key) {
                return false;
            }
            i = (i + 1) & mask;
        }
        keys[i] = key;
        values[i] = block;
        count++;
        return true;
    }

    /** Removes the key; returns its block, or null if absent. */
    Block remove(long key) {
        int mask = keys.length - 1;
        int i = hash(key);
        while (true) {
            long k = keys[i];
            if (k == 0) {
                return null;
            }
            if (k == key) {
                break;
            }
            i = (i + 1) & mask;
        }
        Block removed = values[i];
        // backward-shift deletion
        int hole = i;
        int j = i;
        while (true) {
            j = (j + 1) & mask;
            long k = keys[j];
            if (k == 0) {
                break;
            }
            int home = hash(k);
            // move k into the hole if its home is not cyclically in (hole, j]
            boolean between = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
            if (!between) {
                keys[hole] = k;
                values[hole] = values[j];
                hole = j;
            }
        }
        keys[hole] = 0;
        values[hole] = null;
        count--;
        return removed;
    }

    private void grow() {
        long[] oldKeys = keys;
        Block[] oldValues = values;
        keys = new long[oldKeys.length * 2];
        values = new Block[oldKeys.length * 2];
        shift--;
        count = 0;
        for (int i = 0; i < oldKeys.length; i++) {
            if (oldKeys[i] != 0) {
                put(oldKeys[i], oldValues[i]);
            }
        }
    }

    void forEach(Consumer<Block> action) {
        for (int i = 0; i < keys.length; i++) {
            if (keys[i] != 0) {
                action.accept(values[i]);
            }
        }
    }
}
