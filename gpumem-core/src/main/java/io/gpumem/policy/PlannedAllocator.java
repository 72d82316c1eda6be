package io.gpumem.policy;

import io.gpumem.alloc.GpuAllocator;
import io.gpumem.alloc.GpuAllocatorInternals;
import io.gpumem.device.Device;
import io.gpumem.history.MemorySnapshot;
import io.gpumem.plan.LifetimeProblem;
import io.gpumem.plan.OffsetPlan;
import io.gpumem.plan.OffsetPlanner;
import io.gpumem.stats.MemoryStats;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * Policy {@code planned}: plan from a profile, serve online. A plan gives, for each request position in an
 * iteration (the k-th malloc since the iteration began), the rounded size expected there and an offset in a plan
 * region; a request that arrives at its position with its planned size, and whose planned range is free, is
 * served there. Everything else (dynamic shapes, a changed batch, a buffer outliving its plan) falls back to a
 * {@link StitchAllocator} in separate arenas. Both share one pool of physical pages: plan-region pages no live
 * block touches can be stitched under fallback blocks and back, so the region costs only what is live.
 *
 * <p>Profiles: a plan given up front (offsets from {@link OffsetPlanner} over a recorded trace or lifetime CSV), or
 * {@link #profiling}: the first iterations are served by the fallback while the allocator records each request's
 * size and its lifetime in request events; at the end of the last one it plans the buffers that lived inside it.
 * The plan adapts: an iteration with fallbacks is recorded again and re-planned into a fresh plan region (blocks of
 * the old plan finish where they are).
 *
 * <p>Thread safety: the stitch allocator's lock guards both: every public method takes it (a malloc once, around
 * the plan lookup, the placement and the recording), and a step boundary plans under it. Concurrent requests get
 * positions in the order they take the lock, so a plan made from one thread's order fits another order only by
 * chance; the allocator stays correct either way, it just falls back more.
 *
 * <p>Design notes: policies.md §3 (serving §3.2, profiles §3.4, adapting §3.5, limitations §3.8).
 */
public final class PlannedAllocator implements GpuAllocator {

    /** Planning between iterations stalls the job, so it gets a short budget (descent and orders, little search). */
    static final long ONLINE_PLAN_BUDGET_MS = 100;

    private final StitchAllocator memory;
    private final GpuAllocatorInternals internals;
    /** The fixed arena the plan is served from; null until a plan is installed (profiling, or no plan yet). */
    private StitchAllocator.@Nullable Arena region;

    private long[] plannedSize = new long[0];
    private long[] plannedOffset = new long[0];
    private int position;
    private long plannedServed;
    private long fallbacks;
    private long fallbacksThisIteration;
    private long replans;

    // Profiling state: recording the current iteration when record is true.
    private final int profileIterations;
    private int iterations;
    private boolean record;
    private long clock;
    private long[] recSize = new long[256];
    private long[] recLower = new long[256];
    private long[] recUpper = new long[256];
    private int recCount;
    private final Map<Long, Integer> recPosition = new HashMap<>();

    /**
     * Serves the given plan: request k of each iteration is expected with {@code sizes[k]} (rounded up to 512 bytes
     * as requests are; 0 leaves position k unplanned) at {@code offsets[k]} (a multiple of 512 bytes).
     *
     * @throws IllegalArgumentException for arrays of different lengths, a negative size, or a planned entry whose
     *     offset is negative, not a multiple of 512 bytes or, with its size, ends past 2^63 bytes or past twice the
     *     device's memory (the reservation an online arena gets: no plan of a job that fits the device needs more)
     */
    public PlannedAllocator(Device device, long[] sizes, long[] offsets) {
        this.memory = new StitchAllocator(device);
        this.internals = new PolicyInternals(memory, this::nextIteration);
        this.profileIterations = 0;
        // a region's page arrays grow to its highest page touched: an offset of a PiB is gigabytes of heap
        install(sizes, offsets, memory.onlineArenaBytes());
    }

    private PlannedAllocator(Device device, int profileIterations) {
        this.memory = new StitchAllocator(device);
        this.internals = new PolicyInternals(memory, this::nextIteration);
        this.profileIterations = profileIterations;
        this.record = true;
    }

    /**
     * Records the first {@code iterations} iterations (marked by {@link #nextIteration}), then plans from the last
     * and serves later ones at planned offsets.
     */
    public static PlannedAllocator profiling(Device device, int iterations) {
        if (iterations < 1) {
            throw new IllegalArgumentException("profile at least one iteration, got " + iterations);
        }
        return new PlannedAllocator(device, iterations);
    }

    /**
     * Plans {@code profile} once (request k of each iteration is buffer k) and returns what serves the plan on any
     * device: a capacity search runs one plan at many capacities.
     */
    private static PreparedPolicy planFor(LifetimeProblem profile) {
        OffsetPlan plan = new OffsetPlanner().plan(profile);
        long[] sizes = new long[profile.buffers()];
        for (int i = 0; i < sizes.length; i++) {
            sizes[i] = profile.placedSize(i);
        }
        long[] offsets = plan.offsets();
        return device -> new PlannedAllocator(device, sizes, offsets);
    }

    /**
     * Policy {@code planned} in {@link PolicyRegistry}: on a stream that marks steps it profiles the first step
     * online ({@link #profiling}, one iteration), as a training job using it would; on any other stream it plans
     * from the stream's whole profile up front ({@link StreamFacts#profile()}), once for every run of the stream.
     */
    static PolicyFactory factory() {
        return new PolicyFactory() {
            @Override
            public String name() {
                return "planned";
            }

            @Override
            public String summary() {
                return "plan from a profile, serve online: requests at their planned offsets, the rest by stitch";
            }

            @Override
            public boolean needsProfile() {
                return true;
            }

            @Override
            public PreparedPolicy prepare(String options, StreamFacts facts) {
                if (facts.marksSteps()) {
                    return device -> profiling(device, 1);
                }
                if (!facts.hasProfile()) {
                    throw new IllegalStateException("policy planned needs a profile to plan from (or a stream that "
                            + "marks steps, to profile the first one)");
                }
                return planFor(facts.profile());
            }
        };
    }

    /**
     * Installs the plan, its entries checked (see the public constructor) and ending within {@code largest} bytes (a
     * given plan: the online arena's reservation; a plan of this allocator's own profile: {@link Long#MAX_VALUE}).
     */
    private void install(long[] sizes, long[] offsets, long largest) {
        if (sizes.length != offsets.length) {
            throw new IllegalArgumentException("sizes and offsets differ in length");
        }
        long peak = 0;
        long[] rounded = new long[sizes.length];
        for (int i = 0; i < sizes.length; i++) {
            if (sizes[i] < 0) {
                throw new IllegalArgumentException("plan entry " + i + ": negative size " + sizes[i]);
            }
            if (sizes[i] == 0) {
                continue; // a position left unplanned
            }
            if (offsets[i] < 0 || offsets[i] % StitchAllocator.ROUND != 0) {
                throw new IllegalArgumentException("plan entry " + i + ": bad offset " + offsets[i]);
            }
            long end = offsets[i] + sizes[i]; // both non-negative: a sum past 2^63 wraps below 0
            if (end < 0 || end > Long.MAX_VALUE - StitchAllocator.ROUND) {
                throw new IllegalArgumentException("plan entry " + i + ": offset " + offsets[i] + " + size " + sizes[i]
                        + " ends past 2^63 bytes, beyond any plan region");
            }
            if (end > largest) {
                throw new IllegalArgumentException("plan entry " + i + ": offset " + offsets[i] + " + size " + sizes[i]
                        + " ends past " + largest + " bytes, twice the device's memory, the most a plan region holds");
            }
            // requests are matched by their rounded size, so a size given as requested must match as well
            rounded[i] = StitchAllocator.roundSize(sizes[i]);
            peak = Math.max(peak, offsets[i] + rounded[i]);
        }
        plannedSize = rounded;
        plannedOffset = offsets.clone();
        region = memory.newFixedArena(peak);
    }

    /** The stitching allocator behind both the plan region and the fallback. */
    StitchAllocator memory() {
        return memory;
    }

    @Override
    public Device device() {
        return memory.device();
    }

    /**
     * Marks the start of the next iteration (the step boundary of {@link GpuAllocatorInternals#stepBoundary()}):
     * request positions count from 0 again.
     */
    void nextIteration() {
        iterations++;
        if (record) {
            if (iterations >= profileIterations) {
                planRecording();
                record = false;
            }
            recCount = 0;
            recPosition.clear();
        } else if (profileIterations > 0 && fallbacksThisIteration > 0) {
            record = true; // the plan no longer fits the job: record one iteration and plan again
            recCount = 0;
            recPosition.clear();
        }
        fallbacksThisIteration = 0;
        position = 0;
        clock = 0;
    }

    private void planRecording() {
        int n = recCount;
        long[] id = new long[n];
        long[] upper = new long[n];
        long[] size = new long[n];
        for (int i = 0; i < n; i++) {
            id[i] = i;
            // Buffers still live at the iteration's end are not planned (size 0: they fall back).
            boolean inside = recUpper[i] >= 0;
            upper[i] = inside ? recUpper[i] : recLower[i];
            size[i] = inside ? recSize[i] : 1;
        }
        LifetimeProblem p = new LifetimeProblem(id, Arrays.copyOf(recLower, n), upper, size, StitchAllocator.ROUND);
        OffsetPlan plan = new OffsetPlanner(ONLINE_PLAN_BUDGET_MS, 8).plan(p);
        long[] sizes = new long[n];
        for (int i = 0; i < n; i++) {
            sizes[i] = p.placedSize(i);
        }
        install(sizes, plan.offsets(), Long.MAX_VALUE);
        replans++;
    }

    @Override
    public long malloc(long size, long stream) {
        if (size < 0) {
            return memory.malloc(size, stream); // the error for a negative size
        }
        memory.lock.lock();
        try {
            return size == 0 ? mallocZeroLocked() : mallocLocked(size, stream);
        } finally {
            memory.lock.unlock();
        }
    }

    private long mallocLocked(long size, long stream) {
        memory.checkOpen();
        long rounded = StitchAllocator.roundSize(size);
        // The position moves only once the request is served: a request refused (closed) or out of memory changes
        // nothing, as profiling records no position for it either, so the requests after it keep their plan.
        int k = position;
        long ptr = Device.NULL;
        StitchAllocator.Arena plan = region;
        if (plan != null
                && k < plannedSize.length
                && plannedSize[k] == rounded
                && rangeFree(plan, plannedOffset[k], rounded)) {
            // NULL when the planned range's pages cannot be had: the fallback may still hold it in a page it uses
            ptr = memory.mallocFixed(plan, plannedOffset[k], rounded, size, stream);
        }
        if (ptr != Device.NULL) {
            position = k + 1;
            plannedServed++;
        } else {
            ptr = memory.mallocLocked(size, stream);
            position = k + 1;
            boolean unplanned = k < plannedSize.length && plannedSize[k] == 0;
            if (!record && !unplanned) {
                fallbacks++;
                fallbacksThisIteration++;
            }
        }
        if (record) {
            recordRequest(rounded, ptr);
        }
        return ptr;
    }

    /**
     * A zero-byte request: address 0 and no memory, as every allocator gives it, but still the k-th malloc of its
     * iteration, so it takes a plan position (a stream's profile has a slot for it): otherwise every later request
     * would meet the plan one position late and fall back. Recorded, it stays unplanned (it is never freed).
     */
    private long mallocZeroLocked() {
        memory.checkOpen();
        position++;
        if (record) {
            recordRequest(0, Device.NULL);
        }
        return Device.NULL;
    }

    /** Records the current iteration's next request, live from now until {@code ptr} is freed (never for NULL). */
    private void recordRequest(long rounded, long ptr) {
        if (recCount == recSize.length) {
            recSize = Arrays.copyOf(recSize, 2 * recCount);
            recLower = Arrays.copyOf(recLower, 2 * recCount);
            recUpper = Arrays.copyOf(recUpper, 2 * recCount);
        }
        recSize[recCount] = rounded;
        recLower[recCount] = clock++;
        recUpper[recCount] = -1;
        if (ptr != Device.NULL) {
            recPosition.put(ptr, recCount);
        }
        recCount++;
    }

    private static boolean rangeFree(StitchAllocator.Arena plan, long offset, long size) {
        long addr = plan.base + offset;
        var below = plan.fixedBlocks.floorEntry(addr + size - 1);
        return below == null || below.getValue().ptr + below.getValue().size <= addr;
    }

    @Override
    public void free(long ptr) {
        memory.lock.lock();
        try {
            if (ptr != 0) {
                memory.freeLocked(ptr);
            }
            if (record) {
                Integer k = recPosition.remove(ptr);
                if (k != null) {
                    recUpper[k] = clock;
                }
                clock++;
            }
        } finally {
            memory.lock.unlock();
        }
    }

    @Override
    public void recordStream(long ptr, long stream) {
        memory.recordStream(ptr, stream);
    }

    @Override
    public void emptyCache() {
        memory.emptyCache();
    }

    /**
     * The stitching allocator's figures plus the plan's: {@code num_planned_requests} (served at their planned
     * offset), {@code num_fallback_requests} (planned, but served by the fallback) and {@code num_plans} (plans
     * installed, the given one included).
     */
    @Override
    public MemoryStats stats() {
        MemoryStats.Builder figures;
        memory.lock.lock();
        try {
            figures = memory.statsBuilder()
                    .extra("num_planned_requests", plannedServed)
                    .extra("num_fallback_requests", fallbacks)
                    .extra("num_plans", replans + (profileIterations == 0 ? 1 : 0));
        } finally {
            memory.lock.unlock();
        }
        return figures.build();
    }

    @Override
    public MemorySnapshot snapshot() {
        return memory.snapshot();
    }

    @Override
    public GpuAllocatorInternals internals() {
        return internals;
    }

    @Override
    public void close() {
        memory.close();
    }
}
