package io.gpumem.alloc;

import static io.gpumem.alloc.DeviceStats.ALLOCATED_BYTES;
import static io.gpumem.alloc.DeviceStats.INACTIVE_SPLIT;
import static io.gpumem.alloc.DeviceStats.INACTIVE_SPLIT_BYTES;
import static io.gpumem.alloc.DeviceStats.RESERVED_BYTES;
import static io.gpumem.alloc.DeviceStats.SEGMENT;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.device.Device;
import io.gpumem.events.AllocatorEvents;
import io.gpumem.history.Frame;
import io.gpumem.history.HistoryOptions;
import io.gpumem.history.TraceAction;
import io.gpumem.oom.OomReport;
import io.gpumem.oom.OutOfMemoryException;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * The algorithms of PyTorch's {@code DeviceCachingAllocator} (2.5 era; allocator.md §1–§6), on the state of one
 * device. Every method assumes the caller ({@link CachingAllocator}) holds the allocator lock.
 *
 * <h2>Malloc, in PyTorch's order</h2>
 * process_events → round_size / pool / alloc_size → best fit ({@link #getFreeBlock}) → [GC if a fraction and
 * threshold are set] → {@link #allocBlock} → release_available_cached_blocks + alloc → release_cached_blocks
 * (empty cache) + alloc counted as a retry → OOM. Then should_split and {@link #allocFoundBlock} carve the
 * low-address part.
 *
 * <h2>Free</h2>
 * {@link #free} is {@code free_requested} (allocated stats drop; with recorded streams, events are queued and
 * the block stays active); {@link #freeBlock} is {@code free_completed} (merge with free neighbours, back into
 * the pool, active/requested stats drop).
 *
 * <h2>Invariants (checked by {@link InvariantChecker})</h2>
 * Blocks tile each segment; no two neighbouring free blocks with equal {@code mapped} exist (they are merged);
 * each pool's size-ordered set holds exactly its free mapped blocks and its address tree its unmapped blocks; every
 * stat equals its recomputation from the block graph; reserved = sum of cudaMalloc'd segments + mapped pages
 * = {@link #totalAllocatedMemory}.
 *
 * <p>Version points follow PyTorch 2.5: GC and release_available skip expandable blocks (PR #134338); the oversize
 * slack is {@code max_non_split_rounding} (2.6's key; its 20 MiB default is 2.5's constant). The few questions
 * PyTorch's sources leave open are answered as allocator.md §11 lists.
 */
final class AllocatorCore {
    /** Requests of this size or more fail at once, as PyTorch's do (its size arithmetic would overflow). */
    static final long ONE_EXABYTE = 1L << 60;

    final Device device;
    /** Set through {@link #setConfig} only, which keeps the derived fields in step. */
    volatile AllocatorConfig config;
    /** Whether the config has any power-of-two divisions (else round_size is plain 512-byte rounding). */
    private boolean roundupActive;
    /**
     * Derived from {@link #config} by {@link #setConfig} (always under the allocator lock), so the hot path reads
     * plain fields instead of chasing the volatile config and calling into the device.
     */
    private long maxSplitSize;

    private long maxNonSplitRounding;
    private boolean expandableOn;
    private boolean gcActive;
    final DeviceStats stats;
    /** {@code max_split_size} as memory_stats reports it: fixed when the allocator is created. */
    final long maxSplitSizeAtCreation;

    final BlockPool smallBlocks = new BlockPool(Pool.SMALL);
    final BlockPool largeBlocks = new BlockPool(Pool.LARGE);
    /**
     * {@code allocated_blocks}: every live block by address, except, while a {@link SlotSession} is open, the blocks
     * that session holds by slot (until it keeps the table, {@link SlotSession#keepTable}). Read it through
     * {@link #allocatedBlocks()}, which makes it whole first.
     */
    private final AddressTable<Block> allocatedBlocks;
    /** The slot session open on this core, if any (set and cleared under the lock the session holds). */
    @Nullable
    SlotSession session;
    /** Set by {@code close()} under the lock; read under the lock by the operations that use the device. */
    boolean closed;

    final StreamEvents events = new StreamEvents();
    final List<ExpandableSegment> expandableSegments = new ArrayList<>();
    final TraceRecorder trace = new TraceRecorder();
    /** Every cudaMalloc'd or mapped byte ({@code total_allocated_memory}). */
    long totalAllocatedMemory;

    boolean setFraction;
    long allowedMemoryMaximum;
    /** Whether accumulated stats were ever reset (then current ≠ allocated − freed is expected). */
    boolean accumulatedReset;

    /** Recycled Block objects, so that splitting and merging allocate nothing in steady state. */
    private @Nullable Block spareBlocks;

    private int spareCount;
    private static final int MAX_SPARE = 4096;

    AllocatorCore(Device device, AllocatorConfig config) {
        this(device, config, true);
    }

    /** A new core; without {@code counted} it keeps no statistics ({@link DeviceStats#uncountedCopy}). */
    AllocatorCore(Device device, AllocatorConfig config, boolean counted) {
        this.device = device;
        setConfig(config);
        this.maxSplitSizeAtCreation = config.maxSplitSizeReported();
        this.stats = counted ? new DeviceStats() : new DeviceStats().uncountedCopy();
        this.allocatedBlocks = AddressTable.forObjects();
    }

    /**
     * A copy of {@code from}'s state on {@code device} (a copy of its device): see {@link StateCopy}. Without
     * {@code counted} the copy keeps no statistics ({@link DeviceStats#uncountedCopy}); a copy of an uncounted core
     * is uncounted either way.
     */
    AllocatorCore(AllocatorCore from, Device device, boolean counted) {
        this.device = device;
        setConfig(from.config);
        this.maxSplitSizeAtCreation = from.maxSplitSizeAtCreation;
        this.stats = counted ? from.stats.copy() : from.stats.uncountedCopy();
        this.allocatedBlocks = AddressTable.forObjects(from.allocatedBlocks().size());
        this.totalAllocatedMemory = from.totalAllocatedMemory;
        this.setFraction = from.setFraction;
        this.allowedMemoryMaximum = from.allowedMemoryMaximum;
        this.accumulatedReset = from.accumulatedReset;
        StateCopy.copyInto(from, this);
    }

    /** Refuses an operation that uses the device after {@code close()}. */
    void ensureOpen() {
        if (closed) {
            throw new IllegalStateException("the allocator is closed");
        }
    }

    /** The out-of-memory error of a request of {@link #ONE_EXABYTE} or more, which touches nothing. */
    OutOfMemoryException exabyteOom(long size) {
        return new OutOfMemoryException(oomReport(size, 0, 0, device.freeMemory(), List.of(), true));
    }

    /** {@code allocated_blocks}, whole: an open slot session's blocks are put in first. */
    AddressTable<Block> allocatedBlocks() {
        SlotSession open = session;
        if (open != null) {
            open.keepTable();
        }
        return allocatedBlocks;
    }

    /**
     * {@code allocated_blocks} as it stands, without an open session's blocks: for that session, and for the
     * allocator's own malloc, free and recordStream, which refuse while a session is open (so it is whole for them).
     */
    AddressTable<Block> allocatedBlocksBesideSession() {
        return allocatedBlocks;
    }

    void setConfig(AllocatorConfig config) {
        boolean active = false;
        for (int d : config.roundupPower2DivisionsTable()) {
            active |= d > 1;
        }
        this.roundupActive = active;
        this.maxSplitSize = config.maxSplitSize();
        this.maxNonSplitRounding = config.maxNonSplitRounding();
        this.expandableOn = expandableInEffect(config);
        this.gcActive = config.garbageCollectionThreshold() > 0.0;
        this.config = config;
    }

    // ---------------------------------------------------------------- sizes (allocator.md §1, rules in SizeRules)

    BlockPool poolFor(long rounded) {
        return SizeRules.poolFor(rounded) == Pool.SMALL ? smallBlocks : largeBlocks;
    }

    BlockPool pool(Pool pool) {
        return pool == Pool.SMALL ? smallBlocks : largeBlocks;
    }

    /** The expandable flag as the allocator obeys it: devices without virtual memory ignore it (2.2+). */
    boolean expandableEnabled() {
        return expandableOn;
    }

    /**
     * Whether {@code config}'s expandable flag is in effect on this core's device: devices without virtual memory
     * ignore it (2.2+). A fixed capability of the device, so it needs no lock: {@link #setConfig} folds it into the
     * hot path's field, and the start-state loader asks it through {@link AllocatorInternals#expandableSegments}.
     */
    boolean expandableInEffect(AllocatorConfig config) {
        return config.expandableSegments() && device.supportsVirtualMemory();
    }

    // ---------------------------------------------------------------- block objects

    Block newBlock(long ptr, long size, long stream, BlockPool pool) {
        Block b = spareBlocks;
        if (b == null) {
            return new Block(ptr, size, stream, pool);
        }
        spareBlocks = b.next;
        spareCount--;
        b.reset(ptr, size, stream, pool);
        return b;
    }

    private void recycle(Block b) {
        if (spareCount < MAX_SPARE) {
            // newBlock resets every field; only drop what could keep other objects alive
            b.contextWhenAllocated = null;
            b.contextWhenSegmentAllocated = null;
            b.prev = null;
            b.next = spareBlocks;
            spareBlocks = b;
            spareCount++;
        }
    }

    // ---------------------------------------------------------------- malloc (allocator.md §3)

    Block malloc(long origSize, long stream) {
        List<Frame> context = trace.maybeGatherContext(HistoryOptions.Context.STATE);
        processEvents(context);
        long size = roundupActive ? SizeRules.roundSize(origSize, config) : SizeRules.roundToMinBlock(origSize);
        BlockPool pool = poolFor(size);
        long allocSize = SizeRules.allocationSize(size);

        Block block = getFreeBlock(pool, stream, size);
        if (block == null) {
            if (setFraction && gcActive) {
                garbageCollectCachedBlocks(context);
            }
            block = allocBlock(pool, stream, size, allocSize, false, context);
            if (block == null && releaseAvailableCachedBlocks(pool, stream, size, context)) {
                block = allocBlock(pool, stream, size, allocSize, false, context);
            }
            if (block == null && releaseCachedBlocks(context)) {
                block = allocBlock(pool, stream, size, allocSize, true, context);
            }
        }
        if (block == null) {
            throw outOfMemory(origSize, size, allocSize, stream, context);
        }
        boolean split = shouldSplit(block, size);
        return allocFoundBlock(block, pool, size, origSize, context, split);
    }

    /** {@code get_free_block} (allocator.md §2.2): best fit on the request's stream, with the expandable walk and the oversize rules. */
    private @Nullable Block getFreeBlock(BlockPool pool, long stream, long size) {
        if (setFraction && gcActive) {
            pool.getFreeBlocksCallCount++;
        }
        Block b = bestFreeBlock(pool, stream, size);
        if (b != null) {
            pool.blocks.remove(b);
        }
        return b;
    }

    /**
     * A {@link #malloc} of {@code origSize} on {@code stream} followed at once by the {@link #free} of its block, taken
     * as one step where that pair is known to leave this core exactly as it found it; false (nothing changed) where
     * the caller must make the two calls.
     *
     * <p>Why the pair changes nothing when the cache serves it: {@code get_free_block} takes the best-fit block,
     * {@code alloc_found_block} carves the request from its low end, and {@code free_block} merges the carved block
     * with the remainder again (the block's neighbours were not free, or they would have been merged with it
     * before); without a split the block is simply handed out and back. No device call is made, so the capacity
     * plays no part. What the pair does leave behind is written here: the request as the free block's requested size
     * (the merged block is the carved one, which keeps it) and the pool's clock as its age. Not taken, because the
     * pair would leave a mark: where statistics are kept (counts and peaks move), where history or a tracker records
     * entries, where the garbage collector's clock ticks on every lookup, and where stream events are pending (a
     * malloc processes them first). The treap priorities the full pair would have drawn are not drawn: they shape the
     * trees, never their order.
     */
    boolean tryMallocFreedAtOnce(long origSize, long stream) {
        if (stats.counting() || trace.recordsEntries() || (setFraction && gcActive) || !events.isEmpty()) {
            return false;
        }
        long size = roundupActive ? SizeRules.roundSize(origSize, config) : SizeRules.roundToMinBlock(origSize);
        BlockPool pool = poolFor(size);
        Block b = bestFreeBlock(pool, stream, size);
        if (b == null) {
            return false;
        }
        b.requestedSize = origSize;
        b.gcCountBase = pool.getFreeBlocksCallCount;
        return true;
    }

    /**
     * The block {@code get_free_block} would take for a request of {@code size} on {@code stream}, left in its tree.
     */
    private @Nullable Block bestFreeBlock(BlockPool pool, long stream, long size) {
        Block b = pool.blocks.ceiling(stream, size, 0);
        if (b == null || b.stream != stream) {
            return null;
        }
        if (b.expandable != null) {
            if (expandableEnabled()) {
                // best fit by the size a block can grow to: prefer a later block of adequate size over the block
                // in front of a big unmapped tail
                SizeOrderedBlocks free = pool.blocks;
                Block next = free.next(b);
                while (b.expandable != null
                        && next != null
                        && next.stream == stream
                        && expandableSize(next) < expandableSize(b)) {
                    b = next;
                    next = free.next(next);
                }
            } else {
                // expandable segments were turned off: only non-expandable blocks may serve new requests
                do {
                    b = pool.blocks.next(b);
                } while (b != null && b.expandable != null && b.stream == stream);
                if (b == null || b.stream != stream) {
                    return null;
                }
            }
        }
        if (SizeRules.rejectsCachedBlock(size, b.size, maxSplitSize, maxNonSplitRounding)) {
            return null;
        }
        return b;
    }

    private static long expandableSize(Block b) {
        return b.size + (b.next != null && !b.next.mapped ? b.next.size : 0);
    }

    /** {@code should_split} (allocator.md §2.3). */
    boolean shouldSplit(Block block, long size) {
        return SizeRules.shouldSplit(block.size - size, size, block.pool.kind, expandableEnabled(), maxSplitSize);
    }

    /**
     * {@code alloc_block} (allocator.md §3 step 4.2): the fraction check, then expandable growth or a new cudaMalloc'd
     * segment. Returns the new block (not in any tree) or null on out-of-memory; other device errors propagate.
     */
    private @Nullable Block allocBlock(
            BlockPool pool, long stream, long size, long allocSize, boolean isRetry, @Nullable List<Frame> context) {
        if (isRetry) {
            stats.countAllocRetry();
            AllocatorEvents.retry(device.index(), size, allocSize, stream);
        }
        if (setFraction && totalAllocatedMemory + allocSize > allowedMemoryMaximum) {
            return null;
        }
        if (expandableEnabled()) {
            return tryAllocateExpandableBlock(stream, pool, size, context);
        }
        long ptr = device.malloc(allocSize);
        if (ptr == Device.NULL) {
            return null;
        }
        totalAllocatedMemory += allocSize;
        Block b = newBlock(ptr, allocSize, stream, pool);
        int type = pool.statType;
        stats.increase(SEGMENT, type, 1);
        stats.increase(RESERVED_BYTES, type, allocSize);
        if (SizeRules.isOversize(allocSize, maxSplitSize)) {
            stats.updateOversizeSegments(1);
        }
        stats.countDeviceAlloc();
        AllocatorEvents.segmentAlloc(device.index(), ptr, allocSize, stream, false);
        trace.record(TraceAction.SEGMENT_ALLOC, ptr, allocSize, stream, context);
        b.contextWhenSegmentAllocated = context;
        return b;
    }

    /** {@code alloc_found_block} (allocator.md §2.4): carve the low part when splitting, then account the allocation. */
    private Block allocFoundBlock(
            Block block, BlockPool pool, long size, long origSize, @Nullable List<Frame> context, boolean split) {
        int type = pool.statType;
        boolean alreadySplit = block.isSplit();
        if (split) {
            Block remaining = block;
            block = newBlock(remaining.ptr, size, remaining.stream, pool);
            block.lane = remaining.lane;
            block.expandable = remaining.expandable;
            block.prev = remaining.prev;
            if (block.prev != null) {
                block.prev.next = block;
            } else {
                // keep the segment's stack on the head block, where snapshots read it
                block.contextWhenSegmentAllocated = remaining.contextWhenSegmentAllocated;
                remaining.contextWhenSegmentAllocated = null;
            }
            block.next = remaining;
            remaining.prev = block;
            remaining.ptr += size;
            remaining.size -= size;
            pool.insertIntoBlocks(remaining);
            if (block.expandable == null) {
                if (alreadySplit) {
                    stats.decrease(INACTIVE_SPLIT_BYTES, type, block.size);
                } else {
                    stats.increase(INACTIVE_SPLIT_BYTES, type, remaining.size);
                    stats.increase(INACTIVE_SPLIT, type, 1);
                }
            }
        } else if (alreadySplit && block.expandable == null) {
            stats.decrease(INACTIVE_SPLIT_BYTES, type, block.size);
            stats.decrease(INACTIVE_SPLIT, type, 1);
        }
        block.allocated = true;
        block.requestedSize = origSize;
        block.contextWhenAllocated = context;
        trace.record(TraceAction.ALLOC, block.ptr, origSize, block.stream, context);
        stats.countAllocation(type, block.size, origSize);
        if (SizeRules.isOversize(block.size, maxSplitSize)) {
            stats.updateOversizeAllocations(1);
        }
        return block;
    }

    private OutOfMemoryException outOfMemory(
            long origSize, long size, long allocSize, long stream, @Nullable List<Frame> context) {
        long deviceFree = device.freeMemory();
        trace.record(TraceAction.OOM, 0, size, stream, context, deviceFree);
        stats.countOom();
        AllocatorEvents.outOfMemory(
                device.index(), origSize, size, stream, deviceFree, allocatedBytesNow(), reservedBytesNow());
        return new OutOfMemoryException(oomReport(origSize, size, allocSize, deviceFree, largestFreeBlocks(), false));
    }

    /** The figures of an out-of-memory report as this core stands: the one place that assembles them. */
    private OomReport oomReport(
            long origSize,
            long size,
            long allocSize,
            long deviceFree,
            List<OomReport.LargestFree> largestFree,
            boolean moreThanOneExabyte) {
        return new OomReport(
                origSize,
                size,
                allocSize,
                device.index(),
                device.totalMemory(),
                deviceFree,
                setFraction ? allowedMemoryMaximum : -1,
                allocatedBytesNow(),
                reservedBytesNow(),
                largestFree,
                moreThanOneExabyte);
    }

    /**
     * {@code allocated_bytes.all.current}, for an out-of-memory report; an uncounted core sums its allocated blocks
     * (the stat is the sum of their sizes, once a free is requested the block leaves the table).
     */
    long allocatedBytesNow() {
        if (stats.counting()) {
            return stats.current(ALLOCATED_BYTES, DeviceStats.ALL);
        }
        long[] sum = {0};
        allocatedBlocks().forEach(b -> sum[0] += b.size);
        return sum[0];
    }

    /** {@code reserved_bytes.all.current}, for an out-of-memory report: always {@link #totalAllocatedMemory}. */
    long reservedBytesNow() {
        return stats.counting() ? stats.current(RESERVED_BYTES, DeviceStats.ALL) : totalAllocatedMemory;
    }

    /** Largest free block per (pool, stream): the last block of each stream's run in the size order. */
    List<OomReport.LargestFree> largestFreeBlocks() {
        List<OomReport.LargestFree> out = new ArrayList<>();
        for (BlockPool pool : new BlockPool[] {largeBlocks, smallBlocks}) {
            Block prev = null;
            for (Block b = pool.blocks.first(); b != null; b = pool.blocks.next(b)) {
                if (prev != null && prev.stream != b.stream) {
                    out.add(new OomReport.LargestFree(pool.kind, prev.stream, prev.size));
                }
                prev = b;
            }
            if (prev != null) {
                out.add(new OomReport.LargestFree(pool.kind, prev.stream, prev.size));
            }
        }
        return out;
    }

    // ---------------------------------------------------------------- free (allocator.md §4.1)

    /** {@code free}: the user's free request. The block has already been removed from {@link #allocatedBlocks}. */
    void free(Block block) {
        List<Frame> context = trace.maybeGatherContext(HistoryOptions.Context.ALL);
        block.allocated = false;
        int type = block.pool.statType;
        stats.countFreeRequested(type, block.size);
        trace.record(
                TraceAction.FREE_REQUESTED,
                block.ptr,
                block.requestedSize,
                block.stream,
                context != null ? context : block.contextWhenAllocated);
        if (SizeRules.isOversize(block.size, maxSplitSize)) {
            stats.updateOversizeAllocations(-1);
        }
        if (block.hasStreamUses()) {
            insertEvents(block, context);
        } else {
            freeBlock(block, context);
        }
    }

    /**
     * {@code insert_events}: one event per recorded stream; the block stays active until all complete. If the
     * device fails to create or record an event, the events already queued stand (the block waits on them, or
     * is freed at once when there are none) and the failure propagates.
     */
    private void insertEvents(Block block, @Nullable List<Frame> context) {
        int n = block.streamUseCount;
        block.streamUseCount = 0;
        for (int i = 0; i < n; i++) {
            long s = block.streamUses[i];
            long event = events.takeSpare();
            try {
                if (event == 0) {
                    event = device.createEvent();
                }
                device.recordEvent(event, s);
            } catch (RuntimeException e) {
                if (event != 0) {
                    events.giveBack(event);
                }
                if (block.eventCount == 0) {
                    freeBlock(block, context);
                }
                throw e;
            }
            block.eventCount++;
            events.add(s, event, block);
        }
    }

    /** {@code free_block} (free_completed): merge, return to the pool, update active/requested/inactive_split. */
    void freeBlock(Block block, @Nullable List<Frame> context) {
        trace.record(
                TraceAction.FREE_COMPLETED,
                block.ptr,
                block.requestedSize,
                block.stream,
                context != null ? context : block.contextWhenAllocated);
        block.contextWhenAllocated = null;
        long originalSize = block.size;
        long requested = block.requestedSize;
        BlockPool pool = block.pool;
        long netBlocks = 0;
        long netBytes = 0;
        Block prev = block.prev;
        Block next = block.next;
        long subsumed = tryMergeBlocks(block, prev, pool);
        if (subsumed > 0) {
            netBlocks--;
            netBytes -= subsumed;
        }
        subsumed = tryMergeBlocks(block, next, pool);
        if (subsumed > 0) {
            netBlocks--;
            netBytes -= subsumed;
        }
        pool.insertIntoBlocks(block);
        if (block.isSplit()) {
            netBlocks++;
            netBytes += block.size;
        }
        int type = pool.statType;
        if (block.expandable == null) {
            stats.update(INACTIVE_SPLIT, type, netBlocks);
            stats.update(INACTIVE_SPLIT_BYTES, type, netBytes);
        }
        stats.countFreeCompleted(type, originalSize, requested);
    }

    /** {@code try_merge_blocks} (allocator.md §2.5): absorbs {@code src} into {@code dst}; {@code dst} is in no tree. */
    long tryMergeBlocks(Block dst, @Nullable Block src, BlockPool pool) {
        if (src == null || src.allocated || src.eventCount > 0 || src.hasStreamUses() || dst.mapped != src.mapped) {
            return 0;
        }
        if (src.mapped) {
            pool.blocks.remove(src);
        } else {
            pool.unmapped.remove(src);
        }
        if (dst.prev == src) {
            dst.ptr = src.ptr;
            dst.prev = src.prev;
            if (dst.prev != null) {
                dst.prev.next = dst;
            }
            dst.contextWhenSegmentAllocated = src.contextWhenSegmentAllocated;
        } else {
            dst.next = src.next;
            if (dst.next != null) {
                dst.next.prev = dst;
            }
        }
        long subsumed = src.size;
        dst.size += subsumed;
        recycle(src);
        return subsumed;
    }

    // ---------------------------------------------------------------- events

    /** {@code process_events}: per stream, complete events in FIFO order up to the first one not yet done. */
    void processEvents(@Nullable List<Frame> context) {
        if (events.isEmpty()) {
            return;
        }
        Iterator<Map.Entry<Long, ArrayDeque<StreamEvents.Pending>>> it = events.streams();
        while (it.hasNext()) {
            ArrayDeque<StreamEvents.Pending> q = it.next().getValue();
            while (!q.isEmpty()) {
                if (!device.queryEvent(q.peekFirst().event())) {
                    break;
                }
                completeFirstEvent(q, context);
            }
            if (q.isEmpty()) {
                it.remove();
            }
        }
    }

    /** {@code synchronize_and_free_events}: waits for every outstanding event and frees its blocks. */
    void synchronizeAndFreeEvents(@Nullable List<Frame> context) {
        stats.countSyncAllStreams();
        Iterator<Map.Entry<Long, ArrayDeque<StreamEvents.Pending>>> it = events.streams();
        while (it.hasNext()) {
            ArrayDeque<StreamEvents.Pending> q = it.next().getValue();
            while (!q.isEmpty()) {
                device.synchronizeEvent(q.peekFirst().event());
                completeFirstEvent(q, context);
            }
            it.remove();
        }
    }

    /**
     * Takes the stream's oldest event, which has completed, off its queue and back to the pool; the block it
     * guarded is freed once its last outstanding event is done.
     */
    private void completeFirstEvent(ArrayDeque<StreamEvents.Pending> q, @Nullable List<Frame> context) {
        StreamEvents.Pending p = q.pollFirst();
        events.removed(1);
        events.giveBack(p.event());
        Block block = p.block();
        if (--block.eventCount == 0) {
            freeBlock(block, context);
        }
    }

    // ---------------------------------------------------------------- releasing memory (allocator.md §4.2–§4.4)

    /** {@code release_cached_blocks}: empty_cache() and the last OOM retry. */
    boolean releaseCachedBlocks(@Nullable List<Frame> context) {
        synchronizeAndFreeEvents(context);
        releaseBlocks(largeBlocks, context);
        releaseBlocks(smallBlocks, context);
        return true;
    }

    /** {@code release_blocks}: cudaFree whole free segments in pool order; unmap free pages of expandable ones. */
    private void releaseBlocks(BlockPool pool, @Nullable List<Frame> context) {
        List<Block> toUnmap = null;
        Block b = pool.blocks.first();
        while (b != null) {
            Block next = pool.blocks.next(b);
            if (b.expandable != null) {
                if (toUnmap == null) {
                    toUnmap = new ArrayList<>();
                }
                toUnmap.add(b);
            } else if (!b.isSplit()) {
                releaseBlock(b, context);
            }
            b = next;
        }
        if (toUnmap != null) {
            for (Block u : toUnmap) {
                unmapBlock(u, context);
                if (!u.isSplit() && !u.mapped) {
                    releaseExpandableSegment(u);
                }
            }
        }
    }

    /**
     * Gives back the address ranges of expandable segments that hold no page (their one block unmapped and whole):
     * reserved for a growth whose first map failed, they are kept by {@code release_blocks} as PyTorch keeps them,
     * since their block sits in the unmapped tree, which it never visits (allocator.md §5.4), and later requests on
     * that stream map pages into them. Only {@link CachingAllocator#close()} calls this: retiring the allocator is
     * where PyTorch's process would end and the driver would free its reservations. No trace entry, no stat.
     */
    void releasePagelessSegments() {
        for (BlockPool pool : new BlockPool[] {largeBlocks, smallBlocks}) {
            List<Block> whole = null;
            for (Block u = pool.unmapped.first(); u != null; u = BlockTree.next(u)) {
                if (!u.isSplit() && u.size == u.expandableSegment().size()) {
                    if (whole == null) {
                        whole = new ArrayList<>();
                    }
                    whole.add(u);
                }
            }
            if (whole != null) {
                whole.forEach(this::releaseExpandableSegment);
            }
        }
    }

    /**
     * {@code release_block}: cudaFree of a whole free segment. As in PyTorch, {@code num_device_free} and the
     * {@code segment_free} entry come before the driver call, so a failing cudaFree leaves them recorded and the
     * segment cached (allocator.md §11).
     */
    private void releaseBlock(Block block, @Nullable List<Frame> context) {
        stats.countDeviceFree();
        trace.record(
                TraceAction.SEGMENT_FREE,
                block.ptr,
                block.size,
                block.stream,
                context != null ? context : block.contextWhenSegmentAllocated);
        device.free(block.ptr);
        AllocatorEvents.segmentFree(device.index(), block.ptr, block.size, block.stream, false);
        totalAllocatedMemory -= block.size;
        int type = block.pool.statType;
        stats.decrease(SEGMENT, type, 1);
        stats.decrease(RESERVED_BYTES, type, block.size);
        if (SizeRules.isOversize(block.size, maxSplitSize)) {
            stats.updateOversizeSegments(-1);
        }
        block.pool.blocks.remove(block);
        recycle(block);
    }

    /**
     * {@code release_available_cached_blocks} (allocator.md §4.3), 2.5 behaviour: frees one oversize block big
     * enough, else the largest oversize blocks of the stream until enough is freed (those freed stay freed).
     * Expandable blocks are skipped; so are oversize blocks that are not whole segments (they exist only after
     * max_split_size changed or expandable segments were toggled on, where PyTorch would cudaFree a block that is
     * not a whole segment and break its own state: allocator.md §11).
     */
    private boolean releaseAvailableCachedBlocks(
            BlockPool pool, long stream, long size, @Nullable List<Frame> context) {
        long maxSplit = maxSplitSize;
        if (maxSplit == AllocatorConfig.UNLIMITED) {
            return false;
        }
        long keySize = Math.max(size, maxSplit);
        Block it = pool.blocks.ceiling(stream, keySize, 0);
        if (it == null || it.stream != stream || it.expandable != null) {
            Block cur = it == null ? pool.blocks.last() : pool.blocks.prev(it);
            if (cur == null) {
                return false;
            }
            long totalReleased = 0;
            while (cur != null && totalReleased < keySize && cur.size >= maxSplit && cur.stream == stream) {
                Block before = pool.blocks.prev(cur);
                if (cur.expandable == null && !cur.isSplit()) {
                    long released = cur.size;
                    releaseBlock(cur, context);
                    totalReleased += released;
                }
                cur = before;
            }
            return totalReleased >= keySize;
        }
        if (it.isSplit()) {
            return false;
        }
        releaseBlock(it, context);
        return true;
    }

    /** {@code garbage_collect_cached_blocks} (allocator.md §4.4): frees old unsplit large blocks down to the threshold. */
    private void garbageCollectCachedBlocks(@Nullable List<Frame> context) {
        long gcThreshold = (long) (config.garbageCollectionThreshold() * (double) allowedMemoryMaximum);
        if (totalAllocatedMemory <= gcThreshold) {
            return;
        }
        long targetSize = totalAllocatedMemory - gcThreshold;
        long reclaimed = 0;
        long totalAge = 0;
        int freeable = 0;
        long clock = largeBlocks.getFreeBlocksCallCount;
        for (Block b = largeBlocks.blocks.first(); b != null; b = largeBlocks.blocks.next(b)) {
            if (!b.isSplit() && b.expandable == null) {
                totalAge += clock - b.gcCountBase;
                freeable++;
            }
        }
        if (freeable == 0) {
            return;
        }
        boolean blockFreed = true;
        while (reclaimed < targetSize && blockFreed && freeable > 0) {
            double ageThreshold = (double) totalAge / freeable;
            blockFreed = false;
            Block b = largeBlocks.blocks.first();
            while (b != null) {
                Block next = largeBlocks.blocks.next(b);
                long age = clock - b.gcCountBase;
                if (!b.isSplit() && b.expandable == null && (double) age >= ageThreshold) {
                    blockFreed = true;
                    reclaimed += b.size;
                    totalAge -= age;
                    freeable--;
                    releaseBlock(b, context);
                }
                b = next;
            }
        }
    }

    // ---------------------------------------------------------------- expandable segments (allocator.md §5)

    /** {@code try_allocate_expandable_block}: map pages at the lowest address that fits, growing by whole pages. */
    private @Nullable Block tryAllocateExpandableBlock(
            long stream, BlockPool pool, long size, @Nullable List<Frame> context) {
        Block candidate = findExpandableBlock(stream, pool, size);
        if (!hasAvailableAddressSpace(candidate, size)) {
            // A request larger than a whole fresh reservation (1.125 x the device's memory): on CUDA the pages
            // would run out first; a device that reports less memory than it can map must fail it the same way.
            return null;
        }
        if (!candidate.mapped && !mapBlock(candidate, Math.min(candidate.size, size), context)) {
            return null;
        }
        while (candidate.size < size) {
            long remaining = size - candidate.size;
            Block newCandidate = candidate.next;
            if (newCandidate == null) {
                throw new IllegalStateException("expandable run ends before the size it was checked for: " + candidate);
            }
            if (!mapBlock(newCandidate, Math.min(remaining, newCandidate.size), context)) {
                return null;
            }
            candidate = newCandidate;
        }
        pool.blocks.remove(candidate);
        return candidate;
    }

    /** {@code find_expandable_block}: lowest-address run of free/unmapped blocks of the stream adding up to size. */
    private Block findExpandableBlock(long stream, BlockPool pool, long size) {
        for (Block u = pool.unmapped.ceiling(stream, 0, 0); u != null && u.stream == stream; u = BlockTree.next(u)) {
            Block c = u;
            if (c.prev != null && c.prev.isAvailable()) {
                c = c.prev;
            }
            if (hasAvailableAddressSpace(c, size)) {
                return c;
            }
        }
        long page = SizeRules.expandablePageSize(pool.kind);
        ExpandableSegment es = ExpandableSegment.reserve(
                device, stream, pool, page, ExpandableSegment.defaultPageCount(device.totalMemory(), page));
        expandableSegments.add(es);
        Block candidate = newBlock(es.base, es.size(), stream, pool);
        candidate.mapped = false;
        candidate.expandable = es;
        pool.unmapped.insert(candidate);
        return candidate;
    }

    private static boolean hasAvailableAddressSpace(@Nullable Block b, long size) {
        long bytes = 0;
        while (bytes < size && b != null && b.isAvailable()) {
            bytes += b.size;
            b = b.next;
        }
        return bytes >= size;
    }

    /** {@code map_block}: maps the pages covering the first {@code size} bytes of an unmapped block. */
    private boolean mapBlock(Block toMap, long size, @Nullable List<Frame> context) {
        ExpandableSegment es = toMap.expandableSegment();
        long start = toMap.ptr;
        long mapped = es.map(start, size);
        if (mapped == 0) {
            return false;
        }
        BlockPool pool = toMap.pool;
        pool.unmapped.remove(toMap);
        toMap.mapped = true;
        if (mapped < toMap.size) {
            Block remaining = newBlock(start + mapped, toMap.size - mapped, toMap.stream, pool);
            remaining.mapped = false;
            remaining.expandable = es;
            splice(remaining, toMap, toMap.next);
            pool.unmapped.insert(remaining);
            toMap.size = mapped;
        }
        tryMergeBlocks(toMap, toMap.prev, pool);
        tryMergeBlocks(toMap, toMap.next, pool);
        pool.insertIntoBlocks(toMap);
        totalAllocatedMemory += mapped;
        stats.increase(RESERVED_BYTES, pool.statType, mapped);
        stats.countDeviceAlloc();
        AllocatorEvents.segmentAlloc(device.index(), start, mapped, toMap.stream, true);
        trace.record(TraceAction.SEGMENT_MAP, start, mapped, toMap.stream, context);
        if (toMap.prev == null && toMap.contextWhenSegmentAllocated == null) {
            toMap.contextWhenSegmentAllocated = context;
        }
        return true;
    }

    /** {@code unmap_block}: unmaps the whole pages inside a free block; partial pages stay as free blocks. */
    private void unmapBlock(Block block, @Nullable List<Frame> context) {
        ExpandableSegment es = block.expandableSegment();
        int beginPage = es.pageCeil(block.ptr);
        int endPage = es.pageFloor(block.ptr + block.size);
        if (beginPage >= endPage) {
            return;
        }
        int reached = es.unmapPages(beginPage, endPage);
        // Not only when it stopped early: a failed cuMemRelease of the last page reaches endPage and still failed.
        RuntimeException failure = es.unmapFailure();
        if (failure != null && reached == beginPage) { // stopping at beginPage always comes with a failure
            throw failure;
        }
        endPage = reached;
        BlockPool pool = block.pool;
        pool.blocks.remove(block);
        long start = es.pageAddress(beginPage);
        long unmapped = (long) (endPage - beginPage) * es.pageSize;
        long beforeSize = start - block.ptr;
        if (beforeSize > 0) {
            Block before = newBlock(block.ptr, beforeSize, block.stream, pool);
            before.expandable = es;
            splice(before, block.prev, block);
            pool.insertIntoBlocks(before);
        }
        long afterSize = block.size - (beforeSize + unmapped);
        if (afterSize > 0) {
            Block after = newBlock(start + unmapped, afterSize, block.stream, pool);
            after.expandable = es;
            splice(after, block, block.next);
            pool.insertIntoBlocks(after);
        }
        block.ptr = start;
        block.size = unmapped;
        block.mapped = false;
        tryMergeBlocks(block, block.prev, pool);
        tryMergeBlocks(block, block.next, pool);
        pool.unmapped.insert(block);
        totalAllocatedMemory -= unmapped;
        stats.decrease(RESERVED_BYTES, pool.statType, unmapped);
        stats.countDeviceFree();
        AllocatorEvents.segmentFree(device.index(), start, unmapped, block.stream, true);
        trace.record(
                TraceAction.SEGMENT_UNMAP,
                start,
                unmapped,
                block.stream,
                context != null ? context : block.contextWhenSegmentAllocated);
        if (failure != null) {
            throw failure;
        }
    }

    /** Links {@code b} between {@code before} and {@code after}. */
    private static void splice(Block b, @Nullable Block before, @Nullable Block after) {
        b.prev = before;
        b.next = after;
        if (before != null) {
            before.next = b;
        }
        if (after != null) {
            after.prev = b;
        }
    }

    /** Destroys a fully unmapped expandable segment (no trace entry, no stat). */
    private void releaseExpandableSegment(Block block) {
        ExpandableSegment es = block.expandableSegment();
        if (block.size != es.size() || block.mapped) {
            throw new IllegalStateException("block disagrees with its expandable segment: " + block);
        }
        // Free the address range first: if the driver refuses, the segment stays listed (whole and unmapped), so the
        // next empty_cache tries again instead of leaking the reservation.
        es.destroy();
        block.pool.unmapped.remove(block);
        expandableSegments.remove(es);
        recycle(block);
    }
}
