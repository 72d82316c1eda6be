package io.gpumem.trace.workload;

import io.gpumem.engine.RequestStream;
import io.gpumem.history.Frame;
import java.util.List;

/**
 * A generated request stream of allocations and frees ({@link TrainingWorkload}, or a recorded trace's requests
 * re-run from scratch, {@link TraceWorkload}), written by its generator straight into the engine's one
 * {@link RequestStream}: every alloc at the site of the stack a run with history attaches to it, every other op at
 * {@link #NO_REQUEST}, streams numbered in order of first use, no start state (slot k is the k-th allocation).
 */
public interface AllocationWorkload {
    /** The requests in program order. */
    RequestStream stream();

    /** One line saying what this is. */
    String describe();

    /** Peak of the sum of live request sizes over the stream: the floor no allocator can go below. */
    default long peakLiveBytes() {
        return stream().peakLiveBytes();
    }

    /** Frames of allocator events no request of the workload caused (frees). */
    List<Frame> NO_REQUEST = List.of(new Frame("gpumem-demo", 0, "demo"));

    /** A builder for a workload's stream: streams in order of first use, ops without a site at {@link #NO_REQUEST}. */
    static RequestStream.Builder streamBuilder() {
        return RequestStream.builder().streamsInFirstUseOrder().defaultFrames(NO_REQUEST);
    }
}
