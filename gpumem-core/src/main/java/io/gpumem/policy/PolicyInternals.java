package io.gpumem.policy;

import io.gpumem.alloc.AbstractAllocatorInternals;
import io.gpumem.alloc.GpuAllocatorInternals;

/**
 * The {@link GpuAllocatorInternals} of the policies built on a {@link StitchAllocator} (stitch itself, and planned,
 * whose plan region and fallback share one): history is the stitch allocator's recorder, the invariant check
 * {@link StitchInvariants}, and a step boundary whatever the policy on top does with it. Each runs under the
 * stitch allocator's lock, like the allocator's own methods.
 */
final class PolicyInternals extends AbstractAllocatorInternals {
    private final StitchAllocator memory;
    private final Runnable onStepBoundary;

    PolicyInternals(StitchAllocator memory, Runnable onStepBoundary) {
        super(memory.lock, memory.history());
        this.memory = memory;
        this.onStepBoundary = onStepBoundary;
    }

    @Override
    public void checkInvariants() {
        underLock(memory::checkInvariants);
    }

    @Override
    public void stepBoundary() {
        underLock(onStepBoundary);
    }
}
