package io.gpumem.policy;

import io.gpumem.alloc.OrderedBlock;
import io.gpumem.history.Frame;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * One address block of a {@link StitchAllocator} arena: allocated, free, or awaiting its streams' events. Its
 * address, size and stream are the {@link OrderedBlock} key. Blocks of an arena are chained by
 * {@code prev}/{@code next} in address order; a free block is also in its arena's free index (a
 * {@code SizeClassIndex}, through the links inherited from {@link OrderedBlock}), where every block has the
 * arena's stream, so the tree's order is (size, address). The allocator recycles block
 * objects through a spare list threaded by {@code next}, so it resets the fields it relies on when it reuses one.
 * Design notes: policies.md §2.1.
 */
final class StitchBlock extends OrderedBlock<StitchBlock> {

    /** The arena the block belongs to; null only while the block object waits on the spare list. */
    StitchAllocator.@Nullable Arena arena;

    boolean free;

    @Nullable
    StitchBlock prev;

    @Nullable
    StitchBlock next;

    /** Streams recorded with recordStream, then their events while the freed block waits; null until the first. */
    @Nullable
    StreamUses uses;

    long requested; // the unrounded request of an allocated block

    @Nullable
    List<Frame> frames; // the request's stack while allocated, when history keeps stacks

    StitchBlock(StitchAllocator.Arena arena, long addr, long size, long stream) {
        this.arena = arena;
        this.ptr = addr;
        this.size = size;
        this.stream = stream;
    }

    /** The block's arena: every block in use has one (a recycled block object on the spare list has none). */
    StitchAllocator.Arena arena() {
        StitchAllocator.Arena a = arena;
        if (a == null) {
            throw new IllegalStateException("recycled block object in use at 0x" + Long.toHexString(ptr));
        }
        return a;
    }
}
