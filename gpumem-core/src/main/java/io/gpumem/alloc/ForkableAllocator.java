package io.gpumem.alloc;

import io.gpumem.device.Device;

/**
 * A capability of allocators whose state can be deep-copied onto a copy of their device: what the minimum-capacity
 * search needs to reuse replayed prefixes ({@code io.gpumem.engine.StreamRunner}). An allocator offers it by
 * implementing this interface; callers test for the interface, never for a concrete class.
 */
public interface ForkableAllocator extends GpuAllocator {

    /**
     * An independent deep copy of this allocator's state working on {@code device}, a copy of this allocator's
     * device taken at the same moment; @throws IllegalStateException where a copy could not be exact
     */
    GpuAllocator copyOnto(Device device);

    /**
     * A copy like {@link #copyOnto} that need keep no statistics: for a replay that only asks whether each request
     * succeeds (a capacity search's probe), where updating the counters is wasted work. It decides exactly as
     * {@link #copyOnto}'s copy would; its {@code stats()} may throw {@link IllegalStateException}.
     */
    GpuAllocator uncountedCopyOnto(Device device);

    /**
     * Whether the device's capacity changes decisions other than by refusing a device allocation (for example a
     * reservation sized from the capacity). Where it does, a run under one capacity cannot be continued from a
     * prefix replayed under another, and prefix reuse is off.
     */
    boolean capacityShapesDecisions();

    /**
     * Plays {@code malloc(size, stream)} and, at once, the free of the block it returns, where that pair is known to
     * leave the allocator as it found it (the cache serves the request, so no device call is made, and the split
     * and merge undo each other): what a replay's temporaries are, a block freed by the very next request, about a
     * quarter of a training step's requests. Returns false, having changed nothing, where the caller must make the two
     * calls: among others, wherever the pair would leave a mark (statistics kept, history recorded) and wherever the
     * cache cannot serve the request. The address the malloc would have returned is not reported: the block is free
     * again.
     */
    boolean tryMallocFreedAtOnce(long size, long stream);
}
