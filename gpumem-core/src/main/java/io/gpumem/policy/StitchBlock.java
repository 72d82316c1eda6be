package io.gpumem.policy;

import io.gpumem.alloc.OrderedBlock;
import io.gpumem.history.Frame;
import java.util.List;

/**
 * One address block of a {@link StitchAllocator} arena: allocated, free, or awaiting its streams' events. Its
 * address, size and stream are the {@link OrderedBlock} key. Blocks of an arena are chained by
 * {@code prev}/{@code next} in address order; a free block is also in its arena's free tree (a
 * size-ordered {@code BlockTree}, through the links inherited from {@link OrderedBlock}), where every block has the
 * arena's stream, so the tree's order is (size, address). The allocator recycles block
 * objects through a spare list threaded by {@code next}, so it resets the fields it relies on when it reuses one.
 * Design notes: policies.md §2.1.
 */
final class StitchBlock extends OrderedBlock<StitchBlock> {
    StitchAllocator.Arena arena;
    boolean free;
    StitchBlock prev;
    StitchBlock next;
    long[] usedOn; // streams recorded with recordStream, then their events while pending
    int usedCount;
    long requested; // the unrounded request of an allocated block
    List<Frame> frames; // the request's stack while allocated, when history keeps stacks

    StitchBlock(StitchAllocator.Arena arena, long addr, long size, long stream) {
        this.arena = arena;
        this.ptr = addr;
        this.size = size;
        this.stream = stream;
    }
}
