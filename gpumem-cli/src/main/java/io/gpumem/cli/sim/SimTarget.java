package io.gpumem.cli.sim;

import io.gpumem.history.MemorySnapshot;
import io.gpumem.script.ScriptOp;
import io.gpumem.stats.MemoryStats;

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

    /**
     * Runs a script op that acts on the allocator or device and prints nothing: {@code config} once the target
     * exists ({@code torch.cuda.memory._set_allocator_settings}), {@code empty_cache}, {@code set_fraction},
     * {@code reset_peak} and {@code complete_events} (every event recorded so far completes: the GPU catches up).
     *
     * @throws IllegalArgumentException for any other op
     */
    void apply(ScriptOp op);

    /** {@code torch.cuda.memory_stats()}. */
    MemoryStats memoryStats();

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
