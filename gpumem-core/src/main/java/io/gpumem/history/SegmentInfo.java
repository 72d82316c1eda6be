package io.gpumem.history;

import io.gpumem.alloc.Pool;

import java.util.List;

/**
 * One segment of a snapshot (allocator.md §10.3). For expandable segments this is one contiguous mapped run.
 *
 * @param device        device index
 * @param address       first byte
 * @param totalSize     sum of block sizes
 * @param allocatedSize sum of allocated block sizes
 * @param activeSize    sum of active block sizes (allocated or waiting on events)
 * @param requestedSize sum of requested sizes over active blocks
 * @param stream        allocation stream
 * @param pool          the pool the segment belongs to
 * @param expandable    whether it is (a mapped run of) an expandable segment
 * @param frames        stack from when the segment was allocated or first mapped; empty when none
 * @param blocks        blocks in address order
 */
public record SegmentInfo(int device, long address, long totalSize, long allocatedSize, long activeSize,
                          long requestedSize, long stream, Pool pool, boolean expandable,
                          List<Frame> frames, List<BlockInfo> blocks) {

    /** The snapshot's {@code segment_type}: {@code "small"} or {@code "large"}. */
    public String segmentType() {
        return pool.segmentType();
    }
}
