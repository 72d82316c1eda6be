package io.gpumem.alloc;

import java.util.Arrays;
import java.util.function.Consumer;
import org.jspecify.annotations.Nullable;

/**
 * The project's one map from device addresses to values without boxing the keys: open addressing with linear
 * probing over a power-of-two table. The caching allocator's {@code allocated_blocks} and the stitch policy's
 * live blocks use it with object values ({@link #forObjects()}); trace rebuilds and replays use it with int values ({@link #forInts()}), which box
 * nothing either. A table holds one kind of value; the other kind's methods throw.
 *
 * <h2>Hashing</h2>
 * Fibonacci hashing: the slot is the top bits of {@code key × 2^64/φ}. Device addresses are aligned (512 bytes,
 * pages, whole segments) and regularly spaced, so their low bits carry almost no information; the multiply
 * folds every key bit into the top bits, which is what spreads them (taking the low bits of a plain or
 * multiplied key would not). The table is kept at most a quarter full: at half full the probe runs reached a
 * dozen slots on the allocator benchmark's 64 live blocks, and every removal's backward shift walked them.
 *
 * <p>Invariants: {@code keys[i] == 0} marks an empty slot (address 0 is never a key); at most a quarter of the
 * slots are used; {@code shift == 64 − log2(keys.length)}; removal shifts later entries of the probe run back
 * (no tombstones), so every key is reachable from its home slot without crossing an empty slot. Not
 * thread-safe. No method allocates except when the table grows.
 *
 * @param <V> the value type of an object table ({@code Void} for an int table)
 */
public final class AddressTable<V> {
    private static final int MIN_CAPACITY = 16;

    private static final Object[] NO_OBJECTS = {};
    private static final int[] NO_INTS = {};
    private static final long[] NO_KEYS = {};

    /** Whether this is an int table: its values are in {@link #ints}, and {@link #objects} stays empty. */
    private final boolean intValues;

    private long[] keys;
    /** Values of an object table, slot by slot; empty for an int table. */
    private Object[] objects = NO_OBJECTS;
    /** Values of an int table, slot by slot; empty for an object table. */
    private int[] ints = NO_INTS;

    private int shift;
    private int count;

    private AddressTable(boolean intValues, int expected) {
        this.intValues = intValues;
        keys = NO_KEYS;
        growTo(capacityFor(expected));
    }

    /** The table length that holds {@code expected} keys at most a quarter full. */
    private static int capacityFor(int expected) {
        return Integer.highestOneBit(Math.max(MIN_CAPACITY / 4, expected) * 4 - 1) << 1;
    }

    /** A table of object values. */
    public static <V> AddressTable<V> forObjects() {
        return new AddressTable<>(false, MIN_CAPACITY);
    }

    /** A table of object values, sized for about {@code expected} keys before it grows. */
    public static <V> AddressTable<V> forObjects(int expected) {
        return new AddressTable<>(false, expected);
    }

    /** A table of int values, sized for about {@code expected} keys before it grows. */
    public static AddressTable<Void> forInts(int expected) {
        return new AddressTable<>(true, expected);
    }

    /** A table of int values. */
    public static AddressTable<Void> forInts() {
        return forInts(MIN_CAPACITY / 4);
    }

    public int size() {
        return count;
    }

    private int home(long key) {
        return (int) ((key * 0x9E3779B97F4A7C15L) >>> shift);
    }

    /** The slot holding {@code key}, or −1 when absent. */
    private int slotOf(long key) {
        int mask = keys.length - 1;
        for (int i = home(key); ; i = (i + 1) & mask) {
            long k = keys[i];
            if (k == key) {
                return i;
            }
            if (k == 0) {
                return -1;
            }
        }
    }

    /**
     * The slot for a new key: its index when free (the caller fills it), or {@code −1 − index} when the key is
     * already there. Grows first if needed.
     */
    private int claim(long key) {
        if (key == 0) {
            throw new IllegalArgumentException("address 0 cannot be a key");
        }
        if ((count + 1) * 4 > keys.length) {
            growTo(keys.length * 2);
        }
        int mask = keys.length - 1;
        int i = home(key);
        while (keys[i] != 0) {
            if (keys[i] == key) {
                return -1 - i;
            }
            i = (i + 1) & mask;
        }
        keys[i] = key;
        count++;
        return i;
    }

    public boolean containsKey(long key) {
        return slotOf(key) >= 0;
    }

    // ---------------------------------------------------------------- object values

    /** The value of {@code key}, or null when absent. */
    @SuppressWarnings("unchecked")
    public @Nullable V get(long key) {
        Object[] lane = objectLane();
        int i = slotOf(key);
        return i < 0 ? null : (V) lane[i];
    }

    /** Adds key → value unless the key is present; returns whether it was added. The key must be non-zero. */
    public boolean putIfAbsent(long key, V value) {
        objectLane();
        int i = claim(key);
        if (i < 0) {
            return false;
        }
        objects[i] = value; // read after claim, which may have grown the table
        return true;
    }

    /** Sets key → value (the key must be non-zero); returns the previous value, or null when there was none. */
    @SuppressWarnings("unchecked")
    public @Nullable V put(long key, V value) {
        objectLane();
        int i = claim(key);
        V old = null;
        if (i < 0) {
            i = -1 - i;
            old = (V) objects[i];
        }
        objects[i] = value; // read after claim, which may have grown the table
        return old;
    }

    /** Removes {@code key}; returns its value, or null when absent. */
    @SuppressWarnings("unchecked")
    public @Nullable V remove(long key) {
        Object[] lane = objectLane();
        int i = slotOf(key);
        if (i < 0) {
            return null;
        }
        V removed = (V) lane[i];
        removeAt(i);
        return removed;
    }

    /** Calls {@code action} with every value, in no particular order. */
    @SuppressWarnings("unchecked")
    public void forEach(Consumer<? super V> action) {
        Object[] lane = objectLane();
        for (int i = 0; i < keys.length; i++) {
            if (keys[i] != 0) {
                action.accept((V) lane[i]);
            }
        }
    }

    private Object[] objectLane() {
        if (intValues) {
            throw new IllegalStateException("an int table has no object values");
        }
        return objects;
    }

    // ---------------------------------------------------------------- int values

    /** The value of {@code key}, or {@code missing} when absent. */
    public int getInt(long key, int missing) {
        int[] lane = intLane();
        int i = slotOf(key);
        return i < 0 ? missing : lane[i];
    }

    /** Sets the value of {@code key} (non-zero); returns the previous value, or {@code missing}. */
    public int putInt(long key, int value, int missing) {
        intLane();
        int i = claim(key);
        if (i < 0) {
            i = -1 - i;
            int old = ints[i];
            ints[i] = value;
            return old;
        }
        ints[i] = value;
        return missing;
    }

    /** Removes {@code key}; returns its value, or {@code missing} when absent. */
    public int removeInt(long key, int missing) {
        int[] lane = intLane();
        int i = slotOf(key);
        if (i < 0) {
            return missing;
        }
        int removed = lane[i];
        removeAt(i);
        return removed;
    }

    private int[] intLane() {
        if (!intValues) {
            throw new IllegalStateException("an object table has no int values");
        }
        return ints;
    }

    // ---------------------------------------------------------------- removal and growth

    /** Empties slot {@code i} with backward-shift deletion. */
    private void removeAt(int i) {
        int mask = keys.length - 1;
        int hole = i;
        int j = i;
        while (true) {
            j = (j + 1) & mask;
            long k = keys[j];
            if (k == 0) {
                break;
            }
            // move k into the hole if its home is not cyclically in (hole, j], i.e. k is at least as far from its
            // home as the hole is from j (one test for both sides of the wrap: a branch taken only at the table's
            // end was a deoptimisation once a run's table first wrapped)
            if (((j - home(k)) & mask) >= ((j - hole) & mask)) {
                keys[hole] = k;
                if (intValues) {
                    ints[hole] = ints[j];
                } else {
                    objects[hole] = objects[j];
                }
                hole = j;
            }
        }
        keys[hole] = 0;
        if (!intValues) {
            objects[hole] = null;
        }
        count--;
    }

    /**
     * Grows the table, if needed, so that it holds {@code expected} keys without growing again (a caller that knows
     * its peak saves the doublings and their rehashing).
     */
    public void ensureCapacity(int expected) {
        int capacity = capacityFor(expected);
        if (capacity > keys.length) {
            growTo(capacity);
        }
    }

    /** Rehashes every key into a table of {@code capacity} slots (a power of two, larger than now); also sizes a new table. */
    private void growTo(int capacity) {
        long[] oldKeys = keys;
        Object[] oldObjects = objects;
        int[] oldInts = ints;
        keys = new long[capacity];
        if (intValues) {
            ints = new int[capacity];
        } else {
            objects = new Object[capacity];
        }
        shift = Long.numberOfLeadingZeros(capacity) + 1;
        int mask = capacity - 1;
        for (int j = 0; j < oldKeys.length; j++) {
            long k = oldKeys[j];
            if (k != 0) {
                int i = home(k);
                while (keys[i] != 0) {
                    i = (i + 1) & mask;
                }
                keys[i] = k;
                if (intValues) {
                    ints[i] = oldInts[j];
                } else {
                    objects[i] = oldObjects[j];
                }
            }
        }
    }

    /** Removes every key; keeps the capacity. */
    public void clear() {
        Arrays.fill(keys, 0);
        if (!intValues) {
            Arrays.fill(objects, null);
        }
        count = 0;
    }
}
