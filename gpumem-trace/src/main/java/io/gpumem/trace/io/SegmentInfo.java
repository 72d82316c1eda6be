package io.gpumem.trace.io;

import io.gpumem.history.Frame;
import java.util.List;
import java.util.Map;

/**
 * One segment of a snapshot (allocator.md §10.3): a cudaMalloc'd range, or one contiguous mapped run of an
 * expandable segment. Fields absent from older formats are flagged off in {@code fields}
 * ({@link #REQUESTED_SIZE}, {@link #POOL_ID}, {@link #EXPANDABLE}); {@code frames} is {@code null} when absent.
 *
 * <p>Kept apart from gpumem-core's {@code io.gpumem.history.SegmentInfo} for the same reason as
 * {@link TraceEntry}: the file model also carries the pool id of private pools, key presence and unknown keys,
 * which the allocator's snapshot has no use for.
 *
 * @param segmentType "large" or "small"
 * @param poolId      {@code segment_pool_id}; (0, 0) is the default pool
 */
public record SegmentInfo(
        int device,
        long address,
        long totalSize,
        long allocatedSize,
        long activeSize,
        long requestedSize,
        long stream,
        String segmentType,
        PoolId poolId,
        boolean expandable,
        List<Frame> frames,
        List<BlockInfo> blocks,
        Map<String, Object> extra,
        int fields) {

    public static final int REQUESTED_SIZE = 1;
    public static final int POOL_ID = 2;
    public static final int EXPANDABLE = 4;

    public SegmentInfo {
        extra = extra == null ? Map.of() : extra;
        poolId = poolId == null ? PoolId.DEFAULT : poolId;
    }

    /** Whether the segment belongs to the small pool (2 MiB segments, requests of at most 1 MiB). */
    public boolean isSmall() {
        return "small".equals(segmentType);
    }

    public boolean has(int field) {
        return (fields & field) != 0;
    }

    public long end() {
        return address + totalSize;
    }
}
