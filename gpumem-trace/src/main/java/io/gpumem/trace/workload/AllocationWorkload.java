package io.gpumem.trace.workload;

import io.gpumem.history.Frame;
import java.util.List;

/**
 * A request stream of allocations and frees that can be run against an allocator: generated ({@link TrainingWorkload}) or taken from
 * a recorded trace. Ids of {@link MemoryOp.Alloc} run densely from 0 to {@link #allocationCount()} − 1.
 */
public interface AllocationWorkload {
    /** The ops in program order. */
    List<MemoryOp> ops();

    /** Number of allocations. */
    int allocationCount();

    /** One line saying what this is. */
    String describe();

    /**
     * The stack frames (innermost first, as PyTorch records them) a run with history attaches to the request
     * {@code alloc}, so that snapshots and reports name where memory was asked for. The default names the
     * request alone; generators that know more (module, layer, op) override it. Identical stacks should be the
     * same list object, so that writers emit them once.
     */
    default List<Frame> frames(MemoryOp.Alloc alloc) {
        return List.of(new Frame(alloc.name(), 0, "demo"));
    }

    /** Peak of the sum of live request sizes over the stream: the floor no allocator can go below. */
    default long peakLiveBytes() {
        long[] size = new long[allocationCount()];
        long live = 0;
        long peak = 0;
        for (MemoryOp op : ops()) {
            if (op instanceof MemoryOp.Alloc a) {
                size[a.id()] = a.bytes();
                live += a.bytes();
                peak = Math.max(peak, live);
            } else if (op instanceof MemoryOp.Free f) {
                live -= size[f.id()];
            }
        }
        return peak;
    }
}
