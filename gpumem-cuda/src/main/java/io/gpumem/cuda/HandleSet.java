package io.gpumem.cuda;

/**
 * A thread-safe set of non-zero {@code long} handles (CUDA streams and events), so that {@link CudaDevice}
 * can refuse a handle it never created before the driver dereferences it: the real driver treats
 * {@code CUstream} and {@code CUevent} as pointers and may crash the process on a made-up value.
 *
 * <h2>Algorithm</h2>
 * Open addressing with linear probing over a power-of-two {@code long[]}; 0 marks an empty slot (0 is never a
 * stored handle). Removal shifts later entries of the probe run back (no tombstones), so lookups stay short
 * after any number of create/destroy cycles. The table doubles when it is half full.
 *
 * <h2>Invariants</h2>
 * Every stored key is non-zero and is reachable from its home slot without crossing an empty slot;
 * {@code size} is the number of non-zero slots and at most half the capacity. No boxing: a lookup allocates
 * nothing. One monitor guards the table; the critical sections are a few array reads.
 */
final class HandleSet {
    private long[] slots = new long[16];
    private int size;

    /** Adds {@code handle} (non-zero); returns false if it was already present. */
    synchronized boolean add(long handle) {
        requireNonZero(handle);
        if (2 * (size + 1) > slots.length) {
            grow();
        }
        int mask = slots.length - 1;
        for (int i = home(handle, mask); ; i = (i + 1) & mask) {
            if (slots[i] == handle) {
                return false;
            }
            if (slots[i] == 0) {
                slots[i] = handle;
                size++;
                return true;
            }
        }
    }

    /** Whether {@code handle} is present. */
    synchronized boolean contains(long handle) {
        if (handle == 0) {
            return false;
        }
        int mask = slots.length - 1;
        for (int i = home(handle, mask); slots[i] != 0; i = (i + 1) & mask) {
            if (slots[i] == handle) {
                return true;
            }
        }
        return false;
    }

    /** Removes {@code handle}; returns false if it was not present. */
    synchronized boolean remove(long handle) {
        if (handle == 0) {
            return false;
        }
        int mask = slots.length - 1;
        int i = home(handle, mask);
        while (slots[i] != handle) {
            if (slots[i] == 0) {
                return false;
            }
            i = (i + 1) & mask;
        }
        // Backward-shift deletion: move later members of the run into the hole when their home allows it.
        int hole = i;
        for (int j = (hole + 1) & mask; slots[j] != 0; j = (j + 1) & mask) {
            int h = home(slots[j], mask);
            boolean homeOutsideGap = hole <= j ? (h <= hole || h > j) : (h <= hole && h > j);
            if (homeOutsideGap) {
                slots[hole] = slots[j];
                hole = j;
            }
        }
        slots[hole] = 0;
        size--;
        return true;
    }

    synchronized int size() {
        return size;
    }

    private void grow() {
        long[] old = slots;
        slots = new long[old.length * 2];
        int mask = slots.length - 1;
        for (long key : old) {
            if (key != 0) {
                int i = home(key, mask);
                while (slots[i] != 0) {
                    i = (i + 1) & mask;
                }
                slots[i] = key;
            }
        }
    }

    private static int home(long key, int mask) {
        long h = key * 0x9E3779B97F4A7C15L; // Fibonacci hashing spreads pointer-like values
        return (int) (h ^ (h >>> 32)) & mask;
    }

    private static void requireNonZero(long handle) {
        if (handle == 0) {
            throw new IllegalArgumentException("handle 0 cannot be stored");
        }
    }
}
