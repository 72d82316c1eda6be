package io.gpumem.policy;

import io.gpumem.policy.StitchAllocator.Arena;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Set;

/**
 * The stitch allocator's invariant checker ({@link StitchAllocator#checkInvariants}): recomputes from the blocks
 * what the page and block structures must hold (pins per mapping in a fixed arena, one block behind each pinned
 * multi-page mapping, the unpinned runs, no handle mapped twice, arenas tiled by their blocks, the free tree) and throws
 * {@link IllegalStateException} naming the first difference. Allocates freely: tests and benchmarks' set-up only.
 * The invariants are listed in policies.md §2.9.
 */
final class StitchInvariants {

    private StitchInvariants() {}

    static void check(StitchAllocator st) {
        long liveBytes = 0;
        for (StitchBlock b : st.liveBlocks()) {
            liveBytes += b.size;
        }
        require(
                liveBytes == st.counts.allocated,
                "allocated bytes " + st.counts.allocated + " but live blocks hold " + liveBytes);
        Set<Long> handles = new HashSet<>();
        long mapped = 0;
        List<PageUse> uses = new ArrayList<>(st.arenas.size());
        IdentityHashMap<Arena, PageUse> useOf = new IdentityHashMap<>();
        for (Arena a : st.arenas) {
            PageUse u = new PageUse(a);
            uses.add(u);
            useOf.put(a, u);
        }
        List<StitchBlock> holding = st.liveBlocks();
        holding.addAll(st.pendingFrees);
        for (StitchBlock b : holding) {
            PageUse u = useOf.get(b.arena);
            if (u == null) {
                throw broken("block 0x" + Long.toHexString(b.ptr) + " belongs to no arena of the allocator");
            }
            int[] e = u.pins;
            StitchBlock[] c = u.coveredBy;
            long off = b.ptr - u.arena.base;
            for (long p = off / st.page; p <= (off + b.size - 1) / st.page; p++) {
                require(
                        p < e.length,
                        "block 0x" + Long.toHexString(b.ptr) + " touches page " + p + ", past the " + e.length
                                + " pages its arena's arrays cover");
                e[(int) p]++;
                if (p * st.page >= off && (p + 1) * st.page <= off + b.size) {
                    c[(int) p] = b;
                }
            }
        }
        for (PageUse u : uses) {
            Arena a = u.arena;
            int[] e = u.pins;
            StitchBlock[] c = u.coveredBy;
            int pages = a.handle.length;
            boolean[] listed = listedPages(a);
            for (int p = 0; p < pages; p++) {
                if (a.handle[p] == 0) {
                    require(
                            e[p] == 0,
                            "page " + p + " of arena 0x" + Long.toHexString(a.base) + " is touched by " + e[p]
                                    + " blocks but not mapped");
                    require(!a.fixed || a.pins[p] == 0, "unmapped page " + p + " has pins");
                    require(!listed[p], "unmapped page " + p + " is listed as unpinned");
                    continue;
                }
                int s = a.mapStart[p];
                require(
                        s <= p && a.handle[s] == a.handle[p] && p < s + a.mapLength[s],
                        "page " + p + " outside its mapping");
                require(
                        listed[p] == (e[p] == 0),
                        "page " + p + " of arena 0x" + Long.toHexString(a.base) + " is touched by " + e[p]
                                + " blocks but " + (listed[p] ? "" : "not ") + "listed as unpinned");
                if (s == p) {
                    int n = a.mapLength[p];
                    mapped += n;
                    require(
                            !a.fixed || a.pins[p] == e[p],
                            "mapping at page " + p + " of arena 0x" + Long.toHexString(a.base) + " has "
                                    + (a.fixed ? a.pins[p] : 0) + " pins, " + e[p] + " blocks touch it");
                    require(handles.add(a.handle[p]), "physical handle " + a.handle[p] + " mapped twice");
                    for (int q = p + 1; q < p + n; q++) {
                        require(a.handle[q] == a.handle[p] && a.mapStart[q] == p, "mapping at page " + p + " broken");
                        require(
                                e[q] == e[p] && c[q] == c[p],
                                "multi-page mapping at page " + p + " is pinned by more than one block");
                    }
                    require(
                            n == 1 || e[p] == 0 || c[p] != null,
                            "multi-page mapping at page " + p + " pinned by a block that does not cover it");
                } else {
                    require(
                            !a.fixed || a.pins[p] == 0,
                            "page " + p + " inside a mapping holds pins (they live on its first page)");
                }
            }
            if (a.fixed) {
                long end = Long.MIN_VALUE;
                for (StitchBlock b : a.fixedBlocks.values()) {
                    require(b.ptr >= end, "fixed blocks overlap at 0x" + Long.toHexString(b.ptr));
                    end = b.ptr + b.size;
                }
                continue;
            }
            StitchBlock first = null;
            List<String> treeViolations = new ArrayList<>();
            a.freeBySize.checkShape("free index of arena 0x" + Long.toHexString(a.base), treeViolations);
            require(treeViolations.isEmpty(), String.join("; ", treeViolations));
            for (StitchBlock b : a.freeBySize.toList()) {
                require(b.free, "non-free block in the free index");
                // the index orders by (size, address) within one stream: every block must have the arena's
                require(
                        b.stream == a.stream,
                        "free block 0x" + Long.toHexString(b.ptr) + " has stream " + b.stream + ", its arena "
                                + a.stream);
                if (b.prev == null) {
                    first = b;
                }
            }
            for (StitchBlock b : holding) {
                if (b.arena == a && b.prev == null) {
                    first = b;
                }
            }
            long at = a.base;
            int frees = 0;
            for (StitchBlock b = first; b != null; b = b.next) {
                require(b.ptr == at, "blocks do not tile arena 0x" + Long.toHexString(a.base));
                require(b.next == null || b.next.prev == b, "broken block links");
                require(!(b.free && b.next != null && b.next.free), "two free neighbours");
                frees += b.free ? 1 : 0;
                at += b.size;
            }
            require(at == a.base + (long) a.pages * st.page, "blocks do not cover arena 0x" + Long.toHexString(a.base));
            require(
                    frees == a.freeBySize.size(),
                    "free index holds " + a.freeBySize.size() + " blocks, " + frees + " free");
        }
        require(
                mapped == st.mapper.mappedPages,
                "mapped page count " + st.mapper.mappedPages + " but " + mapped + " pages mapped");
    }

    /**
     * The pages an arena's unpinned runs list, checking the runs on the way: each listed once in the order (its
     * links mirrored, the tail last), indexed by its first and last page and by nothing else, all its pages mapped,
     * starting and ending on mapping boundaries (one mapping per run in a fixed arena), no page in two runs.
     */
    private static boolean[] listedPages(Arena a) {
        UnpinnedRuns runs = a.unpinned;
        int pages = a.handle.length;
        boolean[] listed = new boolean[pages];
        boolean[] isStart = new boolean[pages];
        String where = " of arena 0x" + Long.toHexString(a.base);
        int count = 0;
        require(runs.head() < 0 || runs.prev(runs.head()) < 0, "unpinned runs' head has a predecessor" + where);
        for (int lo = runs.head(); lo >= 0; lo = runs.next(lo)) {
            require(++count <= pages, "unpinned runs' order loops" + where);
            require(!isStart[lo], "unpinned run at page " + lo + where + " listed twice");
            isStart[lo] = true;
            int nx = runs.next(lo);
            require(nx >= 0 ? runs.prev(nx) == lo : runs.tail() == lo, "unpinned runs' links broken at page " + lo);
            int hi = runs.end(lo);
            require(hi >= lo && hi < pages, "unpinned run at page " + lo + where + " has no end");
            require(runs.startEndingAt(hi) == lo, "unpinned run " + lo + ".." + hi + where + " not found by its end");
            require(
                    a.handle[lo] != 0 && a.mapStart[lo] == lo,
                    "unpinned run " + lo + ".." + hi + where + " does not start a mapping");
            require(
                    a.handle[hi] != 0 && a.mapStart[hi] + a.mapLength[a.mapStart[hi]] - 1 == hi,
                    "unpinned run " + lo + ".." + hi + where + " does not end a mapping");
            require(!a.fixed || a.mapStart[hi] == lo, "unpinned run " + lo + ".." + hi + where + " is not one mapping");
            for (int p = lo; p <= hi; p++) {
                require(!listed[p], "page " + p + where + " in two unpinned runs");
                listed[p] = true;
            }
        }
        require(count > 0 || runs.tail() < 0, "unpinned runs empty but a tail" + where);
        for (int p = 0; p < pages; p++) {
            require(runs.end(p) < 0 || isStart[p], "page " + p + where + " starts an unpinned run that is not listed");
            require(
                    runs.startEndingAt(p) < 0
                            || (isStart[runs.startEndingAt(p)] && runs.end(runs.startEndingAt(p)) == p),
                    "page " + p + where + " ends an unpinned run that is not listed");
        }
        return listed;
    }

    /**
     * What the blocks say an arena's pages must hold: the pins each page should have, and the block that covers each
     * page whole (the one allowed to pin a multi-page mapping).
     */
    private static final class PageUse {
        final Arena arena;
        final int[] pins;
        final StitchBlock[] coveredBy;

        PageUse(Arena arena) {
            this.arena = arena;
            this.pins = new int[arena.handle.length];
            this.coveredBy = new StitchBlock[arena.handle.length];
        }
    }

    private static void require(boolean ok, String what) {
        if (!ok) {
            throw broken(what);
        }
    }

    private static IllegalStateException broken(String what) {
        return new IllegalStateException("stitch allocator invariant broken: " + what);
    }
}
