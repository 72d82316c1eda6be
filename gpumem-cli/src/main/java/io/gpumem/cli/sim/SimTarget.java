package io.gpumem.cli.sim;

import io.gpumem.history.MemorySnapshot;
import java.util.Map;

/**
 * What {@link SimRunner} drives: a caching allocator on a device, reduced to the calls an ops script makes.
 * The production implementation wraps {@code CachingAllocator} over a {@code SimulatedDevice}; keeping the
 * runner behind this seam lets its bookkeeping (names, lazy creation, OOM handling, output) be tested on its
 * own.
 */
interface SimTarget {

    /** Allocates; throws {@link OutOfMemory} with PyTorch's message when the device is full. */
    long malloc(long size, long stream);

    void free(long ptr);

    void recordStream(long ptr, long stream);

    /** Lets every event recorded so far complete (the GPU catches up). */
    void completeEvents();

    void emptyCache();

    void setMemoryFraction(double fraction);

    /** {@code torch.cuda.memory._set_allocator_settings}. */
    void setSettings(String conf);

    void resetPeakStats();

    /** {@code torch.cuda.memory_stats()}: PyTorch's keys, sorted. */
    Map<String, Long> memoryStats();

    int deviceIndex();

    /** Starts recording the allocator's history, so that {@link #snapshot()} includes the trace. */
    default void recordHistory() {}

    /** {@code torch.cuda.memory._snapshot()}. */
    default MemorySnapshot snapshot() {
        throw new UnsupportedOperationException("this target cannot take snapshots");
    }

    /** An allocation the device could not satisfy; the message is PyTorch's OOM text. */
    final class OutOfMemory extends RuntimeException {
        OutOfMemory(String message, Throwable cause) {
            super(message, cause);
        }
    }
}
