package io.gpumem.policy;

import io.gpumem.alloc.AbstractAllocatorInternals;
import io.gpumem.alloc.AddressTable;
import io.gpumem.alloc.AllocatorLock;
import io.gpumem.alloc.GpuAllocator;
import io.gpumem.alloc.GpuAllocatorInternals;
import io.gpumem.alloc.Pool;
import io.gpumem.alloc.TraceRecorder;
import io.gpumem.device.Device;
import io.gpumem.device.DeviceException;
import io.gpumem.history.BlockInfo;
import io.gpumem.history.BlockState;
import io.gpumem.history.Frame;
import io.gpumem.history.HistoryOptions.Context;
import io.gpumem.history.MemorySnapshot;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceAction;
import io.gpumem.oom.OomReport;
import io.gpumem.oom.OutOfMemoryException;
import io.gpumem.size.ByteSize;
import io.gpumem.stats.MemoryStats;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;
import org.jspecify.annotations.Nullable;

/**
 * RAPIDS RMM's {@code pool_memory_resource} over {@code cuda_memory_resource}, as a PyTorch program that installs
 * {@code rmm_torch_allocator} uses it: what {@code compare --policy rmm-pool} answers for a team weighing RMM's pool
 * against PyTorch's caching allocator on its own recording. The design note is policies.md §5; the rules below
 * are RMM's ({@code pool_memory_resource.hpp}, {@code stream_ordered_memory_resource.hpp},
 * {@code coalescing_free_list.hpp}) unless marked [gpumem].
 *
 * <h2>Algorithm</h2>
 * <ul>
 *   <li><b>Sizes.</b> A request is rounded up to 256 bytes; a request of 0 bytes gets no memory.</li>
 *   <li><b>The pool</b> is the upstream blocks ({@code cudaMalloc}), never given back before {@link #close()}: the
 *       initial one at construction ({@code initial}, by default half the device's free memory rounded down to 256
 *       bytes, as {@code percent_of_free_device_memory(50)}), then one per growth.</li>
 *   <li><b>Free lists</b>, one per stream, each sorted by address; a block inserted merges with a free neighbour
 *       that touches it, except across the start of an upstream block (its <i>head</i>), so upstream blocks never
 *       fuse. The initial block starts in the default stream's list.</li>
 *   <li><b>malloc(size, stream)</b>: (1) the best fit in the stream's own list: the smallest block that fits, the
 *       lowest address among equals; (2) else the best fit of the first other list that has one, in the order the
 *       streams' events were created [gpumem: RMM orders its lists by event handle, which the driver hands out; we
 *       take creation order, policies.md §5.6], the remainder staying in that list; (3) else each other list in that order is moved
 *       into the own one (coalescing) and the best fit tried again after each; (4) else the pool grows: by
 *       {@code max(size, pool size)} without a maximum (doubling), or by {@code max(size, remaining / 2)} where
 *       {@code remaining} is the headroom up to {@code max} rounded up to 256 (nothing, a failure, when the request
 *       is larger than it); a failed {@code cudaMalloc} is retried at half the size, not below the request. A block
 *       found is split: the request takes its low end, the rest goes back to the list it came from.</li>
 *   <li><b>free</b> returns the block to its allocation stream's list (PyTorch's pluggable allocator frees on the
 *       stream it allocated on).</li>
 *   <li><b>record_stream</b> [gpumem]: RMM has none (and {@code rmm_torch_allocator} registers none, so PyTorch
 *       ignores it). To keep {@link GpuAllocator}'s promise, a block freed while other streams used it waits outside
 *       the pool on one event per stream, and enters its list when a later malloc sees them done, or when a request
 *       that found no memory synchronises them and tries once more (counted as a retry).</li>
 *   <li><b>emptyCache</b> does not shrink the pool; it only synchronises the blocks waiting on streams [gpumem].</li>
 * </ul>
 *
 * <h2>Invariants</h2>
 * ({@link #checkInvariants}) The live, waiting and free blocks tile every upstream block exactly, each block inside
 * one; each free list is sorted by address with no two blocks that touch unless the second is a head; a block is a
 * head exactly when it starts an upstream block; the pool size is the sum of the upstream blocks and allocated bytes
 * the sum of the live blocks. After {@link #close()} the pool is empty (no upstream block, no free list): the live and
 * waiting blocks left are records of blocks the user held, which the pool's release gave back with it; allocated bytes
 * are still their sum. One {@link AllocatorLock}, taken by every public method; the per-op path allocates a
 * block object for each remainder split off (RMM's own lists allocate a node per insert).
 */
public final class RmmPoolAllocator implements GpuAllocator {

    /** The policy's registered name. */
    public static final String NAME = "rmm-pool";

    /**
     * {@code rmm::CUDA_ALLOCATION_ALIGNMENT}: requests are rounded up to a multiple of it, so every block starts at one
     * (an upstream block's size need not be one: halfway to a maximum, or halved after a failure).
     */
    public static final long ALIGNMENT = 256;

    /** A piece of the pool (RMM's {@code block}): live, waiting on events, or free in one stream's list. */
    private static final class Piece {
        long ptr;
        long size;
        /** Whether it starts an upstream block (never merged with what lies before it). */
        boolean head;

        // in a free list
        @Nullable
        Piece prev;

        @Nullable
        Piece next;

        // live or waiting
        long stream;
        long requested;

        @Nullable
        List<Frame> frames;

        /** Streams recorded with recordStream, then their events while the freed piece waits; null until the first. */
        @Nullable
        StreamUses uses;

        Piece(long ptr, long size, boolean head) {
            this.ptr = ptr;
            this.size = size;
            this.head = head;
        }

        long end() {
            return ptr + size;
        }

        /** Notes that {@code other} used the piece; its own stream needs no event. */
        void useOn(long other) {
            if (other != stream) {
                uses = StreamUses.with(uses, other);
            }
        }
    }

    /** One stream's free blocks by address ({@code coalescing_free_list}). */
    private static final class FreeList {
        @Nullable
        Piece first;

        int count;

        /** Inserts {@code b} in address order, merged with a neighbour that touches it (not across a head). */
        void insert(Piece b) {
            Piece before = null;
            Piece after = first;
            while (after != null && after.ptr < b.ptr) {
                before = after;
                after = after.next;
            }
            boolean mergeBefore = before != null && before.end() == b.ptr && !b.head;
            boolean mergeAfter = after != null && b.end() == after.ptr && !after.head;
            if (before != null && mergeBefore) {
                before.size += b.size;
                if (after != null && mergeAfter) {
                    before.size += after.size;
                    unlink(after);
                }
            } else if (after != null && mergeAfter) {
                after.ptr = b.ptr;
                after.size += b.size;
                after.head = b.head;
            } else {
                b.prev = before;
                b.next = after;
                if (before == null) {
                    first = b;
                } else {
                    before.next = b;
                }
                if (after != null) {
                    after.prev = b;
                }
                count++;
            }
        }

        /** Removes and returns the smallest block of at least {@code size} bytes (the lowest among equals), or null. */
        @Nullable
        Piece takeBestFit(long size) {
            Piece best = null;
            for (Piece b = first; b != null; b = b.next) {
                if (b.size >= size && (best == null || b.size < best.size)) {
                    best = b;
                }
            }
            if (best != null) {
                unlink(best);
            }
            return best;
        }

        void unlink(Piece b) {
            if (b.prev == null) {
                first = b.next;
            } else {
                b.prev.next = b.next;
            }
            if (b.next != null) {
                b.next.prev = b.prev;
            }
            b.prev = null;
            b.next = null;
            count--;
        }

        long largest() {
            long largest = 0;
            for (Piece b = first; b != null; b = b.next) {
                largest = Math.max(largest, b.size);
            }
            return largest;
        }
    }

    /** An upstream block: where it lies and the stream whose request grew the pool by it. */
    private record Upstream(long ptr, long size, long stream) {}

    private final Device device;
    private final long maximum;

    final AllocatorLock lock = new AllocatorLock();
    private final TraceRecorder history = new TraceRecorder();
    private final GpuAllocatorInternals internals;

    /** Stream handles in the order their events were created; a list's index in {@link #lists} is its stream's. */
    private long[] streamByEvent = new long[4];

    private int events;
    /** The free list of each stream by event order; null where none was made yet or it was merged away. */
    private @Nullable FreeList[] lists = new FreeList[4];

    private final AddressTable<Piece> live = AddressTable.forObjects();
    private final List<Piece> waiting = new ArrayList<>();
    private final TreeMap<Long, Upstream> upstream = new TreeMap<>();
    private boolean closed;

    /** Allocated bytes and allocations, retries and OOMs, as every policy counts them. */
    private final PolicyCounters counts = new PolicyCounters();

    private long poolSize;
    private long upstreamAllocs;
    private long upstreamFrees;
    private long upstreamBytesFreed;
    private long steals;
    private long merges;

    /**
     * A pool on {@code device} with its initial block taken at once.
     *
     * @param initial the initial pool size, a multiple of 256; negative for half the device's free memory (at most
     *     {@code maximum}, policies.md §5.6)
     * @param maximum the most the pool may grow to, a multiple of 256; negative for no maximum
     * @throws OutOfMemoryException when the device cannot provide the initial pool
     */
    public RmmPoolAllocator(Device device, long initial, long maximum) {
        this.device = device;
        this.maximum = maximum;
        this.internals = new Internals(this);
        long size = initial >= 0 ? initial : alignDown(device.freeMemory() / 2);
        if (maximum >= 0 && size > maximum) {
            if (initial >= 0) {
                throw new IllegalArgumentException(
                        "policy rmm-pool: initial " + initial + " bytes exceeds max " + maximum + " bytes");
            }
            // [gpumem] RMM refuses a default initial pool above the maximum; max alone means a pool capped there
            size = maximum;
        }
        if (size > 0) {
            Piece b = expand(size, size, Device.DEFAULT_STREAM, null);
            if (b == null) {
                throw outOfMemory(size, size, Device.DEFAULT_STREAM, null);
            }
            listOf(Device.DEFAULT_STREAM).insert(b);
        }
    }

    /** A pool with RMM's defaults: half the device's free memory at first, no maximum. */
    public RmmPoolAllocator(Device device) {
        this(device, -1, -1);
    }

    static long alignUp(long bytes) {
        return (bytes + ALIGNMENT - 1) / ALIGNMENT * ALIGNMENT;
    }

    static long alignDown(long bytes) {
        return bytes / ALIGNMENT * ALIGNMENT;
    }

    @Override
    public Device device() {
        return device;
    }

    @Override
    public long malloc(long size, long stream) {
        if (size <= 0) { // RMM hands out nothing for 0 bytes, before it takes its lock
            if (size == 0) {
                return Device.NULL;
            }
            throw new IllegalArgumentException("negative size " + size);
        }
        lock.lock();
        try {
            ensureOpen();
            List<Frame> context = history.maybeGatherContext(Context.STATE);
            if (size > Long.MAX_VALUE - ALIGNMENT) { // no device holds it, and it cannot be rounded
                throw outOfMemory(size, size, stream, context);
            }
            long rounded = alignUp(size);
            processWaiting(false);
            Piece b = getBlock(rounded, stream, context);
            if (b == null && !waiting.isEmpty()) {
                counts.retries++;
                processWaiting(true);
                b = getBlock(rounded, stream, context);
            }
            if (b == null) {
                throw outOfMemory(size, rounded, stream, context);
            }
            b.stream = stream;
            b.requested = size;
            b.frames = context;
            live.put(b.ptr, b);
            counts.allocated(b.size);
            history.record(TraceAction.ALLOC, b.ptr, size, stream, context);
            return b.ptr;
        } finally {
            lock.unlock();
        }
    }

    /** {@code get_block}: own list, another stream's list, the lists merged into the own one, a grown pool. */
    private @Nullable Piece getBlock(long size, long stream, @Nullable List<Frame> context) {
        int own = eventOf(stream);
        FreeList mine = lists[own];
        if (mine != null) {
            Piece b = mine.takeBestFit(size);
            if (b != null) {
                return split(b, size, mine);
            }
        } else {
            mine = new FreeList();
            lists[own] = mine;
        }
        for (int o = 0; o < events; o++) {
            FreeList other = lists[o];
            if (o != own && other != null) {
                Piece b = other.takeBestFit(size);
                if (b != null) {
                    steals++;
                    return split(b, size, other);
                }
            }
        }
        for (int o = 0; o < events; o++) {
            FreeList other = lists[o];
            if (o != own && other != null) {
                for (Piece b = other.first; b != null; ) {
                    Piece next = b.next;
                    b.prev = null;
                    b.next = null;
                    mine.insert(b);
                    b = next;
                }
                lists[o] = null;
                merges++;
                Piece b = mine.takeBestFit(size);
                if (b != null) {
                    return split(b, size, mine);
                }
            }
        }
        Piece grown = expand(sizeToGrow(size), size, stream, context);
        return grown == null ? null : split(grown, size, mine);
    }

    /** The low {@code size} bytes of {@code b} as the block to hand out; the rest goes back to {@code list}. */
    private static Piece split(Piece b, long size, FreeList list) {
        if (b.size > size) {
            list.insert(new Piece(b.ptr + size, b.size - size, false));
            b.size = size;
        }
        return b;
    }

    /** {@code size_to_grow}: halfway to the maximum, or the pool's size again; 0 when the maximum leaves no room. */
    private long sizeToGrow(long size) {
        if (maximum >= 0) {
            long remaining = alignUp(maximum - poolSize);
            long aligned = alignUp(size);
            return aligned <= remaining ? Math.max(aligned, remaining / 2) : 0;
        }
        return Math.max(size, poolSize);
    }

    /**
     * {@code try_to_expand}: an upstream block of {@code tryBytes}, halved on failure down to {@code minBytes}; its
     * {@code segment_alloc} entry carries the stack of the request that grew the pool, as PyTorch's does.
     */
    private @Nullable Piece expand(long tryBytes, long minBytes, long stream, @Nullable List<Frame> context) {
        long attempt = tryBytes;
        while (attempt >= minBytes) {
            long p = attempt == 0 ? Device.NULL : upstreamMalloc(attempt);
            if (p != Device.NULL) {
                poolSize += attempt;
                upstreamAllocs++;
                upstream.put(p, new Upstream(p, attempt, stream));
                history.record(TraceAction.SEGMENT_ALLOC, p, attempt, stream, context);
                return new Piece(p, attempt, true);
            }
            if (attempt == minBytes) {
                break;
            }
            attempt = Math.max(minBytes, attempt / 2);
        }
        return null;
    }

    /** {@code block_from_upstream}: RMM takes any upstream failure for no memory. */
    private long upstreamMalloc(long bytes) {
        try {
            return device.malloc(bytes);
        } catch (DeviceException e) {
            return Device.NULL;
        }
    }

    /** The event order of {@code stream}, its event created (and a slot for its list) on first use. */
    private int eventOf(long stream) {
        for (int i = 0; i < events; i++) {
            if (streamByEvent[i] == stream) {
                return i;
            }
        }
        if (events == streamByEvent.length) {
            streamByEvent = Arrays.copyOf(streamByEvent, events * 2);
            lists = Arrays.copyOf(lists, events * 2);
        }
        streamByEvent[events] = stream;
        return events++;
    }

    private FreeList listOf(long stream) {
        int e = eventOf(stream);
        FreeList l = lists[e];
        if (l == null) {
            l = new FreeList();
            lists[e] = l;
        }
        return l;
    }

    @Override
    public void free(long address) {
        if (address == Device.NULL) {
            return;
        }
        lock.lock();
        try {
            ensureOpen();
            Piece b = live.remove(address);
            if (b == null) {
                throw invalidPointer(address);
            }
            List<Frame> context = history.maybeGatherContext(Context.ALL);
            history.record(
                    TraceAction.FREE_REQUESTED, b.ptr, b.requested, b.stream, context != null ? context : b.frames);
            counts.freed(b.size);
            if (StreamUses.recordEventsIfUsed(b.uses, device)) {
                waiting.add(b); // until the streams that used it are seen done
            } else {
                release(b);
            }
        } finally {
            lock.unlock();
        }
    }

    private void ensureOpen() {
        if (closed) {
            throw new IllegalStateException("allocator is closed");
        }
    }

    private static IllegalArgumentException invalidPointer(long address) {
        return new IllegalArgumentException("invalid device pointer: 0x" + Long.toHexString(address));
    }

    /** Returns a freed block to its allocation stream's list. */
    private void release(Piece b) {
        history.record(TraceAction.FREE_COMPLETED, b.ptr, b.requested, b.stream, b.frames);
        b.frames = null;
        listOf(b.stream).insert(b);
    }

    /** Releases the waiting blocks whose streams are seen done (all of them, synchronising, when {@code sync}). */
    private void processWaiting(boolean sync) {
        if (!waiting.isEmpty()) {
            StreamUses.releaseCompleted(waiting, b -> Objects.requireNonNull(b.uses), device, sync, this::release);
        }
    }

    @Override
    public void recordStream(long address, long stream) {
        if (address != Device.NULL) {
            underLock(() -> {
                ensureOpen();
                Piece b = live.get(address);
                if (b == null) {
                    throw invalidPointer(address);
                }
                b.useOn(stream);
            });
        }
    }

    /**
     * {@code torch.cuda.empty_cache()}: the pool does not shrink (PyTorch has no cache to empty in a pluggable
     * allocator, and RMM's pool gives memory back only at {@link #close()}); blocks waiting on streams are synchronised
     * and returned to their lists [gpumem], as the exact allocator's {@code empty_cache} synchronises its events.
     */
    @Override
    public void emptyCache() {
        underLock(() -> {
            ensureOpen();
            processWaiting(true);
        });
    }

    /** Runs {@code action} holding the allocator's lock (for the calls off the malloc and free path). */
    private void underLock(Runnable action) {
        lock.lock();
        try {
            action.run();
        } finally {
            lock.unlock();
        }
    }

    private OutOfMemoryException outOfMemory(long requested, long rounded, long stream, @Nullable List<Frame> context) {
        return counts.outOfMemory(device, history, requested, rounded, stream, context, poolSize, largestFree());
    }

    /** The largest free block of each stream's list, for an out-of-memory report. */
    private List<OomReport.LargestFree> largestFree() {
        List<OomReport.LargestFree> largest = new ArrayList<>();
        for (int e = 0; e < events; e++) {
            FreeList l = lists[e];
            if (l != null && l.first != null) {
                largest.add(new OomReport.LargestFree(Pool.LARGE, streamByEvent[e], l.largest()));
            }
        }
        return largest;
    }

    /**
     * PyTorch's allocated, allocation and reserved stats over all pools (reserved: the pool), the device calls
     * ({@code cudaMalloc} of upstream blocks, their frees at close), OOMs and retries, plus
     * {@code num_stream_steals} (blocks taken from another stream's list) and {@code num_stream_merges} (lists merged
     * into a requesting stream's).
     */
    @Override
    public MemoryStats stats() {
        MemoryStats.Builder figures;
        lock.lock();
        try {
            long everReserved = poolSize + upstreamBytesFreed; // the pool only grows until close
            figures = counts.builder(
                            new MemoryStats.Stat(poolSize, everReserved, everReserved, upstreamBytesFreed),
                            upstreamAllocs,
                            upstreamFrees)
                    .extra("num_stream_steals", steals)
                    .extra("num_stream_merges", merges);
        } finally {
            lock.unlock();
        }
        return figures.build();
    }

    /**
     * One segment per upstream block (on the stream whose request grew the pool by it; the initial block on the
     * default stream), its blocks live, waiting or free in address order; the trace is the recorded history.
     */
    @Override
    public MemorySnapshot snapshot() {
        lock.lock();
        try {
            TreeMap<Long, Piece> all = new TreeMap<>();
            live.forEach(b -> all.put(b.ptr, b));
            for (Piece b : waiting) {
                all.put(b.ptr, b);
            }
            for (int e = 0; e < events; e++) {
                FreeList l = lists[e];
                for (Piece b = l == null ? null : l.first; b != null; b = b.next) {
                    all.put(b.ptr, b);
                }
            }
            List<SegmentInfo> segments = new ArrayList<>();
            for (Upstream u : upstream.values()) {
                List<BlockInfo> blocks = new ArrayList<>();
                for (Piece b : all.subMap(u.ptr(), u.ptr() + u.size()).values()) {
                    blocks.add(new BlockInfo(b.ptr, b.size, isFree(b) ? 0 : b.requested, stateOf(b), framesOf(b)));
                }
                segments.add(SegmentInfo.ofBlocks(device.index(), u.ptr(), u.stream(), Pool.LARGE, false, blocks));
            }
            // by address already: the upstream blocks are kept in address order
            return new MemorySnapshot(segments, List.of(history.entries()), Map.of("policy", NAME));
        } finally {
            lock.unlock();
        }
    }

    private boolean isFree(Piece b) {
        return live.get(b.ptr) != b && !waiting.contains(b);
    }

    private BlockState stateOf(Piece b) {
        if (live.get(b.ptr) == b) {
            return BlockState.ACTIVE_ALLOCATED;
        }
        return waiting.contains(b) ? BlockState.ACTIVE_PENDING_FREE : BlockState.INACTIVE;
    }

    private List<Frame> framesOf(Piece b) {
        return b.frames == null || isFree(b) ? List.of() : b.frames;
    }

    @Override
    public GpuAllocatorInternals internals() {
        return internals;
    }

    /** {@code release()}: every upstream block back to the device. Idempotent. */
    @Override
    public void close() {
        lock.lock();
        try {
            if (closed) {
                return;
            }
            for (Upstream u : upstream.values()) {
                device.free(u.ptr());
                upstreamFrees++;
                upstreamBytesFreed += u.size();
                history.record(TraceAction.SEGMENT_FREE, u.ptr(), u.size(), u.stream(), null);
            }
            upstream.clear();
            poolSize = 0;
            Arrays.fill(lists, null);
            closed = true;
        } finally {
            lock.unlock();
        }
    }

    /** The pool's size now (its upstream blocks). */
    long poolSize() {
        lock.lock();
        try {
            return poolSize;
        } finally {
            lock.unlock();
        }
    }

    /** Checks every invariant of the class comment; throws {@link IllegalStateException} naming the first broken. */
    void checkInvariants() {
        TreeMap<Long, Piece> all = new TreeMap<>();
        List<Piece> liveList = new ArrayList<>();
        live.forEach(liveList::add);
        long liveBytes = 0;
        for (Piece b : liveList) {
            liveBytes += b.size;
            place(all, b, "live");
            if (b.size % ALIGNMENT != 0) {
                throw new IllegalStateException("live block at 0x" + Long.toHexString(b.ptr) + " of " + b.size
                        + " bytes is not a multiple of 256");
            }
        }
        for (Piece b : waiting) {
            place(all, b, "waiting");
        }
        for (int e = 0; e < events; e++) {
            FreeList l = lists[e];
            if (l == null) {
                continue;
            }
            int n = 0;
            for (Piece b = l.first; b != null; b = b.next) {
                n++;
                place(all, b, "free on stream " + streamByEvent[e]);
                Piece next = b.next;
                if (next != null && (next.ptr <= b.ptr || (b.end() == next.ptr && !next.head))) {
                    throw new IllegalStateException("free list of stream " + streamByEvent[e] + ": blocks at 0x"
                            + Long.toHexString(b.ptr) + " and 0x" + Long.toHexString(next.ptr)
                            + " are out of order or unmerged");
                }
                if (next != null && next.prev != b) {
                    throw new IllegalStateException("free list of stream " + streamByEvent[e] + ": broken link at 0x"
                            + Long.toHexString(next.ptr));
                }
            }
            if (n != l.count) {
                throw new IllegalStateException(
                        "free list of stream " + streamByEvent[e] + " counts " + l.count + " blocks, holds " + n);
            }
        }
        long pool = 0;
        for (Upstream u : upstream.values()) {
            pool += u.size();
            long at = u.ptr();
            for (Piece b : all.subMap(u.ptr(), u.ptr() + u.size()).values()) {
                if (b.ptr != at) {
                    throw new IllegalStateException("upstream block at 0x" + Long.toHexString(u.ptr())
                            + " has a gap or overlap at 0x" + Long.toHexString(Math.min(at, b.ptr)));
                }
                if (b.head != (b.ptr == u.ptr())) {
                    throw new IllegalStateException(
                            "block at 0x" + Long.toHexString(b.ptr) + " is marked head=" + b.head);
                }
                at = b.end();
            }
            if (at != u.ptr() + u.size()) {
                throw new IllegalStateException("upstream block at 0x" + Long.toHexString(u.ptr())
                        + " is not covered to its end (blocks reach 0x" + Long.toHexString(at) + ")");
            }
        }
        long covered = 0;
        for (Piece b : all.values()) {
            covered += b.size;
        }
        if (closed) {
            // release() gave every upstream block back, the user's blocks in them included: there is nothing left
            // to tile, and the live and waiting blocks are records of what the user held (still counted allocated)
            if (!upstream.isEmpty() || poolSize != 0 || Arrays.stream(lists).anyMatch(l -> l != null)) {
                throw new IllegalStateException("closed, yet the pool holds " + upstream.size()
                        + " upstream blocks, pool size " + poolSize + " or a free list");
            }
        } else if (covered != pool || pool != poolSize) {
            throw new IllegalStateException(
                    "pool size " + poolSize + ", upstream blocks " + pool + ", blocks " + covered);
        }
        if (liveBytes != counts.allocated || liveList.size() != counts.live) {
            throw new IllegalStateException("allocated " + counts.allocated + " bytes in " + counts.live
                    + " blocks, live blocks " + liveBytes + " in " + liveList.size());
        }
    }

    /**
     * Files {@code b} by address. Addresses are 256-byte aligned (upstream blocks are, and every piece handed out is a
     * multiple of 256); a free block's size need not be, where an upstream block is not (halfway to a maximum, or
     * halved after a failure, as RMM sizes them).
     */
    private static void place(Map<Long, Piece> all, Piece b, String where) {
        if (b.size <= 0 || b.ptr % ALIGNMENT != 0) {
            throw new IllegalStateException(where + " block at 0x" + Long.toHexString(b.ptr) + " of " + b.size
                    + " bytes is empty or not 256-byte aligned");
        }
        if (all.put(b.ptr, b) != null) {
            throw new IllegalStateException("two blocks at 0x" + Long.toHexString(b.ptr) + " (one " + where + ")");
        }
    }

    /** History, its stacks and clock, and the invariant check, under the allocator's lock. */
    private static final class Internals extends AbstractAllocatorInternals {
        private final RmmPoolAllocator pool;

        Internals(RmmPoolAllocator pool) {
            super(pool.lock, pool.history);
            this.pool = pool;
        }

        @Override
        public void checkInvariants() {
            underLock(pool::checkInvariants);
        }
    }

    /**
     * The registry's factory: {@code rmm-pool[:initial=SIZE,max=SIZE]}, sizes as {@code --capacity} takes them, each a
     * multiple of 256 bytes ({@code initial} at most {@code max}); by default half the device's free memory at first and
     * no maximum, as {@code rmm.mr.PoolMemoryResource} without arguments.
     */
    static PolicyFactory factory() {
        return new PolicyFactory() {
            @Override
            public String name() {
                return NAME;
            }

            @Override
            public String summary() {
                return "RAPIDS RMM's pool_memory_resource: coalescing best fit in per-stream free lists, a pool that "
                        + "doubles and never shrinks";
            }

            @Override
            public boolean takesOptions() {
                return true;
            }

            @Override
            public void checkOptions(String options) {
                PoolOptions.parse(options);
            }

            @Override
            public PreparedPolicy prepare(String options, StreamFacts facts) {
                PoolOptions o = PoolOptions.parse(options);
                return device -> new RmmPoolAllocator(device, o.initial(), o.maximum());
            }
        };
    }

    /**
     * The pool's options: {@code initial} and {@code maximum} in bytes, negative for RMM's defaults.
     *
     * @param initial the initial pool size, or −1 for half the device's free memory
     * @param maximum the most the pool grows to, or −1 for no maximum
     */
    record PoolOptions(long initial, long maximum) {

        /**
         * Parses {@code initial=SIZE,max=SIZE} (either, both, or neither).
         *
         * @throws IllegalArgumentException naming the option and what is wrong with it
         */
        static PoolOptions parse(String text) {
            long initial = -1;
            long maximum = -1;
            if (text.isBlank()) {
                return new PoolOptions(initial, maximum);
            }
            for (String part : text.split(",", -1)) {
                int eq = part.indexOf('=');
                String key = eq < 0 ? part.strip() : part.substring(0, eq).strip();
                if (eq < 0) {
                    throw new IllegalArgumentException(
                            "policy rmm-pool: option '" + key + "' needs a value (initial=SIZE or max=SIZE)");
                }
                if (!key.equals("initial") && !key.equals("max")) {
                    throw new IllegalArgumentException(
                            "policy rmm-pool: unknown option '" + key + "' (known: initial, max)");
                }
                long bytes = sizeOption(key, part.substring(eq + 1).strip());
                switch (key) {
                    case "initial" -> {
                        if (initial >= 0) {
                            throw new IllegalArgumentException("policy rmm-pool: initial is given twice");
                        }
                        initial = bytes;
                    }
                    case "max" -> {
                        if (maximum >= 0) {
                            throw new IllegalArgumentException("policy rmm-pool: max is given twice");
                        }
                        if (bytes == 0) {
                            throw new IllegalArgumentException("policy rmm-pool: max must be more than 0 bytes");
                        }
                        maximum = bytes;
                    }
                    default -> throw new IllegalStateException("checked above: " + key);
                }
            }
            if (initial >= 0 && maximum >= 0 && initial > maximum) {
                throw new IllegalArgumentException(
                        "policy rmm-pool: initial " + initial + " bytes exceeds max " + maximum + " bytes");
            }
            return new PoolOptions(initial, maximum);
        }

        private static long sizeOption(String key, String value) {
            long bytes;
            try {
                bytes = ByteSize.parse(value);
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException("policy rmm-pool: " + key + ": " + e.getMessage(), e);
            }
            if (bytes % ALIGNMENT != 0) {
                throw new IllegalArgumentException(
                        "policy rmm-pool: " + key + " must be a multiple of 256 bytes, got " + bytes);
            }
            return bytes;
        }
    }
}
