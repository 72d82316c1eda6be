package io.gpumem.cli.analysis;

import io.gpumem.alloc.CachingAllocator;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.engine.RequestStream;
import io.gpumem.oom.OutOfMemoryException;
import io.gpumem.size.ByteSize;
import io.gpumem.spill.SpillStats;
import io.gpumem.spill.SpillableBuffer;
import io.gpumem.spill.SpillingAllocator;
import io.gpumem.trace.workload.TrainingWorkload;
import java.io.PrintWriter;

/**
 * {@code demo --spill}: the demo workload again, on a {@link SpillingAllocator} over the default
 * caching allocator, with optimizer states, saved activations, weights and gradients spillable (in
 * that order: AdamW states are touched once per step, activations once in backward) and temporaries
 * and inputs not. The device is simulated without bytes, so the spill is accounting-only: buffers leave
 * and re-enter the device exactly as they would, no bytes move. The workload has no "use" events, so
 * a spilled buffer stays off the device until freed.
 */
final class SpillDemo {
    /** How the demo names the part of the run before its first step: allocating the weights. */
    static final String BEFORE_STEP_1 = "while building the model (before step 1)";

    private SpillDemo() {}

    static void run(TrainingWorkload workload, long capacity, long heldOutside, PrintWriter out) {
        SimulatedDevice device = SimulatedDevice.builder()
                .capacity(capacity)
                .heldOutside(heldOutside)
                .build();
        long hostBudget = capacity;
        try (SpillingAllocator allocator = SpillingAllocator.accountingOnly(new CachingAllocator(device), hostBudget)) {
            RequestStream ops = workload.stream();
            SpillableBuffer[] spillable = new SpillableBuffer[ops.slots()];
            long[] plain = new long[ops.slots()];
            int step = -1;
            long spillsBefore = 0;
            out.println("with --spill (host budget " + ByteSize.formatSigned(hostBudget)
                    + ", then disk; accounting only):");
            try {
                for (int k = 0; k < ops.length(); k++) {
                    int slot = ops.slot(k);
                    switch (ops.op(k)) {
                        case RequestStream.STEP -> {
                            spillsBefore = report(out, step, allocator.spillStats(), spillsBefore);
                            step++;
                        }
                        case RequestStream.ALLOC -> {
                            int priority = switch (workload.kind(slot)) {
                                case OPTIMIZER_STATE -> 0;
                                case ACTIVATION -> 1;
                                case WEIGHT -> 2;
                                case GRADIENT -> 3;
                                default -> -1;
                            };
                            long bytes = ops.size(k);
                            if (priority < 0 || bytes == 0) {
                                plain[slot] = allocator.malloc(bytes, ops.stream(k));
                            } else {
                                spillable[slot] = allocator.allocateSpillable(bytes, priority);
                            }
                        }
                        case RequestStream.FREE -> {
                            if (spillable[slot] != null) {
                                spillable[slot].close();
                                spillable[slot] = null;
                            } else {
                                allocator.free(plain[slot]);
                            }
                        }
                        default -> throw new IllegalStateException("a training workload has no op " + ops.op(k));
                    }
                }
                report(out, step, allocator.spillStats(), spillsBefore);
                SpillStats s = allocator.spillStats();
                out.println("  all " + (step + 1) + " steps completed: " + s.spills() + " spills ("
                        + ByteSize.formatSigned(s.bytesToHost()) + " to host, " + ByteSize.formatSigned(s.bytesToDisk())
                        + " to disk), " + s.oomRetries() + " allocations retried after an OOM");
            } catch (OutOfMemoryException e) {
                out.println("  OOM " + (step < 0 ? BEFORE_STEP_1 : "in step " + (step + 1))
                        + " even with spilling: nothing spillable left");
            }
        }
    }

    /**
     * Prints the spills since {@code spillsBefore} as those of {@code step} (−1: building the model, whose weights
     * can spill too, so its line is printed as every step's is) and returns the spill count now.
     */
    private static long report(PrintWriter out, int step, SpillStats s, long spillsBefore) {
        if (s.spills() > spillsBefore) {
            out.println("  " + (step < 0 ? BEFORE_STEP_1 : "step " + (step + 1)) + ": " + (s.spills() - spillsBefore)
                    + " buffers spilled instead of an OOM");
        }
        return s.spills();
    }
}
