package io.gpumem.stats;

import java.util.Map;
import java.util.TreeMap;

/**
 * The caching allocator's counters, with PyTorch's names and update rules ({@code DeviceStats} in
 * {@code c10/core/CachingDeviceAllocator.h}; allocator.md §6).
 *
 * <h2>Shape</h2>
 * Nine "array" stats ({@link #ALLOCATION} ... {@link #REQUESTED_BYTES}), each kept for three types
 * ({@link #ALL}, {@link #SMALL_POOL}, {@link #LARGE_POOL}), plus two single stats (oversize allocations and
 * segments) and five plain counters. Every stat has {@code current}, {@code peak}, {@code allocated} (sum of
 * increases) and {@code freed} (sum of decreases). An update to an array stat always hits {@code all} and
 * exactly one pool type, as PyTorch's {@code for_each_selected_stat_type} does.
 *
 * <h2>Layout: store what cannot be derived</h2>
 * The allocator updates a dozen stats per malloc+free pair, so an update must be a few stores. Two identities
 * let most figures be derived when read instead of maintained on every update:
 * <ul>
 *   <li>{@code all} is always {@code small_pool + large_pool} for current, allocated and freed (every update
 *       hits {@code all} and one pool). Only {@code all}'s peak is its own figure (the pools peak at different
 *       times), so it is kept, and checked against the sum of the pools' currents on every increase.</li>
 *   <li>{@code freed} follows from {@code current = base + allocated − freed}, where {@code base} is the
 *       current at the last accumulated reset (0 before any): a decrease only lowers {@code current}.</li>
 * </ul>
 * So an increase writes a pool's current and allocated and at most two peaks; a decrease writes one long. Per
 * stat, one flat {@code long[]} holds eight adjacent longs: current (small, large), allocated (small, large),
 * peak (all, small, large), and a spare; the single stats use the small-pool positions of two extra rows. The
 * allocator's per-operation updates also come fused ({@link #countAllocation}, {@link #countFreeRequested},
 * {@link #countFreeCompleted}).
 *
 * <p>Invariants kept by the methods: {@code current == base + allocated - freed}; {@code peak >= current} for
 * every type until a peak reset sets {@code peak = current}. The figures read are exactly those of PyTorch's
 * per-type {@code Stat} structs under the same update sequence.
 *
 * <p>Not thread-safe: the allocator updates it under its lock. {@link #toMap(long)} gives
 * {@code torch.cuda.memory_stats()} (sorted keys, dotted names).
 */
public final class DeviceStats {

    /** Stat types (the second index). */
    public static final int ALL = 0;
    public static final int SMALL_POOL = 1;
    public static final int LARGE_POOL = 2;
    private static final int TYPES = 3;
    private static final String[] TYPE_NAMES = {"all", "small_pool", "large_pool"};

    /** Array stats (the first index). */
    public static final int ALLOCATION = 0;
    public static final int SEGMENT = 1;
    public static final int ACTIVE = 2;
    public static final int INACTIVE_SPLIT = 3;
    public static final int ALLOCATED_BYTES = 4;
    public static final int RESERVED_BYTES = 5;
    public static final int ACTIVE_BYTES = 6;
    public static final int INACTIVE_SPLIT_BYTES = 7;
    public static final int REQUESTED_BYTES = 8;
    /** Number of array stats. */
    public static final int ARRAY_STATS = 9;
    private static final String[] ARRAY_NAMES = {"allocation", "segment", "active", "inactive_split",
            "allocated_bytes", "reserved_bytes", "active_bytes", "inactive_split_bytes", "requested_bytes"};

    /** Rows of the two single stats, after the array stats (they use the small-pool positions only). */
    private static final int OVERSIZE_ALLOCATIONS_ROW = ARRAY_STATS;
    private static final int OVERSIZE_SEGMENTS_ROW = ARRAY_STATS + 1;
    private static final int ROWS = ARRAY_STATS + 2;

    /** Offsets inside a row of eight longs; the pool offsets are added {@code pool − 1} (0 small, 1 large). */
    private static final int ROW_SHIFT = 3;
    private static final int CURRENT = 0;
    private static final int ALLOCATED = 2;
    private static final int PEAK_ALL = 4;
    private static final int PEAK = 5;

    private final long[] values = new long[ROWS << ROW_SHIFT];
    /** Per row and pool (same positions as CURRENT): current at the last accumulated reset. Cold. */
    private final long[] base = new long[ROWS << ROW_SHIFT];

    private long numAllocRetries;
    private long numOoms;
    private long numSyncAllStreams;
    private long numDeviceAlloc;
    private long numDeviceFree;

    private static int poolOffset(int pool) {
        if (pool != SMALL_POOL && pool != LARGE_POOL) {
            throw new IllegalArgumentException("an update names a pool (small or large), got type " + pool);
        }
        return pool - 1;
    }

    /** Raises {@code stat} for {@code all} and {@code pool} (small or large) by {@code amount} (≥ 0). */
    public void increase(int stat, int pool, long amount) {
        raise((stat << ROW_SHIFT) + poolOffset(pool), stat << ROW_SHIFT, amount);
    }

    /** Lowers {@code stat} for {@code all} and {@code pool} (small or large) by {@code amount} (≥ 0). */
    public void decrease(int stat, int pool, long amount) {
        values[(stat << ROW_SHIFT) + poolOffset(pool) + CURRENT] -= amount;
    }

    /** PyTorch's {@code update_stat}: a positive delta increases, a negative one decreases, zero does nothing. */
    public void update(int stat, int pool, long delta) {
        if (delta > 0) {
            increase(stat, pool, delta);
        } else if (delta < 0) {
            decrease(stat, pool, -delta);
        }
    }

    /**
     * The stat updates of one allocation ({@code alloc_found_block}), fused: allocation +1, allocated_bytes
     * +blockSize, active +1, active_bytes +blockSize, requested_bytes +requested, for {@code all} and {@code pool}.
     * Same effect as the five {@link #increase} calls.
     */
    public void countAllocation(int pool, long blockSize, long requested) {
        int p = poolOffset(pool);
        raise((ALLOCATION << ROW_SHIFT) + p, ALLOCATION << ROW_SHIFT, 1);
        raise((ALLOCATED_BYTES << ROW_SHIFT) + p, ALLOCATED_BYTES << ROW_SHIFT, blockSize);
        raise((ACTIVE << ROW_SHIFT) + p, ACTIVE << ROW_SHIFT, 1);
        raise((ACTIVE_BYTES << ROW_SHIFT) + p, ACTIVE_BYTES << ROW_SHIFT, blockSize);
        raise((REQUESTED_BYTES << ROW_SHIFT) + p, REQUESTED_BYTES << ROW_SHIFT, requested);
    }

    /** {@code free} (free_requested): allocation −1, allocated_bytes −blockSize, for {@code all} and {@code pool}. */
    public void countFreeRequested(int pool, long blockSize) {
        int p = poolOffset(pool);
        long[] v = values;
        v[(ALLOCATION << ROW_SHIFT) + p] -= 1;
        v[(ALLOCATED_BYTES << ROW_SHIFT) + p] -= blockSize;
    }

    /** {@code free_block} (free_completed): active −1, active_bytes −blockSize, requested_bytes −requested. */
    public void countFreeCompleted(int pool, long blockSize, long requested) {
        int p = poolOffset(pool);
        long[] v = values;
        v[(ACTIVE << ROW_SHIFT) + p] -= 1;
        v[(ACTIVE_BYTES << ROW_SHIFT) + p] -= blockSize;
        v[(REQUESTED_BYTES << ROW_SHIFT) + p] -= requested;
    }

    /** Increase of the pool at {@code slot} (row + pool offset) in {@code row}: current, allocated, both peaks. */
    private void raise(int slot, int row, long amount) {
        long[] v = values;
        long c = v[slot + CURRENT] + amount;
        v[slot + CURRENT] = c;
        v[slot + ALLOCATED] += amount;
        if (c > v[slot + PEAK]) {
            v[slot + PEAK] = c;
        }
        long all = v[row + CURRENT] + v[row + CURRENT + 1];
        if (all > v[row + PEAK_ALL]) {
            v[row + PEAK_ALL] = all;
        }
    }

    /** A single stat's update: the small-pool positions of its row. */
    private void updateSingle(int row, long delta) {
        int slot = row << ROW_SHIFT;
        if (delta > 0) {
            long[] v = values;
            long c = v[slot + CURRENT] + delta;
            v[slot + CURRENT] = c;
            v[slot + ALLOCATED] += delta;
            if (c > v[slot + PEAK]) {
                v[slot + PEAK] = c;
            }
        } else if (delta < 0) {
            values[slot + CURRENT] += delta;
        }
    }

    /** {@code oversize_allocations} +delta / −delta. */
    public void updateOversizeAllocations(long delta) {
        updateSingle(OVERSIZE_ALLOCATIONS_ROW, delta);
    }

    /** {@code oversize_segments} +delta / −delta. */
    public void updateOversizeSegments(long delta) {
        updateSingle(OVERSIZE_SEGMENTS_ROW, delta);
    }

    public void countAllocRetry() {
        numAllocRetries++;
    }

    public void countOom() {
        numOoms++;
    }

    public void countSyncAllStreams() {
        numSyncAllStreams++;
    }

    public void countDeviceAlloc() {
        numDeviceAlloc++;
    }

    public void countDeviceFree() {
        numDeviceFree++;
    }

    // ---------------------------------------------------------------- reads

    /** Sum over the pools a type stands for (both for {@code all}) of the longs at {@code offset} in the row. */
    private long sum(long[] a, int row, int type, int offset) {
        int i = (row << ROW_SHIFT) + offset;
        return type == ALL ? a[i] + a[i + 1] : a[i + poolOffset(type)];
    }

    private long currentOf(int row, int type) {
        return sum(values, row, type, CURRENT);
    }

    private long allocatedOf(int row, int type) {
        return sum(values, row, type, ALLOCATED);
    }

    private long freedOf(int row, int type) {
        return sum(base, row, type, CURRENT) + allocatedOf(row, type) - currentOf(row, type);
    }

    private long peakOf(int row, int type) {
        return values[(row << ROW_SHIFT) + (type == ALL ? PEAK_ALL : PEAK + poolOffset(type))];
    }

    private static int checkType(int type) {
        if (type < 0 || type >= TYPES) {
            throw new IllegalArgumentException("no stat type " + type);
        }
        return type;
    }

    public long current(int stat, int type) {
        return currentOf(stat, checkType(type));
    }

    public long peak(int stat, int type) {
        return peakOf(stat, checkType(type));
    }

    public long allocated(int stat, int type) {
        return allocatedOf(stat, checkType(type));
    }

    public long freed(int stat, int type) {
        return freedOf(stat, checkType(type));
    }

    public long oversizeAllocationsCurrent() {
        return currentOf(OVERSIZE_ALLOCATIONS_ROW, SMALL_POOL);
    }

    public long oversizeSegmentsCurrent() {
        return currentOf(OVERSIZE_SEGMENTS_ROW, SMALL_POOL);
    }

    public long numAllocRetries() {
        return numAllocRetries;
    }

    public long numOoms() {
        return numOoms;
    }

    public long numSyncAllStreams() {
        return numSyncAllStreams;
    }

    public long numDeviceAlloc() {
        return numDeviceAlloc;
    }

    public long numDeviceFree() {
        return numDeviceFree;
    }

    // ---------------------------------------------------------------- resets

    /** {@code reset_peak_memory_stats}: peak = current for every array stat and both oversize stats. */
    public void resetPeak() {
        long[] v = values;
        for (int row = 0; row < ROWS; row++) {
            int i = row << ROW_SHIFT;
            v[i + PEAK] = v[i + CURRENT];
            v[i + PEAK + 1] = v[i + CURRENT + 1];
            v[i + PEAK_ALL] = v[i + CURRENT] + v[i + CURRENT + 1];
        }
    }

    /**
     * {@code reset_accumulated_memory_stats}: zeroes allocated and freed of every stat and the five counters.
     */
    public void resetAccumulated() {
        long[] v = values;
        for (int row = 0; row < ROWS; row++) {
            int i = row << ROW_SHIFT;
            for (int p = 0; p < 2; p++) {
                v[i + ALLOCATED + p] = 0;
                base[i + CURRENT + p] = v[i + CURRENT + p]; // freed = base + allocated − current = 0
            }
        }
        numAllocRetries = 0;
        numOoms = 0;
        numSyncAllStreams = 0;
        numDeviceAlloc = 0;
        numDeviceFree = 0;
    }

    /** Name of an array stat as {@code memory_stats()} spells it, e.g. {@code "allocated_bytes"}. */
    public static String arrayStatName(int stat) {
        return ARRAY_NAMES[stat];
    }

    /** Name of a stat type: {@code "all"}, {@code "small_pool"} or {@code "large_pool"}. */
    public static String typeName(int type) {
        return TYPE_NAMES[type];
    }

    /**
     * {@code torch.cuda.memory_stats()}: every key flattened with dots and sorted.
     *
     * @param maxSplitSizeReported the {@code max_split_size} figure (−1 when unset), which PyTorch fixes when
     *                             the device allocator is created
     */
    public Map<String, Long> toMap(long maxSplitSizeReported) {
        TreeMap<String, Long> m = new TreeMap<>();
        for (int stat = 0; stat < ARRAY_STATS; stat++) {
            for (int type = 0; type < TYPES; type++) {
                putStat(m, ARRAY_NAMES[stat] + "." + TYPE_NAMES[type], stat, type);
            }
        }
        putStat(m, "oversize_allocations", OVERSIZE_ALLOCATIONS_ROW, SMALL_POOL);
        putStat(m, "oversize_segments", OVERSIZE_SEGMENTS_ROW, SMALL_POOL);
        m.put("num_alloc_retries", numAllocRetries);
        m.put("num_ooms", numOoms);
        m.put("num_sync_all_streams", numSyncAllStreams);
        m.put("num_device_alloc", numDeviceAlloc);
        m.put("num_device_free", numDeviceFree);
        m.put("max_split_size", maxSplitSizeReported);
        return m;
    }

    private void putStat(Map<String, Long> m, String prefix, int row, int type) {
        m.put(prefix + ".current", currentOf(row, type));
        m.put(prefix + ".peak", peakOf(row, type));
        m.put(prefix + ".allocated", allocatedOf(row, type));
        m.put(prefix + ".freed", freedOf(row, type));
    }
}
