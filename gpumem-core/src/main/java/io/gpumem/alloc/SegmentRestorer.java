package io.gpumem.alloc;

import java.util.List;

/**
 * A capability of allocators that can take over recorded segments with their blocks as they stood (a replay that
 * starts mid-trace keeps the recorded layout). Reached through an allocator's internals; allocators without it
 * start such a replay by allocating the live blocks as requests.
 */
public interface SegmentRestorer {

    /** Restores one segment; see {@link AllocatorInternals#restoreSegment} for the rules and failures. */
    long restoreSegment(
            long address, long totalSize, long streamId, Pool pool, boolean expandable, List<RestoredBlock> blocks);

    /** Whether the allocator itself uses expandable segments (else recorded expandable runs become classic segments). */
    boolean expandableSegments();
}
