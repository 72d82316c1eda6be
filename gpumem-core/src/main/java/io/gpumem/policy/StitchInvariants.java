package io.gpumem.policy;

import io.gpumem.policy.StitchAllocator.Arena;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Set;

/**
 * The stitch allocator's invariant checker ({@link StitchAllocator#checkInvariants}): recomputes from the blocks
 * what the page and block structures must hold (pins per mapping, one block behind each pinned multi-page mapping,
 * the unpinned list, no handle mapped twice, arenas tiled by their blocks, the free tree) and throws
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
        require(liveBytes == st.allocated, "allocated bytes " + st.allocated + " but live blocks hold " + liveBytes);
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
            boolean[] onList = new boolean[a.pins.length];
            int listed = 0;
            for (int p = a.unpinned.head(); p >= 0; p = a.unpinned.next(p)) {
                require(!onList[p], "mapping listed twice");
                onList[p] = true;
                require(a.unpinned.next(p) >= 0 || a.unpinned.tail() == p, "unpinned list tail wrong");
                listed++;
            }
            for (int p = 0; p < a.pins.length; p++) {
                if (a.handle[p] == 0) {
                    require(
                            e[p] == 0,
                            "page " + p + " of arena 0x" + Long.toHexString(a.base) + " is touched by " + e[p]
                                    + " blocks but not mapped");
                    require(a.pins[p] == 0, "unmapped page " + p + " has pins");
                    require(!onList[p], "unmapped page " + p + " on the unpinned list");
                    continue;
                }
                int s = a.mapStart[p];
                require(
                        s <= p && a.handle[s] == a.handle[p] && p < s + a.mapLength[s],
                        "page " + p + " outside its mapping");
                if (s == p) {
                    int n = a.mapLength[p];
                    mapped += n;
                    require(
                            a.pins[p] == e[p],
                            "mapping at page " + p + " of arena 0x" + Long.toHexString(a.base) + " has " + a.pins[p]
                                    + " pins, " + e[p] + " blocks touch it");
                    require(handles.add(a.handle[p]), "physical handle " + a.handle[p] + " mapped twice");
                    for (int q = p + 1; q < p + n; q++) {
                        require(a.handle[q] == a.handle[p] && a.mapStart[q] == p, "mapping at page " + p + " broken");
                        require(
                                e[q] == e[p] && c[q] == c[p],
                                "multi-page mapping at page " + p + " is pinned by more than one block");
                    }
                    require(
                            n == 1 || a.pins[p] == 0 || c[p] != null,
                            "multi-page mapping at page " + p + " pinned by a block that does not cover it");
                    require(onList[p] == (a.pins[p] == 0), "unpinned list wrong at page " + p);
                } else {
                    require(a.pins[p] == 0, "page " + p + " inside a mapping holds pins (they live on its first page)");
                    require(!onList[p], "page " + p + " inside a mapping is listed");
                }
            }
            require(listed == 0 || a.unpinned.next(a.unpinned.tail()) < 0, "unpinned list tail wrong");
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
            require(
                    at == a.base + (long) a.pins.length * st.page,
                    "blocks do not cover arena 0x" + Long.toHexString(a.base));
            require(
                    frees == a.freeBySize.size(),
                    "free index holds " + a.freeBySize.size() + " blocks, " + frees + " free");
        }
        require(mapped == st.mappedPages, "mapped page count " + st.mappedPages + " but " + mapped + " pages mapped");
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
            this.pins = new int[arena.pins.length];
            this.coveredBy = new StitchBlock[arena.pins.length];
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
