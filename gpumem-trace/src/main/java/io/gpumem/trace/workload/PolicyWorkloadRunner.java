package io.gpumem.trace.workload;

import io.gpumem.device.DeviceOp;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.oom.OutOfMemoryException;
import io.gpumem.alloc.GpuAllocator;
import io.gpumem.policy.PolicyFactory;
import io.gpumem.policy.PolicyRegistry;
import io.gpumem.policy.PolicySpec;
import io.gpumem.policy.StreamFacts;
import io.gpumem.stats.MemoryStats;
import io.gpumem.stats.StatKind;
import io.gpumem.trace.whatif.MinimumCapacity;
import io.gpumem.trace.whatif.WhatIfOutcome;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Runs a workload under an allocation policy other than the PyTorch-exact allocator (the demo's {@code stitch} and
 * {@code planned} rows), on the same simulated device as {@link WorkloadRunner}. {@code planned} knows nothing in
 * advance: it records the first training step, plans it, and serves later steps by request position and size,
 * falling back (and re-planning) where a step's shapes differ, as a job using it would.
 */
public final class PolicyWorkloadRunner {

    /** The policies the demo adds to its table: every registered one beside the exact allocator. */
    public static final List<String> DEMO_POLICIES = PolicyRegistry.alternatives().stream().map(PolicyFactory::name)
            .toList();

    private final WorkloadRunner runner;

    public PolicyWorkloadRunner(WorkloadRunner runner) {
        this.runner = runner;
    }

    /** One run's counters; {@code completed} is false when a request failed. */
    public record Run(PolicySpec spec, boolean completed, int stepsCompleted, MemoryStats stats, long deviceMaps,
                      double nsPerPair) {
    }

    public Run run(AllocationWorkload workload, PolicySpec spec, long capacity) {
        SimulatedDevice device = SimulatedDevice.builder().capacity(capacity).heldOutside(runner.heldOutside()).build();
        boolean marksSteps = workload.ops().stream().anyMatch(op -> op instanceof MemoryOp.StepStart);
        GpuAllocator policy = spec.prepare(StreamFacts.of(marksSteps, null)).create(device);
        long[] ptr = new long[workload.allocationCount()];
        Map<Long, Long> streams = new HashMap<>();
        int steps = 0;
        boolean started = false;
        long pairs = 0;
        long t0 = System.nanoTime();
        for (MemoryOp op : workload.ops()) {
            switch (op) {
                case MemoryOp.Alloc a -> {
                    try {
                        ptr[a.id()] = policy.malloc(a.bytes(), stream(device, streams, a.stream()));
                        pairs++;
                    } catch (OutOfMemoryException e) {
                        return new Run(spec, false, steps, policy.stats(), maps(device), 0);
                    }
                }
                case MemoryOp.Free f -> policy.free(ptr[f.id()]);
                case MemoryOp.StepStart s -> {
                    if (started) {
                        steps++;
                        policy.internals().stepBoundary();
                    }
                    started = true;
                }
            }
        }
        double ns = pairs == 0 ? 0 : (double) (System.nanoTime() - t0) / pairs;
        return new Run(spec, true, steps + (started ? 1 : 0), policy.stats(), maps(device), ns);
    }

    private static long maps(SimulatedDevice d) {
        return d.callCount(DeviceOp.MAP) + d.callCount(DeviceOp.UNMAP);
    }

    private static long stream(SimulatedDevice device, Map<Long, Long> streams, long stream) {
        return stream == 0 ? 0 : streams.computeIfAbsent(stream, s -> device.createStream());
    }

    /** Rows for {@code policies} at the runner's capacity, with the minimum capacity when asked. */
    public List<WhatIfOutcome> outcomes(AllocationWorkload workload, List<String> policies, boolean withMinCapacity) {
        List<WhatIfOutcome> rows = new ArrayList<>();
        for (String name : policies) {
            PolicySpec spec = PolicySpec.parse(name);
            Run r = run(workload, spec, runner.capacity());
            long min = -1;
            if (withMinCapacity) {
                long held = runner.heldOutside();
                long hi = MinimumCapacity.roundUp(2 * workload.peakLiveBytes() + held);
                while (!run(workload, spec, hi).completed()) {
                    hi = MinimumCapacity.roundUp(2 * hi);
                }
                long lo = MinimumCapacity.roundUp(workload.peakLiveBytes() + held) - MinimumCapacity.STEP;
                min = MinimumCapacity.search(lo, hi, c -> run(workload, spec, c).completed());
            }
            rows.add(new WhatIfOutcome("policy " + spec.label(), false, runner.capacity(),
                    r.stats().get(StatKind.ALLOCATED_BYTES).peak(), r.stats().get(StatKind.RESERVED_BYTES).peak(),
                    r.stats().numDeviceAlloc(), r.stats().numDeviceFree(), r.stats().numAllocRetries(), r.completed() ? 0 : 1, min, spec.name(),
                    r.deviceMaps(), r.nsPerPair()));
        }
        return rows;
    }
}
