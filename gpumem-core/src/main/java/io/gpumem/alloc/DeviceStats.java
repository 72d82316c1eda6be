package io.gpumem.alloc;

import io.gpumem.stats.MemoryStats;
import io.gpumem.stats.StatKind;
import io.gpumem.stats.StatType;

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
 * <h2>Uncounted copies</h2>
 * A capacity search's probes replay a stream only to learn whether every request succeeds, and nobody reads their
 * counters, whose updates were 8-9% of a probe's replay (the 276 MB snapshot's searches, stop 28). So a copy can be made that counts nothing
 * ({@link #uncountedCopy}): its updates return at once, its array-stat readers throw, and copies of it stay
 * uncounted. Nothing the allocator decides reads these counters (the fraction and garbage-collection checks use
 * {@code total_allocated_memory}), so an uncounted allocator decides exactly as a counted one.
 *
 * <p>Not thread-safe: the allocator updates it under its lock. Readers outside the allocator see an immutable
 * {@link MemoryStats}: the allocator takes a {@link #copy()} under its lock (two array copies, so writers wait
 * only that long) and builds the value from the copy after releasing it ({@link #toMemoryStats}). The indices
 * are {@link StatKind} and {@link StatType} ordinals; the mutators are package-private, for the allocator only.
 */
final class DeviceStats {

    /** Stat types (the second index): {@link StatType} ordinals. */
    static final int ALL = StatType.ALL.ordinal();

    static final int SMALL_POOL = StatType.SMALL_POOL.ordinal();
    static final int LARGE_POOL = StatType.LARGE_POOL.ordinal();
    private static final int TYPES = 3;

    /** Array stats (the first index): {@link StatKind} ordinals. */
    static final int ALLOCATION = StatKind.ALLOCATION.ordinal();

    static final int SEGMENT = StatKind.SEGMENT.ordinal();
    static final int ACTIVE = StatKind.ACTIVE.ordinal();
    static final int INACTIVE_SPLIT = StatKind.INACTIVE_SPLIT.ordinal();
    static final int ALLOCATED_BYTES = StatKind.ALLOCATED_BYTES.ordinal();
    static final int RESERVED_BYTES = StatKind.RESERVED_BYTES.ordinal();
    static final int ACTIVE_BYTES = StatKind.ACTIVE_BYTES.ordinal();
    static final int INACTIVE_SPLIT_BYTES = StatKind.INACTIVE_SPLIT_BYTES.ordinal();
    static final int REQUESTED_BYTES = StatKind.REQUESTED_BYTES.ordinal();
    /** Number of array stats. */
    static final int ARRAY_STATS = StatKind.values().length;

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

    private final long[] values;
    /** Per row and pool (same positions as CURRENT): current at the last accumulated reset. Cold. */
    private final long[] base;
    /** False in an uncounted copy: updates do nothing, reads throw. */
    private final boolean counting;

    DeviceStats() {
        values = new long[ROWS << ROW_SHIFT];
        base = new long[ROWS << ROW_SHIFT];
        counting = true;
    }

    private DeviceStats(DeviceStats from, boolean counting) {
        this.counting = counting;
        values = from.values.clone();
        base = from.base.clone();
        numAllocRetries = from.numAllocRetries;
        numOoms = from.numOoms;
        numSyncAllStreams = from.numSyncAllStreams;
        numDeviceAlloc = from.numDeviceAlloc;
        numDeviceFree = from.numDeviceFree;
    }

    /** A copy of every figure (uncounted where this is); cheap enough to take under the allocator lock. */
    DeviceStats copy() {
        return new DeviceStats(this, counting);
    }

    /** A copy that counts nothing from now on (see the class comment). */
    DeviceStats uncountedCopy() {
        return new DeviceStats(this, false);
    }

    /** Whether the figures are kept (false in an uncounted copy). */
    boolean counting() {
        return counting;
    }

    private void requireCounting() {
        if (!counting) {
            throw new IllegalStateException(
                    "this allocator is an uncounted copy (a capacity-search probe's): it keeps no statistics");
        }
    }

    /** The stat type index of a pool's updates. */
    static int typeIndex(Pool pool) {
        return pool.statType().ordinal();
    }

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
    void increase(int stat, int pool, long amount) {
        if (!counting) {
            return;
        }
        raise((stat << ROW_SHIFT) + poolOffset(pool), stat << ROW_SHIFT, amount);
    }

    /** Lowers {@code stat} for {@code all} and {@code pool} (small or large) by {@code amount} (≥ 0). */
    void decrease(int stat, int pool, long amount) {
        if (!counting) {
            return;
        }
        values[(stat << ROW_SHIFT) + poolOffset(pool) + CURRENT] -= amount;
    }

    /** PyTorch's {@code update_stat}: a positive delta increases, a negative one decreases, zero does nothing. */
    void update(int stat, int pool, long delta) {
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
    void countAllocation(int pool, long blockSize, long requested) {
        if (!counting) {
            return;
        }
        int p = poolOffset(pool);
        raise((ALLOCATION << ROW_SHIFT) + p, ALLOCATION << ROW_SHIFT, 1);
        raise((ALLOCATED_BYTES << ROW_SHIFT) + p, ALLOCATED_BYTES << ROW_SHIFT, blockSize);
        raise((ACTIVE << ROW_SHIFT) + p, ACTIVE << ROW_SHIFT, 1);
        raise((ACTIVE_BYTES << ROW_SHIFT) + p, ACTIVE_BYTES << ROW_SHIFT, blockSize);
        raise((REQUESTED_BYTES << ROW_SHIFT) + p, REQUESTED_BYTES << ROW_SHIFT, requested);
    }

    /** {@code free} (free_requested): allocation −1, allocated_bytes −blockSize, for {@code all} and {@code pool}. */
    void countFreeRequested(int pool, long blockSize) {
        if (!counting) {
            return;
        }
        int p = poolOffset(pool);
        long[] v = values;
        v[(ALLOCATION << ROW_SHIFT) + p] -= 1;
        v[(ALLOCATED_BYTES << ROW_SHIFT) + p] -= blockSize;
    }

    /** {@code free_block} (free_completed): active −1, active_bytes −blockSize, requested_bytes −requested. */
    void countFreeCompleted(int pool, long blockSize, long requested) {
        if (!counting) {
            return;
        }
        int p = poolOffset(pool);
        long[] v = values;
        v[(ACTIVE << ROW_SHIFT) + p] -= 1;
        v[(ACTIVE_BYTES << ROW_SHIFT) + p] -= blockSize;
        v[(REQUESTED_BYTES << ROW_SHIFT) + p] -= requested;
    }

    /** Increase of the pool at {@code slot} (row + pool offset) in {@code row}: current, allocated, both peaks. */
    private void raise(int slot, int row, long amount) {
        raiseSlot(slot, amount);
        long[] v = values;
        long all = v[row + CURRENT] + v[row + CURRENT + 1];
        if (all > v[row + PEAK_ALL]) {
            v[row + PEAK_ALL] = all;
        }
    }

    /** Increase of the figures at {@code slot}: current, allocated and the slot's own peak. */
    private void raiseSlot(int slot, long amount) {
        long[] v = values;
        long c = v[slot + CURRENT] + amount;
        v[slot + CURRENT] = c;
        v[slot + ALLOCATED] += amount;
        if (c > v[slot + PEAK]) {
            v[slot + PEAK] = c;
        }
    }

    /** A single stat's update: the small-pool positions of its row. */
    private void updateSingle(int row, long delta) {
        if (!counting) {
            return;
        }
        int slot = row << ROW_SHIFT;
        if (delta > 0) {
            raiseSlot(slot, delta);
        } else if (delta < 0) {
            values[slot + CURRENT] += delta;
        }
    }

    /** {@code oversize_allocations} +delta / −delta. */
    void updateOversizeAllocations(long delta) {
        updateSingle(OVERSIZE_ALLOCATIONS_ROW, delta);
    }

    /** {@code oversize_segments} +delta / −delta. */
    void updateOversizeSegments(long delta) {
        updateSingle(OVERSIZE_SEGMENTS_ROW, delta);
    }

    void countAllocRetry() {
        numAllocRetries++;
    }

    void countOom() {
        numOoms++;
    }

    void countSyncAllStreams() {
        numSyncAllStreams++;
    }

    void countDeviceAlloc() {
        numDeviceAlloc++;
    }

    void countDeviceFree() {
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

    long current(int stat, int type) {
        requireCounting();
        return currentOf(stat, checkType(type));
    }

    long peak(int stat, int type) {
        requireCounting();
        return peakOf(stat, checkType(type));
    }

    long allocated(int stat, int type) {
        requireCounting();
        return allocatedOf(stat, checkType(type));
    }

    long freed(int stat, int type) {
        requireCounting();
        return freedOf(stat, checkType(type));
    }

    long oversizeAllocationsCurrent() {
        requireCounting();
        return currentOf(OVERSIZE_ALLOCATIONS_ROW, SMALL_POOL);
    }

    long oversizeSegmentsCurrent() {
        requireCounting();
        return currentOf(OVERSIZE_SEGMENTS_ROW, SMALL_POOL);
    }

    // ---------------------------------------------------------------- resets

    /** {@code reset_peak_memory_stats}: peak = current for every array stat and both oversize stats. */
    void resetPeak() {
        requireCounting();
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
    void resetAccumulated() {
        requireCounting();
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

    /**
     * The figures as an immutable value ({@code torch.cuda.memory_stats()}).
     *
     * @param maxSplitSizeReported the {@code max_split_size} figure (−1 when unset), which PyTorch fixes when
     *                             the device allocator is created
     */
    MemoryStats toMemoryStats(long maxSplitSizeReported) {
        requireCounting();
        MemoryStats.Builder b = MemoryStats.builder();
        for (StatKind kind : StatKind.values()) {
            for (StatType type : StatType.values()) {
                b.stat(kind, type, statOf(kind.ordinal(), type.ordinal()));
            }
        }
        return b.oversizeAllocations(statOf(OVERSIZE_ALLOCATIONS_ROW, SMALL_POOL))
                .oversizeSegments(statOf(OVERSIZE_SEGMENTS_ROW, SMALL_POOL))
                .numAllocRetries(numAllocRetries)
                .numOoms(numOoms)
                .numSyncAllStreams(numSyncAllStreams)
                .numDeviceAlloc(numDeviceAlloc)
                .numDeviceFree(numDeviceFree)
                .maxSplitSize(maxSplitSizeReported)
                .build();
    }

    private MemoryStats.Stat statOf(int row, int type) {
        return new MemoryStats.Stat(
                currentOf(row, type), peakOf(row, type), allocatedOf(row, type), freedOf(row, type));
    }
}
