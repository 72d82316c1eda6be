package io.gpumem.policy;

import java.util.List;

/**
 * The stitch allocator's live blocks by address: an open-addressing hash table with primitive {@code long} keys
 * (linear probing, backward-shift deletion), so lookups, insertions and removals allocate nothing and box no key.
 *
 * <p>Invariants: key 0 marks an empty slot (0 is never a block address); every key sits in the probe run that
 * starts at its hash slot with no empty slot between; the table is at most half full (it doubles beyond that).
 * Design notes: policies.md §2.1.
 */
final class BlockTable {
    private long[] keys = new long[64];
    private StitchBlock[] values = new StitchBlock[64];
    private int count;

    int size() {
        return count;
    }

    private int slot(long key) {
        return (int) ((key * 0x9E3779B97F4A7C15L) >>> 40) & (keys.length - 1);
    }

    StitchBlock get(long key) {
        int mask = keys.length - 1;
        for (int i = slot(key); ; i = (i + 1) & mask) {
            long k = keys[i];
            if (k == key) {
                return values[i];
            }
            if (k == 0) {
                return null;
            }
        }
    }

    void put(long key, StitchBlock value) {
        if (2 * (count + 1) > keys.length) {
            grow();
        }
        int mask = keys.length - 1;
        int i = slot(key);
        while (keys[i] != 0 && keys[i] != key) {
            i = (i + 1) & mask;
        }
        if (keys[i] == 0) {
            count++;
        }
        keys[i] = key;
        values[i] = value;
    }

    /** Removes and returns the block at {@code key}, or null when there is none. */
    StitchBlock remove(long key) {
        int mask = keys.length - 1;
        int i = slot(key);
        while (keys[i] != key) {
            if (keys[i] == 0) {
                return null;
            }
            i = (i + 1) & mask;
        }
        StitchBlock removed = values[i];
        count--;
        // Backward shift: move later entries of the probe run into the hole when their home slot allows it.
        for (int j = (i + 1) & mask; keys[j] != 0; j = (j + 1) & mask) {
            int home = slot(keys[j]);
            if (((j - home) & mask) >= ((j - i) & mask)) {
                keys[i] = keys[j];
                values[i] = values[j];
                i = j;
            }
        }
        keys[i] = 0;
        values[i] = null;
        return removed;
    }

    /** Appends every block (any order; not the hot path). */
    void addTo(List<StitchBlock> out) {
        for (int i = 0; i < keys.length; i++) {
            if (keys[i] != 0) {
                out.add(values[i]);
            }
        }
    }

    private void grow() {
        long[] oldKeys = keys;
        StitchBlock[] oldValues = values;
        keys = new long[2 * oldKeys.length];
        values = new StitchBlock[keys.length];
        count = 0;
        for (int i = 0; i < oldKeys.length; i++) {
            if (oldKeys[i] != 0) {
                put(oldKeys[i], oldValues[i]);
            }
        }
    }
}
