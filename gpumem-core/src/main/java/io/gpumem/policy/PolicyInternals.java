package io.gpumem.policy;

import io.gpumem.alloc.GpuAllocatorInternals;
import io.gpumem.history.Frame;
import io.gpumem.history.HistoryOptions;
import java.util.List;
import java.util.Objects;
import java.util.function.LongSupplier;
import java.util.function.Supplier;

/**
 * The {@link GpuAllocatorInternals} of the policies built on a {@link StitchAllocator} (stitch itself, and planned,
 * whose plan region and fallback share one): history goes to the stitch allocator's {@link PolicyHistory}, the
 * invariant check to {@link StitchInvariants}, and a step boundary to whatever the policy on top does with it.
 * Each runs under the stitch allocator's lock, like the allocator's own methods.
 */
final class PolicyInternals implements GpuAllocatorInternals {
    private final StitchAllocator memory;
    private final Runnable onStepBoundary;

    PolicyInternals(StitchAllocator memory, Runnable onStepBoundary) {
        this.memory = memory;
        this.onStepBoundary = onStepBoundary;
    }

    @Override
    public void recordHistory(HistoryOptions options) {
        Objects.requireNonNull(options, "options");
        underLock(() -> memory.history().configure(options));
    }

    @Override
    public void setContextSupplier(Supplier<List<Frame>> frames) {
        underLock(() -> memory.history().setFrames(frames));
    }

    @Override
    public void setClock(LongSupplier timeMicros) {
        Objects.requireNonNull(timeMicros, "timeMicros");
        underLock(() -> memory.history().setClock(timeMicros));
    }

    @Override
    public void checkInvariants() {
        underLock(memory::checkInvariants);
    }

    @Override
    public void stepBoundary() {
        underLock(onStepBoundary);
    }

    private void underLock(Runnable action) {
        memory.lock.lock();
        try {
            action.run();
        } finally {
            memory.lock.unlock();
        }
    }
}
