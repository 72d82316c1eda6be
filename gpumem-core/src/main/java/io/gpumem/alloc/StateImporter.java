package io.gpumem.alloc;

import static io.gpumem.alloc.DeviceStats.ACTIVE;
import static io.gpumem.alloc.DeviceStats.ACTIVE_BYTES;
import static io.gpumem.alloc.DeviceStats.ALLOCATED_BYTES;
import static io.gpumem.alloc.DeviceStats.ALLOCATION;
import static io.gpumem.alloc.DeviceStats.INACTIVE_SPLIT;
import static io.gpumem.alloc.DeviceStats.INACTIVE_SPLIT_BYTES;
import static io.gpumem.alloc.DeviceStats.REQUESTED_BYTES;
import static io.gpumem.alloc.DeviceStats.RESERVED_BYTES;
import static io.gpumem.alloc.DeviceStats.SEGMENT;

import io.gpumem.device.Device;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * Implements {@link AllocatorInternals#restoreSegment}: validates the block list completely, then takes the
 * memory from the device (undoing everything if the device fails or puts the segment elsewhere), then links the
 * blocks and raises the stats as the original allocations would have. Validation before any device call keeps
 * the "bad input changes nothing" rule.
 */
final class StateImporter {
    private StateImporter() {}

    static long restore(
            AllocatorCore core,
            long address,
            long totalSize,
            long stream,
            Pool kind,
            boolean expandable,
            List<RestoredBlock> blocks) {
        BlockPool pool = core.pool(kind);
        long page = SizeRules.expandablePageSize(kind);
        if (expandable && totalSize == 0) {
            totalSize = page * ExpandableSegment.defaultPageCount(core.device.totalMemory(), page);
        }
        validate(blocks, totalSize, expandable, page, address);

        long base;
        ExpandableSegment es = null;
        if (expandable) {
            es = ExpandableSegment.reserveAt(core.device, address, stream, pool, page, (int) (totalSize / page));
            mapRuns(es, blocks);
            base = es.base;
        } else {
            base = core.device.malloc(totalSize);
            if (base == Device.NULL) {
                throw new IllegalStateException("device has no room to restore a segment of " + totalSize + " bytes");
            }
            if (address != Device.NULL && base != address) {
                core.device.free(base);
                throw new IllegalArgumentException("device allocated 0x" + Long.toHexString(base)
                        + " instead of the restored segment address 0x" + Long.toHexString(address));
            }
        }
        long ptr = base;
        for (int i = 0; i < blocks.size(); i++) {
            if (blocks.get(i).kind() == RestoredBlock.Kind.ALLOCATED
                    && core.allocatedBlocks().get(ptr) != null) {
                undo(core, es, base);
                throw new IllegalArgumentException("restoreSegment: block " + i + " at 0x" + Long.toHexString(ptr)
                        + " is already allocated in this allocator");
            }
            ptr += blocks.get(i).size();
        }
        link(core, pool, es, base, totalSize, stream, blocks);
        return base;
    }

    /** Gives back what {@link #restore} took from the device. */
    private static void undo(AllocatorCore core, @Nullable ExpandableSegment es, long base) {
        if (es == null) {
            core.device.free(base);
            return;
        }
        for (int i = 0; i < es.coveredPages(); i++) {
            if (es.isPageMapped(i)) {
                // a short unmap always leaves its failure
                RuntimeException failure = es.unmapPages(i, i + 1) == i + 1 ? null : es.unmapFailure();
                if (failure != null) {
                    throw failure;
                }
            }
        }
        es.destroy();
    }

    /** How a validation message names block {@code i} (built only when one is thrown: a restore validates every block). */
    private static String where(int i, long offset) {
        return "restoreSegment: block " + i + " (offset " + offset + ")";
    }

    private static void validate(
            List<RestoredBlock> blocks, long totalSize, boolean expandable, long page, long address) {
        if (blocks == null || blocks.isEmpty()) {
            throw new IllegalArgumentException("restoreSegment: no blocks");
        }
        if (totalSize <= 0) {
            throw new IllegalArgumentException("restoreSegment: totalSize must be positive, got " + totalSize);
        }
        if (expandable && totalSize % page != 0) {
            throw new IllegalArgumentException("restoreSegment: expandable reservation of " + totalSize
                    + " bytes is not a multiple of the " + page + "-byte page");
        }
        long offset = 0;
        RestoredBlock.Kind previous = null;
        for (int i = 0; i < blocks.size(); i++) {
            RestoredBlock b = blocks.get(i);
            if (b.size() <= 0 || b.size() % SizeRules.MIN_BLOCK_SIZE != 0) {
                throw new IllegalArgumentException(
                        where(i, offset) + ": size " + b.size() + " is not a positive multiple of 512");
            }
            switch (b.kind()) {
                case ALLOCATED -> {
                    if (b.requestedSize() < 1 || b.requestedSize() > b.size()) {
                        throw new IllegalArgumentException(where(i, offset) + ": requested size " + b.requestedSize()
                                + " outside [1, " + b.size() + "]");
                    }
                }
                case FREE -> {
                    if (previous == RestoredBlock.Kind.FREE) {
                        throw new IllegalArgumentException(
                                where(i, offset) + ": two adjacent free blocks (they would be merged)");
                    }
                }
                case UNMAPPED -> {
                    if (!expandable) {
                        throw new IllegalArgumentException(
                                where(i, offset) + ": unmapped block in a non-expandable segment");
                    }
                    if (previous == RestoredBlock.Kind.UNMAPPED) {
                        throw new IllegalArgumentException(where(i, offset) + ": two adjacent unmapped blocks");
                    }
                    if (offset % page != 0 || (offset + b.size()) % page != 0) {
                        throw new IllegalArgumentException(
                                where(i, offset) + ": unmapped block not on " + page + "-byte page boundaries");
                    }
                }
            }
            previous = b.kind();
            offset += b.size();
        }
        if (offset != totalSize) {
            throw new IllegalArgumentException("restoreSegment: blocks add up to " + offset
                    + " bytes but the segment at 0x" + Long.toHexString(address) + " has " + totalSize);
        }
    }

    /** Maps every page not covered by an unmapped block; on failure unmaps what it mapped and frees the reservation. */
    private static void mapRuns(ExpandableSegment es, List<RestoredBlock> blocks) {
        try {
            long offset = 0;
            long runStart = -1;
            for (RestoredBlock b : blocks) {
                boolean mapped = b.kind() != RestoredBlock.Kind.UNMAPPED;
                if (mapped && runStart < 0) {
                    runStart = offset;
                }
                if (!mapped && runStart >= 0) {
                    mapOrFail(es, runStart, offset);
                    runStart = -1;
                }
                offset += b.size();
            }
            if (runStart >= 0) {
                mapOrFail(es, runStart, offset);
            }
        } catch (RuntimeException e) {
            try {
                for (int i = 0; i < es.coveredPages(); i++) {
                    if (es.isPageMapped(i)) {
                        if (es.unmapPages(i, i + 1) != i + 1) {
                            throw es.unmapFailure();
                        }
                    }
                }
                es.destroy();
            } catch (RuntimeException suppressed) {
                e.addSuppressed(suppressed);
            }
            throw e;
        }
    }

    private static void mapOrFail(ExpandableSegment es, long from, long to) {
        int begin = (int) (from / es.pageSize);
        int end = (int) ((to + es.pageSize - 1) / es.pageSize);
        if (!es.mapPages(begin, end)) {
            throw new IllegalStateException("device has no room to restore " + (to - from)
                    + " mapped bytes of the expandable segment at 0x" + Long.toHexString(es.base));
        }
    }

    private static void link(
            AllocatorCore core,
            BlockPool pool,
            @Nullable ExpandableSegment es,
            long base,
            long totalSize,
            long stream,
            List<RestoredBlock> blocks) {
        int type = pool.statType;
        long maxSplit = core.config.maxSplitSize();
        boolean split = blocks.size() > 1;
        long ptr = base;
        long mappedBytes = 0;
        Block prev = null;
        for (RestoredBlock rb : blocks) {
            Block b = core.newBlock(ptr, rb.size(), stream, pool);
            b.expandable = es;
            b.prev = prev;
            if (prev != null) {
                prev.next = b;
            }
            switch (rb.kind()) {
                case ALLOCATED -> {
                    b.allocated = true;
                    b.requestedSize = rb.requestedSize();
                    if (!core.allocatedBlocks().putIfAbsent(b.ptr, b)) {
                        throw new IllegalStateException("address already indexed: 0x" + Long.toHexString(b.ptr));
                    }
                    core.stats.increase(ALLOCATION, type, 1);
                    core.stats.increase(ALLOCATED_BYTES, type, b.size);
                    core.stats.increase(ACTIVE, type, 1);
                    core.stats.increase(ACTIVE_BYTES, type, b.size);
                    core.stats.increase(REQUESTED_BYTES, type, b.requestedSize);
                    if (b.size >= maxSplit) {
                        core.stats.updateOversizeAllocations(1);
                    }
                    mappedBytes += b.size;
                }
                case FREE -> {
                    b.requestedSize = rb.requestedSize();
                    mappedBytes += b.size;
                    if (es == null && split) {
                        core.stats.increase(INACTIVE_SPLIT, type, 1);
                        core.stats.increase(INACTIVE_SPLIT_BYTES, type, b.size);
                    }
                }
                case UNMAPPED -> b.mapped = false;
            }
            prev = b;
            ptr += rb.size();
        }
        // insert after linking, so tree keys are final
        for (Block b = firstOf(prev); b != null; b = b.next) {
            if (!b.mapped) {
                pool.unmapped.insert(b);
            } else if (!b.allocated) {
                pool.insertIntoBlocks(b);
            }
        }
        if (es == null) {
            core.totalAllocatedMemory += totalSize;
            core.stats.increase(SEGMENT, type, 1);
            core.stats.increase(RESERVED_BYTES, type, totalSize);
            if (totalSize >= maxSplit) {
                core.stats.updateOversizeSegments(1);
            }
        } else {
            core.expandableSegments.add(es);
            core.totalAllocatedMemory += mappedBytes;
            core.stats.increase(RESERVED_BYTES, type, mappedBytes);
        }
    }

    /** The head of the segment {@code b} is in, or null for no block. */
    private static @Nullable Block firstOf(@Nullable Block b) {
        while (b != null && b.prev != null) {
            b = b.prev;
        }
        return b;
    }
}
