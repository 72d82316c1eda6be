package io.gpumem.trace.window;

import java.util.Arrays;

/**
 * A map from device addresses to ints without boxing, for the per-entry bookkeeping of window rebuilds and
 * replays.
 *
 * <p>Open addressing with linear probing over a power-of-two table, at most half full. Addresses are aligned
 * to 512 bytes or to whole segments, so their low bits carry almost no information: keys are scrambled with
 * a 64-bit finalizer (multiply, xor-shift) before taking the table index, which is what keeps probes short
 * where {@code HashMap<Long, ...>} degrades into tree bins. Removal uses backward-shift deletion, so there are
 * no tombstones. Key 0 (the null address) is not allowed.
 */
public final class AddressTable {

    private long[] keys;
    private int[] values;
    private int size;
    private int mask;

    public AddressTable() {
        this(16);
    }

    public AddressTable(int expected) {
        int cap = Integer.highestOneBit(Math.max(4, expected) * 2 - 1) << 1;
        keys = new long[cap];
        values = new int[cap];
        mask = cap - 1;
    }

    private static int index(long key, int mask) {
        long h = key * 0x9E3779B97F4A7C15L;
        h ^= h >>> 29;
        h *= 0xBF58476D1CE4E5B9L;
        h ^= h >>> 32;
        return (int) h & mask;
    }

    /** The value for {@code key}, or {@code missing} when absent. */
    public int get(long key, int missing) {
        int i = index(key, mask);
        while (true) {
            long k = keys[i];
            if (k == key) {
                return values[i];
            }
            if (k == 0) {
                return missing;
            }
            i = (i + 1) & mask;
        }
    }

    public boolean containsKey(long key) {
        int i = index(key, mask);
        while (true) {
            long k = keys[i];
            if (k == key) {
                return true;
            }
            if (k == 0) {
                return false;
            }
            i = (i + 1) & mask;
        }
    }

    /** Sets the value for {@code key}; returns the previous value or {@code missing}. */
    public int put(long key, int value, int missing) {
        if (key == 0) {
            throw new IllegalArgumentException("address 0 cannot be a key");
        }
        int i = index(key, mask);
        while (true) {
            long k = keys[i];
            if (k == key) {
                int old = values[i];
                values[i] = value;
                return old;
            }
            if (k == 0) {
                keys[i] = key;
                values[i] = value;
                if (++size * 2 > keys.length) {
                    grow();
                }
                return missing;
            }
            i = (i + 1) & mask;
        }
    }

    /** Removes {@code key}; returns its value or {@code missing}. */
    public int remove(long key, int missing) {
        int i = index(key, mask);
        while (true) {
            long k = keys[i];
            if (k == 0) {
                return missing;
            }
            if (k == key) {
                int old = values[i];
                shiftBack(i);
                size--;
                return old;
            }
            i = (i + 1) & mask;
        }
    }

    private void shiftBack(int hole) {
        int i = hole;
        while (true) {
            i = (i + 1) & mask;
            long k = keys[i];
            if (k == 0) {
                keys[hole] = 0;
                return;
            }
            int home = index(k, mask);
            // Move k into the hole if its home is not in (hole, i] (cyclically).
            boolean movable = hole <= i ? (home <= hole || home > i) : (home <= hole && home > i);
            if (movable) {
                keys[hole] = k;
                values[hole] = values[i];
                hole = i;
            }
        }
    }

    private void grow() {
        long[] oldKeys = keys;
        int[] oldValues = values;
        keys = new long[oldKeys.length * 2];
        values = new int[oldKeys.length * 2];
        mask = keys.length - 1;
        for (int j = 0; j < oldKeys.length; j++) {
            long k = oldKeys[j];
            if (k != 0) {
                int i = index(k, mask);
                while (keys[i] != 0) {
                    i = (i + 1) & mask;
                }
                keys[i] = k;
                values[i] = oldValues[j];
            }
        }
    }

    public int size() {
        return size;
    }

    public void clear() {
        Arrays.fill(keys, 0);
        size = 0;
    }
}
