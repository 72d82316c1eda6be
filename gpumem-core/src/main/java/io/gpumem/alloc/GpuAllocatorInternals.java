package io.gpumem.alloc;

import io.gpumem.history.Frame;
import io.gpumem.history.HistoryOptions;
import java.util.List;
import java.util.function.LongSupplier;
import java.util.function.Supplier;

/**
 * What every {@link GpuAllocator} offers besides its user API, reached through {@link GpuAllocator#internals()}:
 * memory-history recording and where its stacks and times come from, the invariant check tests run after every
 * step, and the step-boundary hook a runner calls between the steps of an iterated workload. Kept off the public
 * face so that the allocator interface stays what a user calls (as Caffeine keeps advanced operations behind
 * {@code Cache.policy()}); an implementation may return a richer type (the exact allocator's
 * {@link AllocatorInternals} adds state import and trace listeners).
 *
 * <p>Every method is as safe for concurrent use as the allocator it belongs to.
 */
public interface GpuAllocatorInternals {

    /**
     * Starts, changes or stops recording memory history ({@code torch.cuda.memory._record_memory_history}):
     * trace entries and the stacks of live blocks then appear in {@link GpuAllocator#snapshot()}.
     */
    void recordHistory(HistoryOptions options);

    /**
     * Where stacks come from when history captures context (called at malloc, and at free with context
     * {@code all}); {@code null} records no frames.
     */
    void setContextSupplier(Supplier<List<Frame>> frames);

    /** The clock history entries are stamped with, in microseconds (a replay uses the recorded times). */
    void setClock(LongSupplier timeMicros);

    /** Checks every internal invariant; throws {@link IllegalStateException} naming what is broken. */
    void checkInvariants();

    /**
     * Tells the allocator that one step of an iterated workload (a training step) has ended and the next begins;
     * never called before the first step. Most allocators ignore it (the default); one that learns the shape of a
     * step (such as a planning policy) uses it to count request positions per step.
     */
    default void stepBoundary() {}
}
