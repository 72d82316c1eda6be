package io.gpumem.policy;

import io.gpumem.alloc.AddressTable;
import io.gpumem.alloc.AllocatorLock;
import io.gpumem.alloc.GpuAllocator;
import io.gpumem.alloc.GpuAllocatorInternals;
import io.gpumem.alloc.SizeClassIndex;
import io.gpumem.alloc.TraceRecorder;
import io.gpumem.device.Device;
import io.gpumem.history.Frame;
import io.gpumem.history.HistoryOptions.Context;
import io.gpumem.history.MemorySnapshot;
import io.gpumem.history.TraceAction;
import io.gpumem.oom.OutOfMemoryException;
import io.gpumem.policy.StitchPageMapper.ArenaPages;
import io.gpumem.stats.MemoryStats;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import java.util.TreeMap;
import org.jspecify.annotations.Nullable;

/**
 * Policy {@code stitch}: online defragmentation on virtual memory. Blocks live in large virtual arenas (one per
 * stream and size class, like PyTorch's pools) and are placed best fit at 512-byte granularity (the smallest free
 * block that fits, the lowest address among equals, found in a {@link SizeClassIndex}). This class is the block
 * level: it places, frees and merges blocks, waits for their streams' events, and keeps the stats, snapshot and
 * history. The pages under the blocks are {@link StitchPageMapper}'s: a block's missing pages are mapped when it
 * is allocated, a freed block keeps its pages mapped as cache (a training loop that repeats its requests makes no
 * driver calls after its first step), and when the device has no memory for a block's pages, mappings no live
 * block touches are unmapped and released from wherever they are (<em>stitching</em>): free physical memory
 * scattered between live blocks becomes one contiguous virtual range instead of a request to the driver or a
 * failure. A request fails only when free physical memory, counted in whole pages, is truly short.
 *
 * <p>Invariants (checked by {@link StitchInvariants}, with the page level's): the blocks of an online arena tile
 * its reservation in address order with no two free neighbours; the free index holds exactly the free blocks;
 * allocated bytes equal the live blocks' sizes. Fixed-offset arenas ({@link PlannedAllocator}'s plan region) keep
 * the page accounting but no tiling: their blocks are placed by the caller and checked not to overlap. malloc and
 * free allocate nothing unless history is recorded ({@link GpuAllocatorInternals#recordHistory}: trace entries and
 * the stacks of live blocks, as the exact allocator keeps them).
 *
 * <p>Thread safety: one {@link AllocatorLock} per allocator, as the exact allocator has: every public method (and
 * every method of {@link #internals()}) takes it, so calls from several threads behave as some order of the same
 * calls from one; uncontended it costs one compare-and-set and one release store per call, and allocates nothing.
 * A {@link PlannedAllocator} shares its stitch allocator's lock.
 *
 * <p>Design notes: policies.md §2 (layout §2.1, placement §2.2, free §2.5, invariants §2.9); the page level,
 * {@link StitchPageMapper}, has policies.md §2.3 (pinning) and §2.4 (stitching).
 */
public final class StitchAllocator implements GpuAllocator {

    /** Requests up to this size go to the small arenas (PyTorch's small-pool limit), so they do not pin big pages. */
    static final long SMALL_LIMIT = 1L << 20;
    /** The policy's registered name ({@link PolicyRegistry}), also written into its snapshots. */
    static final String NAME = "stitch";

    static final long ROUND = 512;

    final Device device;
    final long page;

    private final long arenaBytes;
    /** The online arenas by key (stream * 2 + small), searched linearly: a job has a handful of streams. */
    private long[] arenaKeys = new long[4];

    private Arena[] arenaByKey = new Arena[4];
    private int arenaCount;
    final List<Arena> arenas = new ArrayList<>();
    private final AddressTable<StitchBlock> live = AddressTable.forObjects(64);
    /** StitchBlock objects no structure refers to any more, kept for reuse (linked through {@code next}). */
    private @Nullable StitchBlock spareBlocks;

    final List<StitchBlock> pendingFrees = new ArrayList<>();
    /** Allocated bytes and allocations, retries and OOMs, as every policy counts them. */
    final PolicyCounters counts = new PolicyCounters();

    private boolean closed;
    /**
     * Taken by every public method, and by {@link PlannedAllocator} around its own bookkeeping (it shares this
     * allocator's state); the package-private {@code ...Locked} methods and {@link #mallocFixed} expect it held.
     */
    final AllocatorLock lock = new AllocatorLock();

    private final TraceRecorder history = new TraceRecorder();
    private final GpuAllocatorInternals internals = new PolicyInternals(this, () -> {});
    /** The page level: the physical memory under the arenas' pages, its pins, mapping and stealing, its counters. */
    final StitchPageMapper mapper;

    public StitchAllocator(Device device) {
        if (!device.supportsVirtualMemory()) {
            throw new IllegalArgumentException(
                    "policy stitch needs a device with virtual memory (" + device.name() + ")");
        }
        this.device = device;
        this.page = device.allocationGranularity();
        long want = Math.max(2 * device.totalMemory(), 1L << 30);
        this.arenaBytes = (want + page - 1) / page * page;
        this.mapper = new StitchPageMapper(device, page, history, arenas);
    }

    @Override
    public Device device() {
        return device;
    }

    /**
     * One virtual reservation: its pages and the physical memory under them ({@link ArenaPages}, the page
     * level's), and the blocks placed in it. An online arena is tiled by its blocks, the free ones in
     * {@link #freeBySize}; a fixed arena holds the blocks its caller placed, by address, in {@link #fixedBlocks}.
     */
    final class Arena extends ArenaPages {
        final SizeClassIndex<StitchBlock> freeBySize = new SizeClassIndex<>();
        final TreeMap<Long, StitchBlock> fixedBlocks = new TreeMap<>();

        Arena(long stream, boolean fixed, long bytes) {
            super(device, page, stream, fixed, bytes);
            if (!fixed) {
                StitchBlock all = newBlock(this, base, bytes, stream);
                all.free = true;
                freeBySize.insert(all);
            }
            arenas.add(this);
        }
    }

    private Arena arena(long stream, boolean small) {
        long key = stream * 2 + (small ? 1 : 0);
        for (int i = 0; i < arenaCount; i++) {
            if (arenaKeys[i] == key) {
                return arenaByKey[i];
            }
        }
        Arena a = new Arena(stream, false, arenaBytes);
        if (arenaCount == arenaKeys.length) {
            arenaKeys = Arrays.copyOf(arenaKeys, 2 * arenaCount);
            arenaByKey = Arrays.copyOf(arenaByKey, 2 * arenaCount);
        }
        arenaKeys[arenaCount] = key;
        arenaByKey[arenaCount++] = a;
        return a;
    }

    /** A block object: a recycled one when there is one, so splitting a free block allocates nothing. */
    private StitchBlock newBlock(Arena arena, long addr, long size, long stream) {
        StitchBlock b = spareBlocks;
        if (b == null) {
            return new StitchBlock(arena, addr, size, stream);
        }
        spareBlocks = b.next;
        b.arena = arena;
        b.ptr = addr;
        b.size = size;
        b.stream = stream;
        b.free = false;
        b.prev = null;
        b.next = null;
        if (b.uses != null) {
            b.uses.clear();
        }
        return b;
    }

    /** Keeps a block object that nothing refers to any more for {@link #newBlock}. */
    private void recycle(StitchBlock b) {
        b.arena = null;
        b.prev = null;
        b.next = spareBlocks;
        spareBlocks = b;
    }

    /** The reservation of an online arena: twice the device's memory (at least 1 GiB), in whole pages. */
    long onlineArenaBytes() {
        return arenaBytes;
    }

    /** A fixed-offset arena of {@code bytes} (rounded up to pages) for a caller that places blocks itself. */
    Arena newFixedArena(long bytes) {
        return new Arena(-1, true, Math.max(page, (bytes + page - 1) / page * page));
    }

    static long roundSize(long size) {
        return size <= 0 ? ROUND : (size + ROUND - 1) / ROUND * ROUND;
    }

    @Override
    public long malloc(long size, long stream) {
        if (size < 0) {
            throw new IllegalArgumentException("negative size " + size);
        }
        lock.lock();
        try {
            return mallocLocked(size, stream);
        } finally {
            lock.unlock();
        }
    }

    /** Refuses a request of a closed allocator (the caller holds {@link #lock}). */
    void checkOpen() {
        if (closed) {
            throw new IllegalStateException("allocator is closed");
        }
    }

    /** {@link #malloc} for a caller holding {@link #lock} (the planned policy's fallback). */
    long mallocLocked(long size, long stream) {
        if (size < 0) {
            throw new IllegalArgumentException("negative size " + size);
        }
        checkOpen();
        if (size == 0) {
            return 0;
        }
        long rounded = roundSize(size);
        List<Frame> context = history.maybeGatherContext(Context.STATE);
        mapper.requestContext = context;
        processPendingFrees(false);
        Arena a = arena(stream, rounded <= SMALL_LIMIT);
        StitchBlock b = a.freeBySize.ceiling(a.stream, rounded, 0);
        if (b != null && mapper.pinPages(a, b.ptr, rounded, b.ptr + b.size)) {
            return take(b, rounded, size, stream, context);
        }
        if (!pendingFrees.isEmpty()) {
            counts.retries++;
            processPendingFrees(true);
            b = a.freeBySize.ceiling(a.stream, rounded, 0);
            if (b != null && mapper.pinPages(a, b.ptr, rounded, b.ptr + b.size)) {
                return take(b, rounded, size, stream, context);
            }
        }
        throw outOfMemory(size, rounded, stream, context);
    }

    /**
     * Serves a block at {@code offset} of a fixed arena (the caller holds {@link #lock} and guarantees the block
     * overlaps no live block there), or returns {@link Device#NULL} when the physical memory for its pages cannot be
     * had: no out-of-memory error is counted or raised, since the caller can still serve the request elsewhere
     * (the planned policy's fallback, whose partly used pages may hold it).
     */
    long mallocFixed(Arena a, long offset, long rounded, long requested, long stream) {
        checkOpen();
        List<Frame> context = history.maybeGatherContext(Context.STATE);
        mapper.requestContext = context;
        long addr = a.base + offset;
        if (!mapper.pinFixed(a, addr, rounded)) {
            if (!pendingFrees.isEmpty()) {
                counts.retries++;
                processPendingFrees(true);
            }
            if (!mapper.pinFixed(a, addr, rounded)) {
                return Device.NULL;
            }
        }
        StitchBlock b = newBlock(a, addr, rounded, stream);
        a.fixedBlocks.put(addr, b);
        allocated(b, requested, context);
        return addr;
    }

    private long take(StitchBlock b, long rounded, long requested, long stream, @Nullable List<Frame> context) {
        Arena a = b.arena();
        if (b.size > rounded && a.freeBySize.rekeyInPlace(b, b.size - rounded, b.ptr + rounded)) {
            // b stays in the free index as the remainder; a block object in front of it is the allocation
            StitchBlock used = newBlock(a, b.ptr - rounded, rounded, stream);
            used.prev = b.prev;
            used.next = b;
            if (b.prev != null) {
                b.prev.next = used;
            }
            b.prev = used;
            allocated(used, requested, context);
            return used.ptr;
        }
        a.freeBySize.remove(b);
        if (b.size > rounded) {
            StitchBlock rest = newBlock(a, b.ptr + rounded, b.size - rounded, a.stream);
            rest.free = true;
            rest.prev = b;
            rest.next = b.next;
            if (b.next != null) {
                b.next.prev = rest;
            }
            b.next = rest;
            b.size = rounded;
            a.freeBySize.insert(rest);
        }
        b.free = false;
        b.stream = stream;
        allocated(b, requested, context);
        return b.ptr;
    }

    private void allocated(StitchBlock b, long requested, @Nullable List<Frame> context) {
        b.requested = requested;
        b.frames = context;
        history.record(TraceAction.ALLOC, b.ptr, requested, b.stream, context, -1);
        live.put(b.ptr, b);
        counts.allocated(b.size);
    }

    @Override
    public void free(long ptr) {
        if (ptr == 0) {
            return;
        }
        lock.lock();
        try {
            freeLocked(ptr);
        } finally {
            lock.unlock();
        }
    }

    /** {@link #free} of a non-null pointer, for a caller holding {@link #lock}. */
    void freeLocked(long ptr) {
        checkOpen(); // a block freed after close would stay mapped with nothing left to give it back
        StitchBlock b = live.remove(ptr);
        if (b == null) {
            throw new IllegalArgumentException("invalid device pointer: 0x" + Long.toHexString(ptr));
        }
        List<Frame> context = history.maybeGatherContext(Context.ALL);
        history.record(
                TraceAction.FREE_REQUESTED, b.ptr, b.requested, b.stream, context != null ? context : b.frames, -1);
        counts.freed(b.size);
        if (StreamUses.recordEventsIfUsed(b.uses, device)) {
            pendingFrees.add(b); // until the streams that used it are seen done
        } else {
            release(b);
        }
    }

    @Override
    public void recordStream(long ptr, long stream) {
        lock.lock();
        try {
            recordStreamLocked(ptr, stream);
        } finally {
            lock.unlock();
        }
    }

    private void recordStreamLocked(long ptr, long stream) {
        checkOpen();
        StitchBlock b = live.get(ptr);
        if (b == null) {
            throw new IllegalArgumentException("invalid device pointer: 0x" + Long.toHexString(ptr));
        }
        if (stream != b.stream) {
            b.uses = StreamUses.with(b.uses, stream);
        }
    }

    /** Releases blocks whose recorded streams have passed their free (all of them, waiting, when {@code sync}). */
    private void processPendingFrees(boolean sync) {
        if (pendingFrees.isEmpty()) {
            return;
        }
        StreamUses.releaseCompleted(pendingFrees, b -> Objects.requireNonNull(b.uses), device, sync, this::release);
    }

    /** Returns a block's address range to its arena and unpins its pages (they stay mapped as cache). */
    private void release(StitchBlock b) {
        history.record(TraceAction.FREE_COMPLETED, b.ptr, b.requested, b.stream, b.frames, -1);
        b.frames = null;
        Arena a = b.arena();
        if (a.fixed) {
            mapper.unpinFixed(a, b.ptr, b.size);
            a.fixedBlocks.remove(b.ptr);
            recycle(b);
            return;
        }
        b.free = true;
        StitchBlock p = b.prev;
        StitchBlock n = b.next;
        StitchBlock freePrev = p != null && p.free ? p : null;
        StitchBlock freeNext = n != null && n.free ? n : null;
        // b's pages that the merged free block holds wholly become unpinned, as one run
        long mergedStart = freePrev != null ? freePrev.ptr : b.ptr;
        long mergedEnd = freeNext != null ? freeNext.ptr + freeNext.size : b.ptr + b.size;
        mapper.unpinReleased(a, b.ptr, b.size, mergedStart, mergedEnd);
        if (freePrev != null) {
            long size = freePrev.size + b.size;
            StitchBlock after = n;
            if (freeNext != null) {
                a.freeBySize.remove(freeNext);
                size += freeNext.size;
                after = freeNext.next;
                recycle(freeNext);
            }
            freePrev.next = after;
            if (after != null) {
                after.prev = freePrev;
            }
            recycle(b);
            rekey(a, freePrev, size, freePrev.ptr);
        } else if (freeNext != null) {
            // the free next block takes b's place, growing downwards
            freeNext.prev = p;
            if (p != null) {
                p.next = freeNext;
            }
            long size = freeNext.size + b.size;
            long addr = b.ptr;
            recycle(b);
            rekey(a, freeNext, size, addr);
        } else {
            a.freeBySize.insert(b);
        }
    }

    /** Gives free block f a new key, in place when its order among the free blocks allows it. */
    private static void rekey(Arena a, StitchBlock f, long size, long addr) {
        if (!a.freeBySize.rekeyInPlace(f, size, addr)) {
            a.freeBySize.remove(f);
            f.size = size;
            f.ptr = addr;
            a.freeBySize.insert(f);
        }
    }

    /**
     * Unmaps and releases every mapping no live block touches; adjacent ones go in one unmap call per run (the
     * unpinned list is sorted by page first, so this is not on any hot path).
     */
    @Override
    public void emptyCache() {
        lock.lock();
        try {
            emptyCacheLocked();
        } finally {
            lock.unlock();
        }
    }

    private void emptyCacheLocked() {
        mapper.requestContext = history.maybeGatherContext(Context.ALL);
        processPendingFrees(true);
        mapper.unmapAllUnpinned();
    }

    private OutOfMemoryException outOfMemory(long requested, long rounded, long stream, @Nullable List<Frame> context) {
        return counts.outOfMemory(device, history, requested, rounded, stream, context, reservedBytes(), List.of());
    }

    /** The figures are read under the lock; the value is built after it is released. */
    @Override
    public MemoryStats stats() {
        MemoryStats.Builder figures;
        lock.lock();
        try {
            figures = statsBuilder();
        } finally {
            lock.unlock();
        }
        return figures.build();
    }

    /**
     * The figures of {@link #stats()}, ready for a policy built on this one to add its own extras: PyTorch's
     * allocated, allocation and reserved stats over all pools and four counters (device alloc and free count
     * physical handles created and released), plus {@code num_stitched_pages} (pages unmapped from a cache to make
     * room) and {@code num_dropped_mappings} (multi-page mappings dropped because a block covered part of one).
     */
    MemoryStats.Builder statsBuilder() { // caller holds the lock
        return counts.builder(
                        new MemoryStats.Stat(
                                reservedBytes(),
                                mapper.peakReserved,
                                mapper.physicalCreated * page,
                                mapper.physicalReleased * page),
                        mapper.createCalls,
                        mapper.releaseCalls)
                .extra("num_stitched_pages", mapper.steals)
                .extra("num_dropped_mappings", mapper.drops);
    }

    /**
     * The state as PyTorch snapshot segments ({@link StitchSnapshot}): one segment per run of mapped pages; the
     * trace is the recorded history ({@link GpuAllocatorInternals#recordHistory}), empty unless history is on.
     */
    @Override
    public MemorySnapshot snapshot() {
        lock.lock();
        try {
            return StitchSnapshot.of(this);
        } finally {
            lock.unlock();
        }
    }

    /** History recording, its stacks and clock, the invariant check (none of them on the hot path). */
    @Override
    public GpuAllocatorInternals internals() {
        return internals;
    }

    /** The recorded history, configured through {@link #internals()}. */
    TraceRecorder history() {
        return history;
    }

    @Override
    public void close() {
        lock.lock();
        try {
            if (!closed) {
                emptyCacheLocked();
                closed = true;
            }
        } finally {
            lock.unlock();
        }
    }

    /** Mapped pages no live block touches (what stitching can take). */
    long stealablePages() {
        return mapper.stealablePages();
    }

    long reservedBytes() {
        return mapper.reservedBytes();
    }

    /** Whether {@code b} is allocated (not free, not waiting on stream events). */
    boolean isLive(StitchBlock b) {
        return live.get(b.ptr) == b;
    }

    /** The allocated blocks (a fresh list, any order). */
    List<StitchBlock> liveBlocks() {
        List<StitchBlock> out = new ArrayList<>(live.size());
        live.forEach(out::add);
        return out;
    }

    /** Checks every invariant the class comment lists ({@link StitchInvariants}). */
    void checkInvariants() {
        StitchInvariants.check(this);
    }
}
