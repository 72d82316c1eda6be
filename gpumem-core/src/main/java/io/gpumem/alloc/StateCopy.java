package io.gpumem.alloc;

/**
 * Copies the block graph of one {@link AllocatorCore} into a fresh one (the copy constructor's part that walks
 * blocks): {@link CachingAllocator#copyOnto}.
 *
 * <p>Every segment is copied from its head block (found among the allocated blocks and the pools' free blocks),
 * along its prev/next chain; the copies are linked as the originals are, allocated ones entered in the copy's
 * address table, free ones inserted into the copy's pools. The copied segments must add up to the reserved bytes
 * (else the copy is refused: a segment was missed).
 * The pools' treaps get their own shapes (the copy draws new priorities), but their order is the same total
 * order (stream, size, address), which is all any lookup depends on, so the copy behaves as the original would.
 *
 * <p>Refused (IllegalStateException) where a copy could not be exact or complete: expandable segments (their
 * page tables are not copied), pending stream events (blocks waiting on them are in no set, so would be missed),
 * and attached history, trackers or listeners.
 */
final class StateCopy {
    private StateCopy() {}

    static void copyInto(AllocatorCore from, AllocatorCore to) {
        if (!from.expandableSegments.isEmpty()) {
            throw new IllegalStateException("cannot copy an allocator with expandable segments");
        }
        if (!from.events.isEmpty()) {
            throw new IllegalStateException("cannot copy an allocator with stream events pending");
        }
        if (!from.trace.isIdle()) {
            throw new IllegalStateException("cannot copy an allocator that records history or has trace listeners");
        }
        to.trace.clockMicros = from.trace.clockMicros;
        to.trace.contextSupplier = from.trace.contextSupplier;
        to.events.copySparesFrom(from.events);
        to.smallBlocks.getFreeBlocksCallCount = from.smallBlocks.getFreeBlocksCallCount;
        to.largeBlocks.getFreeBlocksCallCount = from.largeBlocks.getFreeBlocksCallCount;

        if (!from.smallBlocks.unmapped.isEmpty() || !from.largeBlocks.unmapped.isEmpty()) {
            throw new IllegalStateException("cannot copy an allocator with unmapped blocks");
        }
        // With no events pending and no expandable segments every block is allocated or in its pool's free set,
        // so every segment's head is among these and each segment is copied once, from its head.
        long[] copiedBytes = {0};
        from.allocatedBlocks().forEach(b -> {
            if (b.prev == null) {
                copiedBytes[0] += copySegment(b, from, to);
            }
        });
        for (BlockPool pool : new BlockPool[] {from.smallBlocks, from.largeBlocks}) {
            for (Block b = pool.blocks.first(); b != null; b = pool.blocks.next(b)) {
                if (b.prev == null) {
                    copiedBytes[0] += copySegment(b, from, to);
                }
            }
        }
        if (copiedBytes[0] != from.totalAllocatedMemory) {
            throw new IllegalStateException("copied " + copiedBytes[0] + " bytes of segments, but "
                    + from.totalAllocatedMemory + " are reserved");
        }
    }

    /** Copies the segment headed by {@code head}, entering each copy in the address table or its pool's free set. */
    private static long copySegment(Block head, AllocatorCore from, AllocatorCore to) {
        long bytes = 0;
        Block previousCopy = null;
        for (Block b = head; b != null; b = b.next) {
            Block c = copyOf(b, from, to);
            c.prev = previousCopy;
            if (previousCopy != null) {
                previousCopy.next = c;
            }
            previousCopy = c;
            if (c.allocated) {
                if (!to.allocatedBlocks().putIfAbsent(c.ptr, c)) {
                    throw new IllegalStateException("block copied twice: " + b);
                }
            } else {
                c.pool.blocks.insert(c);
            }
            bytes += c.size;
        }
        return bytes;
    }

    private static Block copyOf(Block b, AllocatorCore from, AllocatorCore to) {
        if (b.expandable != null || b.eventCount != 0) {
            throw new IllegalStateException("cannot copy " + b + ": expandable or waiting on events");
        }
        Block c = new Block(b.ptr, b.size, b.stream, b.pool == from.smallBlocks ? to.smallBlocks : to.largeBlocks);
        c.requestedSize = b.requestedSize;
        c.allocated = b.allocated;
        c.mapped = b.mapped;
        c.streamUses = b.streamUses.clone();
        c.streamUseCount = b.streamUseCount;
        c.gcCountBase = b.gcCountBase;
        c.contextWhenAllocated = b.contextWhenAllocated;
        c.contextWhenSegmentAllocated = b.contextWhenSegmentAllocated;
        return c;
    }
}
