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
 * block that fits, the lowest address among equals, found in a {@link SizeClassIndex}). Physical memory is
 * mapped under an arena in <em>mappings</em>: one physical handle of one or more granule-sized pages, mapped with one
 * {@code map} call. A block's missing pages are mapped when it is allocated, the pages it covers entirely as one
 * mapping per run, a page it shares with a neighbour as a one-page mapping; a freed block keeps its pages mapped as
 * cache, so a training loop that repeats its requests makes no driver calls after its first step.
 *
 * <p>Stitching: when the device has no memory for a block's pages, mappings that no live block touches are
 * unmapped and released, oldest first, from wherever they are (any arena, any stream; neighbouring ones in one
 * {@code unmap} call), and the block's pages mapped from the memory that frees: free physical memory scattered
 * between live blocks becomes one contiguous virtual range instead of a request to the driver or a failure.
 * Stealing takes whole mappings only (a handle cannot be split), so a multi-page mapping must never be partly in
 * use: it is pinned by exactly one block that covers all of it, or by none, and a block that would cover only part
 * of an unpinned one drops it first. Hence every mapped page no live block touches can be stolen, and a request
 * fails only when the pages it needs exceed the device's free memory plus those pages: when free physical
 * memory, counted in whole granules, is truly short. If the device refuses one handle for a whole run, the run
 * is mapped page by page.
 *
 * <p>Pinning: a mapping is pinned while an allocated or pending block touches it. In an online arena that follows
 * from the blocks, which tile it: a mapped page is unpinned exactly when it lies wholly inside one free block, so
 * nothing is stored per page or per mapping. The unpinned pages are listed in {@link UnpinnedRuns}, in runs, in
 * the order they became unpinned (a freed block's pages as one run, lowest page first), and a malloc takes the
 * runs inside the free block it carves off the list: a pair costs one step per run, not per page or mapping, and
 * drives the same calls in the same order as a per-mapping list would. A fixed arena counts pins per mapping.
 *
 * <p>Invariants (checked by {@link StitchInvariants}): the blocks of an arena tile its reservation in address
 * order with no two free neighbours; the free index holds exactly the free blocks; every page a block touches is
 * mapped; a multi-page mapping is unpinned or pinned by one block covering it; the unpinned runs are disjoint,
 * made of whole mappings, and hold exactly the mapped pages no block touches; in a fixed arena {@code pins[s]} at
 * the first page s of a mapping counts the blocks touching it (0 on every other page) and each run is one
 * mapping; no physical handle is mapped twice (so no two live blocks share physical memory); reserved bytes equal
 * the mapped pages, allocated bytes the live blocks' sizes. Fixed-offset arenas ({@link PlannedAllocator}'s plan
 * region) keep the page accounting but no tiling: their blocks are placed by the caller and checked not to
 * overlap. malloc and free allocate nothing unless history is recorded
 * ({@link GpuAllocatorInternals#recordHistory}: trace entries and the stacks of live blocks, as the exact
 * allocator keeps them).
 *
 * <p>Thread safety: one {@link AllocatorLock} per allocator, as the exact allocator has: every public method (and
 * every method of {@link #internals()}) takes it, so calls from several threads behave as some order of the same
 * calls from one; uncontended it costs one compare-and-set and one release store per call, and allocates nothing.
 * A {@link PlannedAllocator} shares its stitch allocator's lock.
 *
 * <p>Design notes: policies.md §2 (layout §2.1, placement §2.2, pinning §2.3, stitching §2.4, invariants §2.9).
 */
public final class StitchAllocator implements GpuAllocator {

    /** Requests up to this size go to the small arenas (PyTorch's small-pool limit), so they do not pin big pages. */
    static final long SMALL_LIMIT = 1L << 20;
    /** The policy's registered name ({@link PolicyRegistry}), also written into its snapshots. */
    static final String NAME = "stitch";

    static final long ROUND = 512;
    /**
     * Pages an arena's per-page arrays cover at first (32 MiB of 2 MiB pages); they grow with use. Small, so that
     * the tests' small devices grow them too.
     */
    static final int INITIAL_PAGES = 16;

    final Device device;
    final long page;
    /** log2 of the page size when it is a power of two, else -1. */
    private final int pageShift;

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
    long mappedPages;
    /** Allocated bytes and allocations, retries and OOMs, as every policy counts them. */
    final PolicyCounters counts = new PolicyCounters();

    private long peakReserved;
    private long physicalCreated;
    private long physicalReleased;
    private long createCalls;
    private long releaseCalls;
    private long steals;
    private long drops;
    private boolean closed;
    /**
     * Taken by every public method, and by {@link PlannedAllocator} around its own bookkeeping (it shares this
     * allocator's state); the package-private {@code ...Locked} methods and {@link #mallocFixed} expect it held.
     */
    final AllocatorLock lock = new AllocatorLock();

    private final TraceRecorder history = new TraceRecorder();
    private final GpuAllocatorInternals internals = new PolicyInternals(this, () -> {});
    /** The stack of the request being served (null unless history keeps stacks), for its map and unmap entries. */
    private @Nullable List<Frame> requestContext;

    public StitchAllocator(Device device) {
        if (!device.supportsVirtualMemory()) {
            throw new IllegalArgumentException(
                    "policy stitch needs a device with virtual memory (" + device.name() + ")");
        }
        this.device = device;
        this.page = device.allocationGranularity();
        long want = Math.max(2 * device.totalMemory(), 1L << 30);
        this.arenaBytes = (want + page - 1) / page * page;
        this.pageShift = Long.bitCount(page) == 1 ? Long.numberOfTrailingZeros(page) : -1;
    }

    @Override
    public Device device() {
        return device;
    }

    /**
     * One virtual reservation and the physical pages mapped under it.
     *
     * <p>The per-page arrays cover only the pages up to the highest one a block has pinned ({@link #cover}), grown
     * by doubling up to {@link #pages}: the reservation is twice the device (so that fragmentation never runs out
     * of address space), and arrays sized to it would cost 32 bytes per page whether used or not, gigabytes of heap
     * for a device of tens of TiB that a small job touches the bottom of. A page past them is unmapped, listed in no
     * unpinned run and touched by no allocated block.
     */
    final class Arena {
        final long base;
        final long stream;
        final boolean fixed;
        /** Pages in the reservation (the arrays below may cover fewer). */
        final int pages;
        /** The physical handle mapped under page p (the same handle on every page of one mapping), 0 if none. */
        long[] handle;
        /** The first page of the mapping that covers page p (valid where {@code handle[p] != 0}). */
        int[] mapStart;
        /** Pages in the mapping that starts at page p (valid at mapping starts only). */
        int[] mapLength;

        /**
         * Fixed arenas only (empty in an online arena, whose pins follow from its blocks): at the first page of a
         * mapping, the allocated or pending blocks touching it (a multi-page mapping is pinned by one block
         * covering it or by none, so its pin is kept once, on its first page); 0 at every other page.
         */
        int[] pins;
        /**
         * The mapped pages no block touches, in runs listed in the order they became unpinned: stolen from the
         * tail. In an online arena these are exactly the mapped pages that lie wholly inside a free block.
         */
        final UnpinnedRuns unpinned;

        final SizeClassIndex<StitchBlock> freeBySize = new SizeClassIndex<>();
        final TreeMap<Long, StitchBlock> fixedBlocks = new TreeMap<>();

        Arena(long stream, boolean fixed, long bytes) {
            long count = bytes / page;
            if (count > Integer.MAX_VALUE) {
                // pages are int indexes: a cast would wrap to a negative or a too-small count
                throw new IllegalArgumentException("policy stitch cannot reserve an arena of " + bytes + " bytes: its "
                        + count + " pages of " + page + " bytes are more than 2^31 - 1 (the arena is twice the"
                        + " device's " + device.totalMemory() + " bytes, or a plan region that large)");
            }
            this.stream = stream;
            this.fixed = fixed;
            this.pages = (int) count;
            this.base = device.reserveAddressRange(bytes);
            int covered = Math.min(pages, INITIAL_PAGES);
            handle = new long[covered];
            mapStart = new int[covered];
            mapLength = new int[covered];
            pins = new int[fixed ? covered : 0];
            unpinned = new UnpinnedRuns(covered);
            if (!fixed) {
                StitchBlock all = newBlock(this, base, bytes, stream);
                all.free = true;
                freeBySize.insert(all);
            }
            arenas.add(this);
        }

        /** Grows the per-page arrays, by doubling, to cover page {@code p} (a page of the reservation). */
        void cover(int p) {
            if (p < handle.length) {
                return;
            }
            int n = (int) Math.min(pages, Math.max(p + 1L, 2L * handle.length));
            handle = Arrays.copyOf(handle, n);
            mapStart = Arrays.copyOf(mapStart, n);
            mapLength = Arrays.copyOf(mapLength, n);
            if (fixed) {
                pins = Arrays.copyOf(pins, n);
            }
            unpinned.grow(n);
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

    /** The page holding byte {@code offset} of an arena (a shift for the usual power-of-two granule). */
    private int pageOf(long offset) {
        return (int) (pageShift >= 0 ? offset >>> pageShift : offset / page);
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
        requestContext = context;
        processPendingFrees(false);
        Arena a = arena(stream, rounded <= SMALL_LIMIT);
        StitchBlock b = a.freeBySize.ceiling(a.stream, rounded, 0);
        if (b != null && pinPages(a, b, rounded)) {
            return take(b, rounded, size, stream, context);
        }
        if (!pendingFrees.isEmpty()) {
            counts.retries++;
            processPendingFrees(true);
            b = a.freeBySize.ceiling(a.stream, rounded, 0);
            if (b != null && pinPages(a, b, rounded)) {
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
        requestContext = context;
        long addr = a.base + offset;
        if (!pinFixed(a, addr, rounded)) {
            if (!pendingFrees.isEmpty()) {
                counts.retries++;
                processPendingFrees(true);
            }
            if (!pinFixed(a, addr, rounded)) {
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

    /**
     * Pins the pages under the first {@code size} bytes of free block f of online arena a for a new block carved
     * there, mapping physical memory under each page that has none. Missing pages are mapped in runs: the pages
     * the block covers entirely get one handle per run (one map call), a page the block shares with a neighbour
     * gets a one-page handle of its own. That keeps the rule stealing relies on: a mapping of several pages is
     * pinned by exactly one block, which covers all of it, or by none. So a multi-page mapping the block covers
     * only in part is unpinned; it is dropped (unmapped and released) and its pages under the block mapped afresh.
     * Memory comes from the device; when it has none, mappings no live block touches are unmapped and released,
     * oldest first, from wherever they are: free physical memory scattered between live blocks becomes one
     * contiguous virtual range. On failure the block's pages are unpinned again (what was mapped stays as cache)
     * and false is returned.
     *
     * <p>No per-page work when the pages are mapped: a page the block shares with an allocated neighbour is
     * pinned already (pins of an online arena follow from its blocks), and the pages wholly inside f are pinned
     * by taking them off the unpinned list, whose runs the walk meets at their first pages (a run lies inside one
     * free block and is made of whole mappings), so it costs one step per run and per unmapped page.
     */
    private boolean pinPages(Arena a, StitchBlock f, long size) {
        long addr = f.ptr;
        int p0 = pageOf(addr - a.base);
        int p1 = pageOf(addr + size - 1 - a.base);
        int full0 = pageOf(addr - a.base + page - 1);
        int full1 = pageOf(addr + size - a.base) - 1;
        a.cover(p1);
        // the pages of p0..p1 wholly inside f: the others are shared with an allocated neighbour, so mapped and pinned
        int w1 = Math.min(p1, pageOf(f.ptr + f.size - a.base) - 1);
        UnpinnedRuns runs = a.unpinned;
        int missing = 0;
        for (int p = full0; p <= w1; ) {
            if (a.handle[p] == 0) {
                missing++;
                p++;
                continue;
            }
            int hi = runs.end(p);
            if (hi < p) {
                throw new IllegalStateException("stitch: mapped free page " + p + " starts no unpinned run");
            }
            if (hi > w1) {
                runs.cutFront(p, w1 + 1);
                break;
            }
            runs.remove(p);
            p = hi + 1;
        }
        if (a.handle[p1] != 0) {
            // only the mapping under the block's last page can be covered in part (policies.md §2.3); such a
            // mapping is unpinned
            int s = a.mapStart[p1];
            int n = a.mapLength[s];
            if (n > 1 && (s < full0 || s + n - 1 > full1)) {
                if (s + n - 1 > p1) {
                    runs.cutFront(p1 + 1, s + n); // its pages past the block were still listed
                }
                drops++;
                missing += p1 - s + 1;
                dropMapping(a, s);
            }
        }
        boolean mapped = missing == 0 || mapMissing(a, p0, p1, full0, full1);
        // (pages mapped before physical memory ran out stay mapped: they count toward the peak either way)
        peakReserved = Math.max(peakReserved, reservedBytes());
        if (!mapped) {
            relist(a, full0, w1);
            return false;
        }
        return true;
    }

    /** Lists the mapped pages of online arena a's pages p0..p1 (wholly free again) as unpinned, lowest first. */
    private void relist(Arena a, int p0, int p1) {
        for (int p = p0; p <= p1; ) {
            if (a.handle[p] == 0) {
                p++;
                continue;
            }
            int q = p;
            while (q < p1 && a.handle[q + 1] != 0) {
                q++;
            }
            a.unpinned.push(p, q);
            p = q + 1;
        }
    }

    /**
     * {@link #pinPages} for a block at {@code addr} of fixed arena a, which keeps a pin count per mapping and
     * lists each unpinned mapping as a run of its own: one step per page and per mapping under the block.
     */
    private boolean pinFixed(Arena a, long addr, long size) {
        int p0 = pageOf(addr - a.base);
        int p1 = pageOf(addr + size - 1 - a.base);
        a.cover(p1);
        int full0 = pageOf(addr - a.base + page - 1);
        int full1 = pageOf(addr + size - a.base) - 1;
        int missing = 0;
        for (int p = p0; p <= p1; ) {
            if (a.handle[p] == 0) {
                missing++;
                p++;
                continue;
            }
            int s = a.mapStart[p];
            int n = a.mapLength[s];
            if (n == 1) {
                if (a.pins[p]++ == 0) {
                    a.unpinned.remove(p);
                }
                p++;
            } else if (s >= full0 && s + n - 1 <= full1) {
                a.pins[s] = 1; // the whole run, one store
                a.unpinned.remove(s);
                p = s + n;
            } else {
                drops++;
                a.unpinned.remove(s);
                dropMapping(a, s);
            }
        }
        boolean mapped = missing == 0 || mapMissing(a, p0, p1, full0, full1);
        peakReserved = Math.max(peakReserved, reservedBytes()); // (as in pinPages: part-way mappings stay)
        if (!mapped) {
            unpinFixed(a, p0, p1);
            return false;
        }
        return true;
    }

    /** Maps every unmapped page of p0..p1 (pins them); false when physical memory runs out part way. */
    private boolean mapMissing(Arena a, int p0, int p1, int full0, int full1) {
        for (int p = p0; p <= p1; ) {
            if (a.handle[p] != 0) {
                p = a.mapStart[p] + a.mapLength[a.mapStart[p]];
                continue;
            }
            int q = p;
            while (q < p1 && a.handle[q + 1] == 0) {
                q++;
            }
            int inner0 = Math.max(p, full0);
            int inner1 = Math.min(q, full1);
            for (int r = p; r <= q; ) {
                int end = r >= inner0 && r <= inner1 ? inner1 : r;
                if (!mapRun(a, r, end - r + 1)) {
                    return false;
                }
                r = end + 1;
            }
            p = q + 1;
        }
        return true;
    }

    /**
     * Maps {@code n} pages at page p under one new handle, or, when the device cannot give one handle of that size
     * even after stealing, under one handle per page; false when even that fails (pages mapped so far stay pinned).
     */
    private boolean mapRun(Arena a, int p, int n) {
        long h = obtainPhysical((long) n * page);
        if (h != 0) {
            mapHandle(a, p, n, h);
            return true;
        }
        if (n == 1) {
            return false;
        }
        for (int q = p; q < p + n; q++) {
            if (!mapRun(a, q, 1)) {
                return false;
            }
        }
        return true;
    }

    /**
     * Maps handle {@code h} at page p for n pages and enables access. If the map fails the handle is released; if
     * setting access fails the mapping is undone first: either way the exception propagates with nothing left in the
     * driver that the arena does not record (a leaked handle, or a mapping that blocks the next map of these pages).
     */
    private void mapHandle(Arena a, int p, int n, long h) {
        long va = a.base + (long) p * page;
        long bytes = (long) n * page;
        try {
            device.map(va, bytes, h);
        } catch (RuntimeException e) {
            releaseAfterFailure(h, n, e);
            throw e;
        }
        try {
            device.setAccess(va, bytes);
        } catch (RuntimeException e) {
            try {
                device.unmap(va, bytes);
            } catch (RuntimeException suppressed) {
                e.addSuppressed(suppressed);
            }
            releaseAfterFailure(h, n, e);
            throw e;
        }
        history.record(TraceAction.SEGMENT_MAP, va, bytes, Math.max(0, a.stream), requestContext, -1);
        for (int q = p; q < p + n; q++) {
            a.handle[q] = h;
            a.mapStart[q] = p;
        }
        if (a.fixed) {
            a.pins[p] = 1;
        }
        a.mapLength[p] = n;
        mappedPages += n;
    }

    /** Releases handle {@code h} of n pages that {@link #mapHandle} could not keep, counted as a release. */
    private void releaseAfterFailure(long h, int n, RuntimeException failure) {
        try {
            device.releasePhysical(h);
            physicalReleased += n;
            releaseCalls++;
        } catch (RuntimeException suppressed) {
            failure.addSuppressed(suppressed);
        }
    }

    /** A new physical handle of {@code bytes}, stealing unpinned mappings for room when needed; 0 when short. */
    private long obtainPhysical(long bytes) {
        while (true) {
            long h = device.createPhysical(bytes);
            if (h != 0) {
                physicalCreated += bytes / page;
                createCalls++;
                return h;
            }
            long deficit = bytes - device.freeMemory();
            if (!stealAtLeast(Math.max(deficit, page))) {
                return 0;
            }
        }
    }

    /** Unpins pages p0..p1 of a fixed arena's block being released or failing to pin (only the mapped ones). */
    private void unpinFixed(Arena a, int p0, int p1) {
        for (int p = p0; p <= p1; ) {
            if (a.handle[p] == 0) {
                p++;
                continue;
            }
            int s = a.mapStart[p];
            int n = a.mapLength[s];
            if (n == 1) {
                if (--a.pins[p] == 0) {
                    a.unpinned.push(p, p);
                }
                p++;
            } else {
                a.pins[s] = 0; // the whole run, one store
                a.unpinned.push(s, s + n - 1);
                p = s + n;
            }
        }
    }

    /**
     * Unmaps and releases unpinned mappings, oldest first, until at least {@code bytes} went back to the device:
     * each victim grows into the unpinned mappings next to it, so a run of them goes in one unmap call. False when
     * nothing is left to steal.
     */
    private boolean stealAtLeast(long bytes) {
        long freed = 0;
        while (freed < bytes) {
            Arena victim = null;
            for (Arena a : arenas) {
                if (a.unpinned.tail() >= 0) {
                    victim = a;
                    break;
                }
            }
            if (victim == null) {
                return freed > 0;
            }
            UnpinnedRuns runs = victim.unpinned;
            // the oldest unpinned mapping is the first of the oldest run; pages s..e-1 go, all listed, in the
            // runs starting at pages first (which holds page s) to last (which holds page e - 1)
            int s = runs.tail();
            int e = s + victim.mapLength[s];
            int first = s;
            int last = s;
            long run = (long) victim.mapLength[s] * page;
            while (freed + run < bytes) {
                if (e < victim.handle.length && (e <= runs.end(last) || runs.end(e) >= 0)) {
                    if (e > runs.end(last)) {
                        last = e;
                    }
                    run += (long) victim.mapLength[e] * page;
                    e += victim.mapLength[e];
                } else if (s > 0 && (first < s || runs.startEndingAt(s - 1) >= 0)) {
                    if (first == s) {
                        first = runs.startEndingAt(s - 1);
                    }
                    s = victim.mapStart[s - 1];
                    run += (long) victim.mapLength[s] * page;
                } else {
                    break;
                }
            }
            steals += run / page;
            unlist(runs, first, s, e);
            unmapRun(victim, s, e, true);
            freed += run;
        }
        return true;
    }

    /**
     * Takes pages s..e-1, every one of them listed, off the unpinned runs: the end of the run starting at page
     * {@code first} (which holds page s), the runs after it, the front of the one holding page e - 1.
     */
    private static void unlist(UnpinnedRuns runs, int first, int s, int e) {
        int lo = first;
        if (first < s) {
            int hi = runs.end(first);
            runs.cutBack(first, s - 1);
            lo = hi + 1;
        }
        while (lo < e) {
            int hi = runs.end(lo);
            if (hi < lo) {
                throw new IllegalStateException("stitch: stolen page " + lo + " starts no unpinned run");
            }
            if (hi >= e) {
                runs.cutFront(lo, e);
                return;
            }
            runs.remove(lo);
            lo = hi + 1;
        }
    }

    /**
     * Unmaps the unpinned mappings that tile pages s..e-1 in one call and releases their handles (with
     * {@code release}; the device frees the memory then). The caller has taken the pages off the unpinned runs.
     */
    private void unmapRun(Arena a, int s, int e, boolean release) {
        device.unmap(a.base + (long) s * page, (long) (e - s) * page);
        history.record(
                TraceAction.SEGMENT_UNMAP,
                a.base + (long) s * page,
                (long) (e - s) * page,
                Math.max(0, a.stream),
                requestContext,
                -1);
        for (int p = s; p < e; ) {
            int n = a.mapLength[p];
            if (release) {
                device.releasePhysical(a.handle[p]);
                physicalReleased += n;
                releaseCalls++;
            }
            for (int q = p; q < p + n; q++) {
                a.handle[q] = 0;
            }
            mappedPages -= n;
            p += n;
        }
    }

    /** Unmaps and releases the unpinned mapping starting at page s (already off the unpinned runs). */
    private void dropMapping(Arena a, int s) {
        unmapRun(a, s, s + a.mapLength[s], true);
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
        int p0 = pageOf(b.ptr - a.base);
        int p1 = pageOf(b.ptr + b.size - 1 - a.base);
        if (a.fixed) {
            unpinFixed(a, p0, p1);
            a.fixedBlocks.remove(b.ptr);
            recycle(b);
            return;
        }
        b.free = true;
        StitchBlock p = b.prev;
        StitchBlock n = b.next;
        StitchBlock freePrev = p != null && p.free ? p : null;
        StitchBlock freeNext = n != null && n.free ? n : null;
        // b's pages that the merged free block holds wholly become unpinned, as one run: all but a first or last
        // page still shared with an allocated neighbour
        long mergedStart = freePrev != null ? freePrev.ptr : b.ptr;
        long mergedEnd = freeNext != null ? freeNext.ptr + freeNext.size : b.ptr + b.size;
        int lo = mergedStart <= a.base + (long) p0 * page ? p0 : p0 + 1;
        int hi = mergedEnd >= a.base + (long) (p1 + 1) * page ? p1 : p1 - 1;
        if (lo <= hi) {
            a.unpinned.push(lo, hi);
        }
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
        requestContext = history.maybeGatherContext(Context.ALL);
        processPendingFrees(true);
        for (Arena a : arenas) {
            UnpinnedRuns runs = a.unpinned;
            int count = 0;
            for (int p = runs.head(); p >= 0; p = runs.next(p)) {
                count++;
            }
            int[] starts = new int[count];
            int i = 0;
            for (int p = runs.head(); p >= 0; p = runs.next(p)) {
                starts[i++] = p;
            }
            Arrays.sort(starts);
            for (i = 0; i < count; ) {
                int s = starts[i];
                int e = s;
                while (i < count && starts[i] == e) {
                    e = runs.end(starts[i]) + 1;
                    runs.remove(starts[i]);
                    i++;
                }
                unmapRun(a, s, e, true);
            }
        }
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
                                reservedBytes(), peakReserved, physicalCreated * page, physicalReleased * page),
                        createCalls,
                        releaseCalls)
                .extra("num_stitched_pages", steals)
                .extra("num_dropped_mappings", drops);
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
        long n = 0;
        for (Arena a : arenas) {
            for (int p = a.unpinned.head(); p >= 0; p = a.unpinned.next(p)) {
                n += a.unpinned.end(p) - p + 1;
            }
        }
        return n;
    }

    long reservedBytes() {
        return mappedPages * page;
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
