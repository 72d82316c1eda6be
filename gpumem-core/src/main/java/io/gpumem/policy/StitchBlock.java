package io.gpumem.policy;

import io.gpumem.history.Frame;
import java.util.List;

/**
 * One address block of a {@link StitchAllocator} arena: allocated, free, or awaiting its streams' events. Blocks
 * of an arena are chained by {@code prev}/{@code next} in address order; a free block is also in its arena's
 * {@link FreeBlockTree} (the {@code left}/{@code right}/{@code priority} links). The allocator recycles block
 * objects through a spare list threaded by {@code next}, so it resets the fields it relies on when it reuses one.
 * Design notes: policies.md §2.1.
 */
final class StitchBlock {
    StitchAllocator.Arena arena;
    long addr;
    long size;
    boolean free;
    StitchBlock prev;
    StitchBlock next;
    long stream;
    long[] usedOn;        // streams recorded with recordStream, then their events while pending
    int usedCount;
    StitchBlock left;     // FreeBlockTree links while free
    StitchBlock right;
    int priority;
    long requested;       // the unrounded request of an allocated block
    List<Frame> frames;   // the request's stack while allocated, when history keeps stacks

    StitchBlock(StitchAllocator.Arena arena, long addr, long size, long stream) {
        this.arena = arena;
        this.addr = addr;
        this.size = size;
        this.stream = stream;
    }
}
