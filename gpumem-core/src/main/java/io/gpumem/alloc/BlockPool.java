package io.gpumem.alloc;

/**
 * PyTorch's {@code BlockPool}: the free blocks of one pool (small or large) ordered for best fit, the unmapped
 * blocks of its expandable segments ordered by address, and the pool's garbage-collection clock.
 *
 * <p>Invariant: {@link #blocks} holds exactly the free (not allocated, no events) mapped blocks of this pool;
 * {@link #unmapped} exactly its unmapped blocks.
 */
final class BlockPool {
    final Pool kind;
    /** {@link DeviceStats}' index of this pool's stat type, cached for the hot path. */
    final int statType;

    final SizeOrderedBlocks blocks = new SizeOrderedBlocks();
    final BlockTree<Block> unmapped = new BlockTree<>(BlockTree.Order.BY_ADDRESS);
    /** {@code get_free_blocks_call_count}: the GC age clock. */
    long getFreeBlocksCallCount;

    BlockPool(Pool kind) {
        this.kind = kind;
        this.statType = DeviceStats.typeIndex(kind);
    }

    /** {@code insert_into_blocks}: adds a free block and stamps its GC age base. */
    void insertIntoBlocks(Block b) {
        b.gcCountBase = getFreeBlocksCallCount;
        blocks.insert(b);
    }
}
