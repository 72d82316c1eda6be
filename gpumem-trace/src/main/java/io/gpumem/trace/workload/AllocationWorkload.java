package io.gpumem.trace.workload;

import io.gpumem.engine.RequestStream;
import io.gpumem.history.Frame;
import java.util.List;

/**
 * A generated request stream of allocations and frees ({@link TrainingWorkload}, or a recorded trace's requests
 * re-run from scratch, {@link TraceWorkload}), as the generator writes it: {@link MemoryOp}s with their tensor
 * kinds and names. It runs on an allocator compiled into the engine's one {@link RequestStream} ({@link #stream()}).
 * Ids of {@link MemoryOp.Alloc} run densely from 0 to {@link #allocationCount()} − 1.
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

    /** Frames of allocator events no request of the workload caused (frees). */
    List<Frame> NO_REQUEST = List.of(new Frame("gpumem-demo", 0, "demo"));

    /**
     * The workload as the engine's request stream: one op per {@link MemoryOp} (a {@link MemoryOp.StepStart} is a
     * STEP; the source entry of each op is its index in {@link #ops()}), each alloc at the site of its
     * {@link #frames}, other ops at {@link #NO_REQUEST}; streams numbered in order of first use.
     */
    default RequestStream stream() {
        RequestStream.Builder b =
                RequestStream.builder().streamsInFirstUseOrder().defaultFrames(NO_REQUEST);
        int[] slot = new int[allocationCount()];
        List<MemoryOp> ops = ops();
        for (int i = 0; i < ops.size(); i++) {
            switch (ops.get(i)) {
                case MemoryOp.Alloc a -> {
                    slot[a.id()] = b.alloc(a.bytes(), a.stream(), i);
                    b.atSite(b.site(frames(a)));
                }
                case MemoryOp.Free f -> b.free(slot[f.id()], i);
                case MemoryOp.StepStart s -> b.step(i);
            }
        }
        return b.build();
    }
}
