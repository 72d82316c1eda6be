package io.gpumem.history;

import io.gpumem.alloc.Pool;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * One segment of a snapshot (allocator.md §10.3): a cudaMalloc'd range, or one contiguous mapped run of an
 * expandable segment. The one segment model: the allocator's snapshot, a snapshot file's segments, the state an
 * analysis looks at and the state a trace window starts from are all lists of these.
 *
 * <p>A file's segment also keeps, in {@link #keys}, which optional keys it carried ({@link #REQUESTED_SIZE},
 * {@link #POOL_ID}, {@link #EXPANDABLE}), its {@code segment_type} when spelled other than {@code small} or
 * {@code large}, and unknown keys. Segments of the allocator, an analysis or a window start have every key.
 * A file's totals are as recorded, and may disagree with its blocks (see gpumem-trace's
 * {@code SnapshotConsistency}); segments built here with {@link #ofBlocks} derive them from the blocks.
 *
 * @param device        device index
 * @param address       first byte
 * @param totalSize     size of the segment (the sum of its block sizes in a consistent snapshot)
 * @param allocatedSize sum of allocated block sizes
 * @param activeSize    sum of active block sizes (allocated or waiting on events)
 * @param requestedSize sum of requested sizes over active blocks
 * @param stream        allocation stream
 * @param pool          the pool the segment belongs to (small for a file's {@code segment_type} "small")
 * @param expandable    whether it is (a mapped run of) an expandable segment
 * @param frames        stack from when the segment was allocated or first mapped; empty when none, {@code null}
 *                      when a file has no {@code frames} key
 * @param blocks        blocks in address order
 * @param poolId        {@code segment_pool_id}: {@link PoolId#DEFAULT} (also for {@code null}), or a private pool's id
 * @param keys          which keys a file had for the segment, beyond these values; {@code null}: every key
 */
public record SegmentInfo(
        int device,
        long address,
        long totalSize,
        long allocatedSize,
        long activeSize,
        long requestedSize,
        long stream,
        Pool pool,
        boolean expandable,
        @Nullable List<Frame> frames,
        List<BlockInfo> blocks,
        PoolId poolId,
        FileKeys keys)
        implements FileRecord {

    public static final int REQUESTED_SIZE = 1;
    public static final int POOL_ID = 2;
    public static final int EXPANDABLE = 4;
    /** The file's segment had {@code frames: None} ({@code frames} is then null, as when the key is absent). */
    public static final int FRAMES_NONE = 8;

    private static final FileKeys PLAIN = FileKeys.of(REQUESTED_SIZE | POOL_ID | EXPANDABLE);

    public SegmentInfo {
        if (poolId == null) {
            poolId = PoolId.DEFAULT;
        }
        if (keys == null) {
            keys = PLAIN;
        }
    }

    /** A segment of the default pool whose totals are its blocks' (no stack; blocks in address order). */
    public static SegmentInfo ofBlocks(
            int device, long address, long stream, Pool pool, boolean expandable, List<BlockInfo> blocks) {
        return ofBlocks(device, address, stream, pool, expandable, List.of(), blocks);
    }

    /**
     * A segment of the default pool with every key (as gpumem's allocators report one), its totals its blocks':
     * size the sum of their sizes, allocated, active and requested bytes those of the allocated and active ones.
     *
     * @param frames stack from when the segment was allocated or first mapped (empty when none)
     * @param blocks blocks in address order, tiling the segment
     */
    public static SegmentInfo ofBlocks(
            int device,
            long address,
            long stream,
            Pool pool,
            boolean expandable,
            List<Frame> frames,
            List<BlockInfo> blocks) {
        long total = 0;
        long allocated = 0;
        long active = 0;
        long requested = 0;
        for (BlockInfo b : blocks) {
            total += b.size();
            if (b.state().isActive()) {
                active += b.size();
                requested += b.requestedSize();
                if (b.isAllocated()) {
                    allocated += b.size();
                }
            }
        }
        return new SegmentInfo(
                device,
                address,
                total,
                allocated,
                active,
                requested,
                stream,
                pool,
                expandable,
                frames,
                List.copyOf(blocks),
                PoolId.DEFAULT,
                PLAIN);
    }

    /** The same segment on another device. */
    public SegmentInfo onDevice(int index) {
        return index == device
                ? this
                : new SegmentInfo(
                        index,
                        address,
                        totalSize,
                        allocatedSize,
                        activeSize,
                        requestedSize,
                        stream,
                        pool,
                        expandable,
                        frames,
                        blocks,
                        poolId,
                        keys);
    }

    /** The snapshot's {@code segment_type}: {@code "small"} or {@code "large"}, or as a file spelled it. */
    public String segmentType() {
        return keys.spelled() != null ? keys.spelled() : pool.segmentType();
    }

    /** Whether the segment belongs to the small pool (2 MiB segments, requests of at most 1 MiB). */
    public boolean isSmall() {
        return pool == Pool.SMALL;
    }

    /** One past the last byte. */
    public long end() {
        return address + totalSize;
    }

    /** Bytes in blocks of the given state. */
    public long bytesIn(BlockState state) {
        long total = 0;
        for (BlockInfo b : blocks) {
            if (b.state() == state) {
                total += b.size();
            }
        }
        return total;
    }

    /** Whether every block is inactive (the whole segment is cached and, unless expandable, releasable as is). */
    public boolean isFullyFree() {
        for (BlockInfo b : blocks) {
            if (b.state() != BlockState.INACTIVE) {
                return false;
            }
        }
        return true;
    }
}
