package io.gpumem.history;

import java.util.List;

/**
 * One block of a snapshot segment (allocator.md §10.4).
 *
 * @param address       block start
 * @param size          block size
 * @param requestedSize the unrounded size of its last allocation; stale for inactive blocks, 0 for blocks that
 *                      were never allocated
 * @param state         allocation state
 * @param frames        stack of the last allocation, innermost first; empty when none
 */
public record BlockInfo(long address, long size, long requestedSize, BlockState state, List<Frame> frames) {
}
