package io.gpumem.trace.analysis;

import io.gpumem.history.BlockState;

/**
 * One block of a segment at the analysed moment.
 *
 * @param address       device address of the block
 * @param size          bytes the block covers (the rounded size)
 * @param requestedSize the caller's unrounded request for an active block; may be stale or 0 for a free block
 * @param state         allocated, pending free or inactive: core's snapshot state, never {@code UNKNOWN} (readers reject
 *                      unknown state names with the file and block named before a block is built)
 */
public record StateBlock(long address, long size, long requestedSize, BlockState state) {
    public StateBlock {
        if (size <= 0) {
            throw new IllegalArgumentException("block at 0x" + Long.toHexString(address) + " has non-positive size " + size);
        }
        if (requestedSize < 0) {
            throw new IllegalArgumentException("block at 0x" + Long.toHexString(address) + " has negative requested size " + requestedSize);
        }
        if (state == null || state == BlockState.UNKNOWN) {
            throw new IllegalArgumentException("block at 0x" + Long.toHexString(address) + " has no known state");
        }
    }

    /** Bytes the caller asked for and the block does not use: rounding and whole-block takes (0 when free). */
    public long internalSlack() {
        return state == BlockState.ACTIVE_ALLOCATED ? Math.max(0, size - Math.min(requestedSize, size)) : 0;
    }
}
