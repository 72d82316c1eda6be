package io.gpumem.alloc;

import io.gpumem.history.Frame;
import java.util.Arrays;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * A contiguous address range inside a segment: PyTorch's {@code Block} (allocator.md §2.1), plus the links of the
 * intrusive ordered trees that hold it while it is free or unmapped.
 *
 * <p>A segment is the maximal chain of blocks linked by {@link #prev}/{@link #next}. A block is in at most one
 * ordered set at a time: free mapped blocks are in their pool's {@link SizeOrderedBlocks}, unmapped blocks
 * (expandable segments only) in the pool's address-ordered {@link BlockTree}; allocated blocks and blocks
 * waiting on events are in neither. The allocator recycles Block objects (see {@code AllocatorCore.newBlock}),
 * so {@link #reset} must clear every field.
 *
 * <p>The order key and the tree links live in the superclass {@link OrderedBlock}, which places them first in
 * the object: the JVM lays a superclass's fields out before a subclass's, so a tree descent, which reads a
 * node's key and then a child link, touches the first 52 bytes of each node instead of two ends of a
 * 120-byte object (the profile's cache misses on first touch, issue 13).
 */
final class Block extends OrderedBlock<Block> {
    /** Unrounded size of the last allocation; not reset on free (snapshots show it stale), 0 for new splits. */
    long requestedSize;

    BlockPool pool;
    boolean allocated;
    /** Meaningful for expandable segments only; always true for cudaMalloc'd segments. */
    boolean mapped = true;

    @Nullable
    Block prev;

    @Nullable
    Block next;
    /** Outstanding events recorded for this block on other streams. */
    int eventCount;
    /**
     * Streams recorded with record_stream since the allocation, in insertion order: the first
     * {@link #streamUseCount} entries. Starts as a shared empty array and keeps its capacity across recycling.
     */
    long[] streamUses = NO_STREAMS;

    int streamUseCount;
    /** Value of the pool's GC clock when the block was last inserted into the free tree. */
    long gcCountBase;
    /** The expandable segment this block lives in, or null for a cudaMalloc'd segment. */
    @Nullable
    ExpandableSegment expandable;
    /** Stack of the last allocation (null when none was captured). */
    @Nullable
    List<Frame> contextWhenAllocated;
    /** Stack of the segment's allocation, null when none was captured; kept by the segment's head block. */
    @Nullable
    List<Frame> contextWhenSegmentAllocated;

    /** Where the block sits in a {@link SizeOrderedBlocks} (valid while it is in one; kept afterwards as a hint for the next insert). */
    SizeOrderedBlocks.@Nullable Lane lane;

    int sizeClass;
    /** The slot an open {@link SlotSession} holds this block in; −1 when none holds it. */
    int sessionSlot = -1;

    private static final long[] NO_STREAMS = {};

    Block(long ptr, long size, long stream, BlockPool pool) {
        reset(ptr, size, stream, pool);
    }

    /** Makes this (recycled) block a new one: every field as the constructor leaves it. */
    void reset(long ptr, long size, long stream, BlockPool pool) {
        this.ptr = ptr;
        this.size = size;
        this.stream = stream;
        this.pool = pool;
        requestedSize = 0;
        allocated = false;
        mapped = true;
        prev = null;
        next = null;
        eventCount = 0;
        streamUseCount = 0;
        gcCountBase = 0;
        expandable = null;
        contextWhenAllocated = null;
        contextWhenSegmentAllocated = null;
        left = null;
        right = null;
        parent = null;
        container = null;
        lane = null;
        sizeClass = 0;
        sessionSlot = -1;
    }

    /** The expandable segment of a block known to live in one (an unmapped block, or one the caller checked). */
    ExpandableSegment expandableSegment() {
        ExpandableSegment es = expandable;
        if (es == null) {
            throw new IllegalStateException("not in an expandable segment: " + this);
        }
        return es;
    }

    boolean isSplit() {
        return prev != null || next != null;
    }

    boolean hasStreamUses() {
        return streamUseCount > 0;
    }

    /** Free for merging and for expandable growth: not allocated, no events, no stream uses. */
    boolean isAvailable() {
        return !allocated && eventCount == 0 && streamUseCount == 0;
    }

    void addStreamUse(long s) {
        for (int i = 0; i < streamUseCount; i++) {
            if (streamUses[i] == s) {
                return;
            }
        }
        if (streamUseCount == streamUses.length) {
            streamUses = Arrays.copyOf(streamUses, Math.max(2, streamUseCount * 2));
        }
        streamUses[streamUseCount++] = s;
    }

    @Override
    public String toString() {
        return "Block[0x" + Long.toHexString(ptr) + "+" + size + (allocated ? " allocated" : "")
                + (mapped ? "" : " unmapped") + " stream=" + stream + "]";
    }
}
