package io.gpumem.policy;

import io.gpumem.alloc.TraceRecorder;
import io.gpumem.device.Device;
import io.gpumem.history.Frame;
import io.gpumem.history.TraceAction;
import java.util.Arrays;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * The physical page level of a {@link StitchAllocator}: which physical memory lies under each page of its arenas,
 * which of it blocks are using, and where memory comes from when the device has none. The allocator decides where a
 * block goes (its address range, carved from a free block or placed by the caller in a fixed arena); this class
 * makes the pages under that range usable and gives them back when the block goes.
 *
 * <p>Page layout: an arena's reservation is cut into pages of the device's allocation granularity. Physical memory
 * lies under it in <em>mappings</em>, each one handle of one or more consecutive pages made by one
 * {@code createPhysical} and one {@code map} call. Per page an arena keeps ({@link ArenaPages}) the handle under it
 * (0 where none), the first page of its mapping, and, on that first page, the mapping's length; a fixed arena also
 * keeps a pin count on each mapping's first page. The mapped pages no block touches are listed in the arena's
 * {@link UnpinnedRuns}, in runs of whole mappings, newest run first.
 *
 * <p>Pinning: a mapping is <em>pinned</em> while an allocated or pending block touches it. In an online arena
 * that follows from the blocks, which tile it with no two free neighbours: a mapped page is unpinned exactly when
 * it lies wholly inside one free block, so nothing is counted. Pinning a new block's pages takes the runs inside
 * the free block it is carved from off the list, one step per run (a run lies inside one free block), and a freed
 * block's pages go back as one run, lowest page first, so stealing makes the calls a list of single mappings
 * would, in the same order. A fixed arena, whose blocks are placed by the caller and do not tile it, counts pins
 * per mapping and lists each unpinned mapping as a run of its own.
 *
 * <p>Mapping: a new block maps whatever page under it has no memory. Stealing can only take whole mappings (a
 * handle is unmapped and released as one), so a mapping must never be partly in use: the pages a block covers
 * entirely get one handle per run of missing pages, and a first or last page it shares with a neighbour gets a
 * one-page handle of its own. So a multi-page mapping is pinned by exactly one block, covering all of it, or by
 * none (the <em>mapping rule</em>), and a block that would cover only part of an unpinned multi-page mapping drops
 * it (unmaps and releases it, {@code num_dropped_mappings}) and maps those pages afresh. If the device refuses one
 * handle for a whole run even after stealing, the run is mapped a page at a time. A freed block's pages stay
 * mapped as cache.
 *
 * <p>Stitching: when {@code createPhysical} finds the device short, unpinned mappings are stolen, oldest first:
 * the first mapping of the tail run of the first arena (in creation order) that has one, grown into the unpinned
 * mappings next to it while more is wanted, unmapped in one {@code unmap} call and released
 * ({@code num_stitched_pages}). Free physical memory scattered between live blocks, in any arena and on any
 * stream, thus becomes the pages of one new contiguous range; and because of the mapping rule every unpinned page
 * can be stolen, so a block's pages fail to map only when free physical memory, counted in whole pages, is truly
 * short. Then its pages are unpinned again (what was mapped stays, as cache) and the caller is told.
 *
 * <p>Invariants (checked by {@link StitchInvariants}): every page a block touches is mapped; a multi-page mapping
 * is unpinned or pinned by one block that covers it; the unpinned runs are disjoint, made of whole mappings, and
 * hold exactly the mapped pages no block touches; a fixed arena's pin counts equal the blocks touching each
 * mapping; no handle is mapped twice; {@link #mappedPages} is the sum of the mappings' lengths. A driver error
 * while mapping a new handle undoes that one mapping before it propagates, so the driver holds no page an arena
 * does not record.
 *
 * <p>Thread safety: none of its own. It is part of one {@link StitchAllocator}'s state and only called with that
 * allocator's {@link StitchAllocator#lock} held (by the allocator, or the {@link PlannedAllocator} sharing it).
 *
 * <p>Design notes: policies.md §2.1 (layout), §2.3 (pinning and mapping), §2.4 (stitching), §2.9 (invariants).
 */
final class StitchPageMapper {

    /**
     * Pages an arena's per-page arrays cover at first (32 MiB of 2 MiB pages); they grow with use. Small, so that
     * the tests' small devices grow them too.
     */
    static final int INITIAL_PAGES = 16;

    /**
     * The pages of one virtual reservation and the physical memory mapped under them (a {@link StitchAllocator}
     * arena adds its blocks).
     *
     * <p>The per-page arrays cover only the pages up to the highest one a block has pinned ({@link #cover}), grown
     * by doubling up to {@link #pages}: the reservation is twice the device (so that fragmentation never runs out
     * of address space), and arrays sized to it would cost 32 bytes per page whether used or not, gigabytes of heap
     * for a device of tens of TiB that a small job touches the bottom of. A page past them is unmapped, listed in no
     * unpinned run and touched by no allocated block.
     */
    static class ArenaPages {
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

        /** Reserves {@code bytes} (whole pages of {@code page} bytes) of {@code device}'s address space. */
        ArenaPages(Device device, long page, long stream, boolean fixed, long bytes) {
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

    private final Device device;
    private final long page;
    /** log2 of the page size when it is a power of two, else -1. */
    private final int pageShift;
    /** The allocator's history, for the map and unmap entries. */
    private final TraceRecorder history;
    /** The allocator's arenas in creation order (its own list, which it adds to): stealing searches them in turn. */
    private final List<? extends ArenaPages> arenas;

    /**
     * The stack of the request being served (null unless history keeps stacks), for its map and unmap entries; set
     * by the allocator before each request that may map or unmap.
     */
    @Nullable
    List<Frame> requestContext;

    /** Pages mapped under all arenas: the reserved bytes over the page size. */
    long mappedPages;

    long peakReserved;
    /** Pages of physical memory created and released ({@code createPhysical}, {@code releasePhysical}). */
    long physicalCreated;

    long physicalReleased;
    /** Handles created and released: the device alloc and free counts of the stats. */
    long createCalls;

    long releaseCalls;
    /** Pages stolen to make room ({@code num_stitched_pages}). */
    long steals;
    /** Multi-page mappings dropped because a block covered part of one ({@code num_dropped_mappings}). */
    long drops;

    StitchPageMapper(Device device, long page, TraceRecorder history, List<? extends ArenaPages> arenas) {
        this.device = device;
        this.page = page;
        this.pageShift = Long.bitCount(page) == 1 ? Long.numberOfTrailingZeros(page) : -1;
        this.history = history;
        this.arenas = arenas;
    }

    /** The page holding byte {@code offset} of an arena (a shift for the usual power-of-two granule). */
    private int pageOf(long offset) {
        return (int) (pageShift >= 0 ? offset >>> pageShift : offset / page);
    }

    long reservedBytes() {
        return mappedPages * page;
    }

    /**
     * Pins the pages under {@code size} bytes at {@code addr}, the front of the free block of online arena a that
     * ends at {@code freeEnd}, for a new block carved there, mapping physical memory under each page that has none.
     * Missing pages are mapped in runs: the pages the block covers entirely get one handle per run (one map call), a
     * page the block shares with a neighbour gets a one-page handle of its own. That keeps the rule stealing relies
     * on: a mapping of several pages is pinned by exactly one block, which covers all of it, or by none. So a
     * multi-page mapping the block covers only in part is unpinned; it is dropped (unmapped and released) and its
     * pages under the block mapped afresh. Memory comes from the device; when it has none, mappings no live block
     * touches are unmapped and released, oldest first, from wherever they are: free physical memory scattered
     * between live blocks becomes one contiguous virtual range. On failure the block's pages are unpinned again
     * (what was mapped stays as cache) and false is returned.
     *
     * <p>No per-page work when the pages are mapped: a page the block shares with an allocated neighbour is
     * pinned already (pins of an online arena follow from its blocks), and the pages wholly inside the free block
     * are pinned by taking them off the unpinned list, whose runs the walk meets at their first pages (a run lies
     * inside one free block and is made of whole mappings), so it costs one step per run and per unmapped page.
     */
    boolean pinPages(ArenaPages a, long addr, long size, long freeEnd) {
        int p0 = pageOf(addr - a.base);
        int p1 = pageOf(addr + size - 1 - a.base);
        int full0 = pageOf(addr - a.base + page - 1);
        int full1 = pageOf(addr + size - a.base) - 1;
        a.cover(p1);
        // the pages of p0..p1 wholly inside the free block: the others are shared with an allocated neighbour, so
        // mapped and pinned
        int w1 = Math.min(p1, pageOf(freeEnd - a.base) - 1);
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

    /**
     * Unpins the pages of a block of online arena a at {@code addr} being released into the free block
     * {@code mergedStart..mergedEnd} (itself merged with its free neighbours): the pages that free block holds
     * wholly, all of the block's but a first or last one still shared with an allocated neighbour, as one run.
     */
    void unpinReleased(ArenaPages a, long addr, long size, long mergedStart, long mergedEnd) {
        int p0 = pageOf(addr - a.base);
        int p1 = pageOf(addr + size - 1 - a.base);
        int lo = mergedStart <= a.base + (long) p0 * page ? p0 : p0 + 1;
        int hi = mergedEnd >= a.base + (long) (p1 + 1) * page ? p1 : p1 - 1;
        if (lo <= hi) {
            a.unpinned.push(lo, hi);
        }
    }

    /** Lists the mapped pages of online arena a's pages p0..p1 (wholly free again) as unpinned, lowest first. */
    private void relist(ArenaPages a, int p0, int p1) {
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
    boolean pinFixed(ArenaPages a, long addr, long size) {
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
            unpinFixed(a, addr, size);
            return false;
        }
        return true;
    }

    /** Maps every unmapped page of p0..p1 (pins them); false when physical memory runs out part way. */
    private boolean mapMissing(ArenaPages a, int p0, int p1, int full0, int full1) {
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
    private boolean mapRun(ArenaPages a, int p, int n) {
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
    private void mapHandle(ArenaPages a, int p, int n, long h) {
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

    /**
     * Unpins the pages under {@code size} bytes at {@code addr} of fixed arena a, for a block being released or
     * failing to pin (only the mapped ones).
     */
    void unpinFixed(ArenaPages a, long addr, long size) {
        int p0 = pageOf(addr - a.base);
        int p1 = pageOf(addr + size - 1 - a.base);
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
            ArenaPages victim = null;
            for (ArenaPages a : arenas) {
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
     * Unmaps and releases every mapping no live block touches, in every arena; adjacent ones go in one unmap call per
     * run (the unpinned list is sorted by page first, so this is not on any hot path).
     */
    void unmapAllUnpinned() {
        for (ArenaPages a : arenas) {
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

    /**
     * Unmaps the unpinned mappings that tile pages s..e-1 in one call and releases their handles (with
     * {@code release}; the device frees the memory then). The caller has taken the pages off the unpinned runs.
     */
    private void unmapRun(ArenaPages a, int s, int e, boolean release) {
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
    private void dropMapping(ArenaPages a, int s) {
        unmapRun(a, s, s + a.mapLength[s], true);
    }

    /** Mapped pages no live block touches (what stitching can take). */
    long stealablePages() {
        long n = 0;
        for (ArenaPages a : arenas) {
            for (int p = a.unpinned.head(); p >= 0; p = a.unpinned.next(p)) {
                n += a.unpinned.end(p) - p + 1;
            }
        }
        return n;
    }
}
