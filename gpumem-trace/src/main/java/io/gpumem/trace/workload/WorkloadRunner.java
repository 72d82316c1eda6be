package io.gpumem.trace.workload;

import io.gpumem.alloc.CachingAllocator;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.history.Frame;
import io.gpumem.history.HistoryOptions;
import io.gpumem.oom.OomReport;
import io.gpumem.oom.OutOfMemoryException;
import io.gpumem.stats.MemoryStats;
import io.gpumem.stats.StatKind;
import io.gpumem.trace.whatif.MinimumCapacity;
import io.gpumem.trace.whatif.WhatIfOutcome;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Runs a generated request stream against a {@link CachingAllocator} on a fresh {@link SimulatedDevice}, the
 * way a training job would: it stops at the first out-of-memory error.
 *
 * <p>Each run is independent and deterministic (the device's addresses are deterministic and the allocator
 * has no other input). {@link #minCapacity} finds the smallest capacity that runs the stream without OOM by
 * a binary search in granularity steps, assuming feasibility is monotone in capacity (more memory never
 * makes a run fail), which holds for these allocators in the cases checked (docs/replay-method.md).
 */
public final class WorkloadRunner {
    /** Step of the minimum-capacity search: the device granularity (2 MiB). */
    public static final long CAPACITY_STEP = MinimumCapacity.STEP;
    /** Capacity of the run that measures a configuration's unconstrained peak (1 TiB). */
    public static final long UNLIMITED = 1L << 40;

    /** Frames of allocator events no request of the workload caused (frees). */
    private static final List<Frame> NO_REQUEST = List.of(new Frame("gpumem-demo", 0, "demo"));

    private final long capacity;
    private final long heldOutside;

    /**
     * @param capacity    device capacity in bytes (the minimum-capacity search ignores it)
     * @param heldOutside bytes held by others on the device (context, other processes)
     */
    public WorkloadRunner(long capacity, long heldOutside) {
        if (capacity <= 0) {
            throw new IllegalArgumentException("capacity must be positive, got " + capacity);
        }
        if (heldOutside < 0 || heldOutside >= capacity) {
            throw new IllegalArgumentException("held-outside bytes must be in [0, capacity), got " + heldOutside);
        }
        this.capacity = capacity;
        this.heldOutside = heldOutside;
    }

    public long capacity() {
        return capacity;
    }

    public long heldOutside() {
        return heldOutside;
    }

    /**
     * The outcome of one run.
     *
     * @param conf           the configuration string ("" for defaults)
     * @param stats          the allocator's statistics at the end (or at the OOM)
     * @param stepsCompleted training steps that finished
     * @param oom            the failed request, or {@code null} when the run completed
     * @param oomOp          the op index that failed, or −1
     * @param failedAlloc    the request that failed, or {@code null}
     * @param allocator      the allocator in its final state (for snapshots and analysis)
     * @param device         its device
     */
    public record Run(String conf, MemoryStats stats, int stepsCompleted, OomReport oom, int oomOp,
                      MemoryOp.Alloc failedAlloc, CachingAllocator allocator, SimulatedDevice device) {
        public boolean completed() {
            return oom == null;
        }

        /** The run as a row of the compare table ({@code capacity}: the device memory it ran with). */
        public WhatIfOutcome outcome(String label, long capacity, long minCapacity) {
            return new WhatIfOutcome(label, false, capacity, stats.get(StatKind.ALLOCATED_BYTES).peak(),
                    stats.get(StatKind.RESERVED_BYTES).peak(), stats.numDeviceAlloc(), stats.numDeviceFree(),
                    stats.numAllocRetries(), stats.numOoms(), minCapacity);
        }
    }

    /** Runs the workload under {@code conf}; with {@code recordHistory} the allocator keeps a full trace, each allocation named. */
    public Run run(AllocationWorkload workload, String conf, boolean recordHistory) {
        return run(workload, conf, capacity, recordHistory);
    }

    private Run run(AllocationWorkload workload, String conf, long deviceCapacity, boolean recordHistory) {
        AllocatorConfig config = AllocatorConfig.parse(conf);
        SimulatedDevice device = SimulatedDevice.builder().capacity(deviceCapacity).heldOutside(heldOutside).build();
        CachingAllocator allocator = new CachingAllocator(device, config);
        @SuppressWarnings("unchecked")
        List<Frame>[] current = new List[1];
        if (recordHistory) {
            long[] clock = {1_700_000_000_000_000L};
            allocator.internals().setClock(() -> clock[0]++);
            allocator.setContextSupplier(() -> current[0] == null ? NO_REQUEST : current[0]);
            allocator.recordHistory(HistoryOptions.all());
        }
        long[] ptr = new long[workload.allocationCount()];
        Map<Long, Long> streams = new HashMap<>();
        List<MemoryOp> ops = workload.ops();
        int step = -1;
        int stepsCompleted = 0;
        for (int i = 0; i < ops.size(); i++) {
            MemoryOp op = ops.get(i);
            switch (op) {
                case MemoryOp.Alloc a -> {
                    current[0] = recordHistory ? workload.frames(a) : null;
                    try {
                        ptr[a.id()] = allocator.malloc(a.bytes(), deviceStream(device, streams, a.stream()));
                    } catch (OutOfMemoryException e) {
                        return new Run(conf, allocator.stats(), stepsCompleted, e.report(), i, a, allocator, device);
                    }
                }
                case MemoryOp.Free f -> {
                    current[0] = null;
                    allocator.free(ptr[f.id()]);
                }
                case MemoryOp.StepStart s -> {
                    if (step >= 0) {
                        stepsCompleted++;
                    }
                    step = s.step();
                }
            }
        }
        return new Run(conf, allocator.stats(), stepsCompleted + (step >= 0 ? 1 : 0), null, -1, null, allocator, device);
    }

    /**
     * The device stream standing for a workload's stream: 0 is the default stream; any other handle (traces
     * carry arbitrary integers) gets a stream created on the device at first use, in first-use order, so the
     * mapping is deterministic.
     */
    private static long deviceStream(SimulatedDevice device, Map<Long, Long> streams, long stream) {
        if (stream == 0) {
            return 0;
        }
        Long mapped = streams.get(stream);
        if (mapped == null) {
            mapped = device.createStream();
            streams.put(stream, mapped);
        }
        return mapped;
    }

    /**
     * The smallest capacity (a multiple of {@link #CAPACITY_STEP}, with this runner's held-outside bytes) that
     * runs the workload under {@code conf} without OOM.
     */
    public long minCapacity(AllocationWorkload workload, String conf) {
        Run unlimited = run(workload, conf, Math.max(4 * capacity, UNLIMITED), false);
        long hi = roundUp(unlimited.stats().get(StatKind.RESERVED_BYTES).peak() + heldOutside);
        long lo = roundUp(workload.peakLiveBytes() + heldOutside) - CAPACITY_STEP; // infeasible or equal floor
        for (int tries = 0; !run(workload, conf, hi, false).completed(); tries++) {
            if (tries == 8) {
                throw new IllegalStateException("no capacity up to " + hi + " bytes runs the workload under '" + conf + "'");
            }
            lo = hi;
            hi = roundUp(2 * hi);
        }
        return MinimumCapacity.search(lo, hi, c -> run(workload, conf, c, false).completed());
    }

    private static long roundUp(long bytes) {
        return MinimumCapacity.roundUp(bytes);
    }
}
