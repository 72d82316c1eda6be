package io.gpumem.stats;

import java.util.Map;
import java.util.TreeMap;

/**
 * The caching allocator's counters, with PyTorch's names and update rules ({@code DeviceStats} in
 * {@code c10/core/CachingDeviceAllocator.h}; spec §6).
 *
 * <h2>Shape</h2>
 * Nine "array" stats ({@link #ALLOCATION} ... {@link #REQUESTED_BYTES}), each kept for three types
 * ({@link #ALL}, {@link #SMALL_POOL}, {@link #LARGE_POOL}), plus two single stats (oversize allocations and
 * segments) and five plain counters. Every stat has {@code current}, {@code peak}, {@code allocated} (sum of
 * increases) and {@code freed} (sum of decreases). An update to an array stat always hits {@code all} and
 * exactly one pool type, as PyTorch's {@code for_each_selected_stat_type} does.
 *
 * <h2>Layout</h2>
 * Hot counters live in one flat {@code long[]}: slot {@code stat * 3 + type} holds its current, peak, allocated
 * and freed in four adjacent longs, so an update touches one cache line per slot and allocates nothing. The
 * two single stats take slots after the arrays. The allocator's per-operation updates come fused
 * ({@link #countAllocation}, {@link #countFreeRequested}, {@link #countFreeCompleted}).
 *
 * <p>Invariant kept by the methods: {@code current == allocated - freed} as long as no accumulated reset
 * happened, and {@code peak >= current} until a peak reset sets {@code peak = current}.
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

    /** Slots of the two single stats, after the array stats. */
    private static final int OVERSIZE_ALLOCATIONS_SLOT = ARRAY_STATS * TYPES;
    private static final int OVERSIZE_SEGMENTS_SLOT = OVERSIZE_ALLOCATIONS_SLOT + 1;
    private static final int SLOTS = OVERSIZE_SEGMENTS_SLOT + 1;

    /** Per slot, four adjacent longs: current, peak, allocated, freed (one cache line holds two slots). */
    private static final int CURRENT = 0;
    private static final int PEAK = 1;
    private static final int ALLOCATED = 2;
    private static final int FREED = 3;
    private final long[] values = new long[SLOTS * 4];

    private long numAllocRetries;
    private long numOoms;
    private long numSyncAllStreams;
    private long numDeviceAlloc;
    private long numDeviceFree;

    /** Raises {@code stat} for {@code all} and {@code pool} by {@code amount} (≥ 0). */
    public void increase(int stat, int pool, long amount) {
        int base = stat * TYPES;
        bump(base, amount);
        bump(base + pool, amount);
    }

    /** Lowers {@code stat} for {@code all} and {@code pool} by {@code amount} (≥ 0). */
    public void decrease(int stat, int pool, long amount) {
        int base = stat * TYPES;
        drop(base, amount);
        drop(base + pool, amount);
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
        increase(ALLOCATION, pool, 1);
        increase(ALLOCATED_BYTES, pool, blockSize);
        increase(ACTIVE, pool, 1);
        increase(ACTIVE_BYTES, pool, blockSize);
        increase(REQUESTED_BYTES, pool, requested);
    }

    /** {@code free} (free_requested): allocation −1, allocated_bytes −blockSize, for {@code all} and {@code pool}. */
    public void countFreeRequested(int pool, long blockSize) {
        decrease(ALLOCATION, pool, 1);
        decrease(ALLOCATED_BYTES, pool, blockSize);
    }

    /** {@code free_block} (free_completed): active −1, active_bytes −blockSize, requested_bytes −requested. */
    public void countFreeCompleted(int pool, long blockSize, long requested) {
        decrease(ACTIVE, pool, 1);
        decrease(ACTIVE_BYTES, pool, blockSize);
        decrease(REQUESTED_BYTES, pool, requested);
    }

    private void bump(int slot, long amount) {
        long[] v = values;
        int i = slot << 2;
        long c = v[i + CURRENT] + amount;
        v[i + CURRENT] = c;
        if (c > v[i + PEAK]) {
            v[i + PEAK] = c;
        }
        v[i + ALLOCATED] += amount;
    }

    private void drop(int slot, long amount) {
        long[] v = values;
        int i = slot << 2;
        v[i + CURRENT] -= amount;
        v[i + FREED] += amount;
    }

    /** {@code oversize_allocations} +delta / −delta. */
    public void updateOversizeAllocations(long delta) {
        if (delta > 0) {
            bump(OVERSIZE_ALLOCATIONS_SLOT, delta);
        } else if (delta < 0) {
            drop(OVERSIZE_ALLOCATIONS_SLOT, -delta);
        }
    }

    /** {@code oversize_segments} +delta / −delta. */
    public void updateOversizeSegments(long delta) {
        if (delta > 0) {
            bump(OVERSIZE_SEGMENTS_SLOT, delta);
        } else if (delta < 0) {
            drop(OVERSIZE_SEGMENTS_SLOT, -delta);
        }
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

    public long current(int stat, int type) {
        return values[((stat * TYPES + type) << 2) + CURRENT];
    }

    public long peak(int stat, int type) {
        return values[((stat * TYPES + type) << 2) + PEAK];
    }

    public long allocated(int stat, int type) {
        return values[((stat * TYPES + type) << 2) + ALLOCATED];
    }

    public long freed(int stat, int type) {
        return values[((stat * TYPES + type) << 2) + FREED];
    }

    public long oversizeAllocationsCurrent() {
        return values[(OVERSIZE_ALLOCATIONS_SLOT << 2) + CURRENT];
    }

    public long oversizeSegmentsCurrent() {
        return values[(OVERSIZE_SEGMENTS_SLOT << 2) + CURRENT];
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
        for (int i = 0; i < values.length; i += 4) {
            values[i + PEAK] = values[i + CURRENT];
        }
    }

    /**
     * {@code reset_accumulated_memory_stats}: zeroes allocated and freed of every stat and the five counters.
     */
    public void resetAccumulated() {
        for (int i = 0; i < values.length; i += 4) {
            values[i + ALLOCATED] = 0;
            values[i + FREED] = 0;
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
                putStat(m, ARRAY_NAMES[stat] + "." + TYPE_NAMES[type], stat * TYPES + type);
            }
        }
        putStat(m, "oversize_allocations", OVERSIZE_ALLOCATIONS_SLOT);
        putStat(m, "oversize_segments", OVERSIZE_SEGMENTS_SLOT);
        m.put("num_alloc_retries", numAllocRetries);
        m.put("num_ooms", numOoms);
        m.put("num_sync_all_streams", numSyncAllStreams);
        m.put("num_device_alloc", numDeviceAlloc);
        m.put("num_device_free", numDeviceFree);
        m.put("max_split_size", maxSplitSizeReported);
        return m;
    }

    private void putStat(Map<String, Long> m, String prefix, int slot) {
        int i = slot << 2;
        m.put(prefix + ".current", values[i + CURRENT]);
        m.put(prefix + ".peak", values[i + PEAK]);
        m.put(prefix + ".allocated", values[i + ALLOCATED]);
        m.put(prefix + ".freed", values[i + FREED]);
    }
}
