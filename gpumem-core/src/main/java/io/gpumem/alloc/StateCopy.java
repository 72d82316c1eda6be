package io.gpumem.alloc;

import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;

/**
 * Copies the block graph of one {@link AllocatorCore} into a fresh one (the copy constructor's part that walks
 * blocks): {@link CachingAllocator#copyOnto}.
 *
 * <p>Every block is reached from an allocated block or a free block of a pool, then along its segment's
 * prev/next chain, and copied once (an identity map from original to copy); the copies are linked as the
 * originals are, allocated ones entered in the copy's address table, free ones inserted into the copy's pools.
 * The pools' treaps get their own shapes (the copy draws new priorities), but their order is the same total
 * order (stream, size, address), which is all any lookup depends on, so the copy behaves as the original would.
 *
 * <p>Refused (IllegalStateException) where a copy could not be exact or complete: expandable segments (their
 * page tables are not copied), pending stream events (blocks waiting on them are in no set, so would be missed),
 * and attached history, trackers or listeners.
 */
final class StateCopy {
    private StateCopy() {
    }

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

        List<Block> allocated = new ArrayList<>();
        from.allocatedBlocks.forEach(allocated::add);
        List<Block> freeSmall = from.smallBlocks.blocks.toList();
        List<Block> freeLarge = from.largeBlocks.blocks.toList();
        if (!from.smallBlocks.unmapped.isEmpty() || !from.largeBlocks.unmapped.isEmpty()) {
            throw new IllegalStateException("cannot copy an allocator with unmapped blocks");
        }
        IdentityHashMap<Block, Block> copies = new IdentityHashMap<>();
        for (List<Block> seeds : List.of(allocated, freeSmall, freeLarge)) {
            for (Block seed : seeds) {
                if (copies.containsKey(seed)) {
                    continue;
                }
                Block head = seed;
                while (head.prev != null) {
                    head = head.prev;
                }
                Block previousCopy = null;
                for (Block b = head; b != null; b = b.next) {
                    Block c = copyOf(b, from, to);
                    if (copies.put(b, c) != null) {
                        throw new IllegalStateException("block reached twice: " + b);
                    }
                    c.prev = previousCopy;
                    if (previousCopy != null) {
                        previousCopy.next = c;
                    }
                    previousCopy = c;
                }
            }
        }
        for (Block b : allocated) {
            to.allocatedBlocks.putIfAbsent(b.ptr, copies.get(b));
        }
        for (Block b : freeSmall) {
            to.smallBlocks.blocks.insert(copies.get(b));
        }
        for (Block b : freeLarge) {
            to.largeBlocks.blocks.insert(copies.get(b));
        }
    }

    private static Block copyOf(Block b, AllocatorCore from, AllocatorCore to) {
        if (b.expandable != null || b.eventCount != 0) {
            throw new IllegalStateException("cannot copy " + b + ": expandable or waiting on events");
        }
        Block c = new Block();
        c.reset(b.ptr, b.size, b.stream, b.pool == from.smallBlocks ? to.smallBlocks : to.largeBlocks);
        c.requestedSize = b.requestedSize;
        c.allocated = b.allocated;
        c.mapped = b.mapped;
        c.streamUses = b.streamUses == null ? null : b.streamUses.clone();
        c.streamUseCount = b.streamUseCount;
        c.gcCountBase = b.gcCountBase;
        c.contextWhenAllocated = b.contextWhenAllocated;
        c.contextWhenSegmentAllocated = b.contextWhenSegmentAllocated;
        return c;
    }
}
