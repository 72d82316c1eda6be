package io.gpumem.alloc;

import io.gpumem.stats.DeviceStats;

/**
 * PyTorch's {@code BlockPool}: the free blocks of one pool (small or large) ordered for best fit, the unmapped
 * blocks of its expandable segments ordered by address, and the pool's garbage-collection clock.
 *
 * <p>Invariant: {@link #blocks} holds exactly the free (not allocated, no events) mapped blocks of this pool;
 * {@link #unmapped} exactly its unmapped blocks.
 */
final class BlockPool {
    final boolean small;
    final SizeOrderedBlocks blocks = new SizeOrderedBlocks();
    final BlockTree unmapped = new BlockTree(BlockTree.BY_ADDRESS);
    /** {@code get_free_blocks_call_count}: the GC age clock. */
    long getFreeBlocksCallCount;

    BlockPool(boolean small) {
        this.small = small;
    }

    /** The {@link DeviceStats} type this pool's updates go to. */
    int statType() {
        return small ? DeviceStats.SMALL_POOL : DeviceStats.LARGE_POOL;
    }

    /** {@code insert_into_blocks}: adds a free block and stamps its GC age base. */
    void insertIntoBlocks(Block b) {
        b.gcCountBase = getFreeBlocksCallCount;
        blocks.insert(b);
    }

    String name() {
        return small ? "small" : "large";
    }
}
