package io.gpumem.engine;

import io.gpumem.alloc.CachingAllocator;
import io.gpumem.alloc.GpuAllocator;
import io.gpumem.alloc.SegmentRestorer;
import io.gpumem.history.Frame;
import io.gpumem.history.HistoryOptions;
import io.gpumem.policy.AllocatorPolicy;
import io.gpumem.policy.PlannedAllocator;
import java.util.List;
import java.util.function.LongSupplier;
import java.util.function.Supplier;

/**
 * The allocator hooks {@link StreamRunner} needs beyond {@link GpuAllocator}'s public face: history (stacks and
 * clock), the step-boundary hook, and the segment-restoring capability. Interim: until the allocator interface
 * carries them behind {@code internals()} (issue 18, the policy registry's half), this is the one place that
 * knows which allocator class offers which hook; the runner never tests a concrete class itself.
 */
final class AllocatorHooks {

    private AllocatorHooks() {
    }

    /** Starts recording history as {@code _record_memory_history()} does by default. */
    static void recordHistory(GpuAllocator a, Supplier<List<Frame>> frames, LongSupplier clock) {
        if (a instanceof CachingAllocator c) {
            c.internals().setClock(clock);
            c.setContextSupplier(frames);
            c.recordHistory(HistoryOptions.all());
        } else if (a instanceof AllocatorPolicy p) {
            p.recordHistory(HistoryOptions.all());
            p.setContextSupplier(frames);
            p.setHistoryClock(clock);
        } else {
            throw new IllegalArgumentException(a.getClass().getSimpleName() + " cannot record history");
        }
    }

    /** Tells the allocator a step of an iterated stream ended (a policy that learns per step replans). */
    static void stepBoundary(GpuAllocator a) {
        if (a instanceof PlannedAllocator p) {
            p.nextIteration();
        }
    }

    /** The allocator's segment-restoring capability, or null when it has none. */
    static SegmentRestorer restorer(GpuAllocator a) {
        return a instanceof CachingAllocator c ? c.internals() : null;
    }
}
