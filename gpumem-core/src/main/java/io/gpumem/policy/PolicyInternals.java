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
        memory.history().configure(Objects.requireNonNull(options, "options"));
    }

    @Override
    public void setContextSupplier(Supplier<List<Frame>> frames) {
        memory.history().setFrames(frames);
    }

    @Override
    public void setClock(LongSupplier timeMicros) {
        memory.history().setClock(Objects.requireNonNull(timeMicros, "timeMicros"));
    }

    @Override
    public void checkInvariants() {
        memory.checkInvariants();
    }

    @Override
    public void stepBoundary() {
        onStepBoundary.run();
    }
}
