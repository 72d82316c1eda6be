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

import io.gpumem.stats.StatKind;
import io.gpumem.stats.StatType;
import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Set;

/**
 * Verifies an {@link AllocatorCore} from scratch: rebuilds the block graph from every place a block can be
 * (both trees of both pools, the allocated-block index, the event queues), walks every segment and recomputes
 * every current stat. Collects all violations and reports them together.
 *
 * <p>Checked: links are symmetric and blocks tile each segment without gap or overlap; blocks of a segment
 * share pool, stream and segment kind; no two neighbours are mergeable (both available with equal
 * {@code mapped}); each pool's size tree holds exactly its free mapped blocks in strictly increasing order, its
 * address tree exactly its unmapped blocks; the index holds exactly the allocated blocks; expandable blocks
 * agree with the segment's page table; every current value of every array stat (all, small, large) and the
 * oversize stats equal their recomputation; all = small + large; reserved = total_allocated_memory;
 * reserved − allocated = cached (free + pending bytes); peak ≥ current; and, while accumulated stats were never
 * reset, current = allocated − freed.
 */
final class InvariantChecker {
    private InvariantChecker() {}

    static void check(AllocatorCore core) {
        List<String> v = new ArrayList<>();
        Set<Block> pending = SnapshotBuilder.pendingBlocks(core);
        Set<Block> seen = Collections.newSetFromMap(new IdentityHashMap<>());
        List<Block> starts = new ArrayList<>();
        for (BlockPool pool : new BlockPool[] {core.smallBlocks, core.largeBlocks}) {
            checkSizeOrder(pool.blocks, pool.kind.segmentType() + " free set", v);
            pool.blocks.checkTrees(pool.kind.segmentType() + " free set", v);
            pool.unmapped.checkShape(pool.kind.segmentType() + " unmapped tree", v);
            starts.addAll(pool.blocks.toList());
            starts.addAll(pool.unmapped.toList());
        }
        core.allocatedBlocks().forEach(starts::add);
        starts.addAll(pending);

        Set<Block> heads = Collections.newSetFromMap(new IdentityHashMap<>());
        for (Block b : starts) {
            Block h = b;
            int guard = 0;
            while (h.prev != null && guard++ < 10_000_000) {
                h = h.prev;
            }
            heads.add(h);
        }

        long[][] cur = new long[DeviceStats.ARRAY_STATS][3];
        long oversizeAllocations = 0;
        long oversizeSegments = 0;
        long cached = 0;
        long freeInTrees = 0;
        long unmappedInTrees = 0;
        long allocatedCount = 0;
        long maxSplit = core.config.maxSplitSize();
        Set<ExpandableSegment> segmentsSeen = Collections.newSetFromMap(new IdentityHashMap<>());

        for (Block head : heads) {
            BlockPool pool = head.pool;
            int type = pool == null ? 0 : pool.statType;
            ExpandableSegment es = head.expandable;
            String seg = "segment 0x" + Long.toHexString(head.ptr);
            if (es != null) {
                segmentsSeen.add(es);
                if (head.ptr != es.base) {
                    v.add(seg + ": head is not at the reservation base 0x" + Long.toHexString(es.base));
                }
            }
            long total = 0;
            int mappedPages = 0;
            boolean split = head.next != null;
            for (Block b = head; b != null; b = b.next) {
                seen.add(b);
                String at = seg + " block 0x" + Long.toHexString(b.ptr);
                if (b.size <= 0) {
                    v.add(at + ": non-positive size " + b.size);
                }
                if (b.next != null) {
                    if (b.next.prev != b) {
                        v.add(at + ": next.prev does not point back");
                    }
                    if (b.next.ptr != b.ptr + b.size) {
                        v.add(at + ": gap or overlap before next block 0x" + Long.toHexString(b.next.ptr));
                    }
                    if (b.isAvailable() && b.next.isAvailable() && b.mapped == b.next.mapped) {
                        v.add(at + ": mergeable free neighbours not merged");
                    }
                }
                if (b.pool != pool || b.stream != head.stream || b.expandable != es) {
                    v.add(at + ": pool, stream or segment differs from the segment head");
                }
                if (!b.mapped && es == null) {
                    v.add(at + ": unmapped block in a cudaMalloc'd segment");
                }
                if (es != null) {
                    mappedPages += checkPages(es, b, at, v);
                }
                boolean isPending = pending.contains(b);
                if (b.sessionSlot >= 0 && (!b.allocated || core.session == null)) {
                    v.add(at + ": names slot " + b.sessionSlot + " without an open session holding it allocated");
                }
                if (b.allocated) {
                    allocatedCount++;
                    if (core.allocatedBlocks().get(b.ptr) != b) {
                        v.add(at + ": allocated but not indexed");
                    }
                    if (b.container != null) {
                        v.add(at + ": allocated but in a tree");
                    }
                } else if (isPending) {
                    if (b.container != null || b.eventCount <= 0) {
                        v.add(at + ": pending block in a tree or without events");
                    }
                } else if (b.mapped) {
                    freeInTrees++;
                    if (!pool.blocks.contains(b)) {
                        v.add(at + ": free block missing from the " + pool.kind.segmentType() + " free tree");
                    }
                    if (b.eventCount != 0 || b.hasStreamUses()) {
                        v.add(at + ": free block with events or stream uses");
                    }
                } else {
                    unmappedInTrees++;
                    if (b.container != pool.unmapped) {
                        v.add(at + ": unmapped block missing from the unmapped tree");
                    }
                }
                boolean active = b.allocated || isPending;
                if (b.allocated) {
                    add(cur, ALLOCATION, type, 1);
                    add(cur, ALLOCATED_BYTES, type, b.size);
                    if (b.size >= maxSplit) {
                        oversizeAllocations++;
                    }
                }
                if (active) {
                    add(cur, ACTIVE, type, 1);
                    add(cur, ACTIVE_BYTES, type, b.size);
                    add(cur, REQUESTED_BYTES, type, b.requestedSize);
                }
                if (!b.allocated && b.mapped) {
                    cached += b.size;
                }
                if (!active && b.mapped && es == null && split) {
                    add(cur, INACTIVE_SPLIT, type, 1);
                    add(cur, INACTIVE_SPLIT_BYTES, type, b.size);
                }
                total += b.size;
            }
            if (es == null) {
                add(cur, SEGMENT, type, 1);
                add(cur, RESERVED_BYTES, type, total);
                if (total >= maxSplit) {
                    oversizeSegments++;
                }
            } else {
                if (total != es.size()) {
                    v.add(seg + ": blocks cover " + total + " bytes of a " + es.size() + "-byte reservation");
                }
                if (mappedPages != es.mappedPages()) {
                    v.add(seg + ": blocks map " + mappedPages + " pages, segment has " + es.mappedPages());
                }
                add(cur, RESERVED_BYTES, type, (long) es.mappedPages() * es.pageSize);
            }
        }

        for (BlockPool pool : new BlockPool[] {core.smallBlocks, core.largeBlocks}) {
            for (Block b : pool.blocks.toList()) {
                if (!seen.contains(b)) {
                    v.add(pool.kind.segmentType() + " free tree holds a block outside every segment: " + b);
                }
            }
        }
        if (freeInTrees != core.smallBlocks.blocks.size() + core.largeBlocks.blocks.size()) {
            v.add("free trees hold " + (core.smallBlocks.blocks.size() + core.largeBlocks.blocks.size())
                    + " blocks, segments have " + freeInTrees + " free mapped blocks");
        }
        if (unmappedInTrees != core.smallBlocks.unmapped.size() + core.largeBlocks.unmapped.size()) {
            v.add("unmapped trees disagree with the segments' unmapped blocks");
        }
        if (allocatedCount != core.allocatedBlocks().size()) {
            v.add("index holds " + core.allocatedBlocks().size() + " blocks, segments have " + allocatedCount
                    + " allocated");
        }
        Set<ExpandableSegment> listed = Collections.newSetFromMap(new IdentityHashMap<>());
        listed.addAll(core.expandableSegments);
        if (!segmentsSeen.equals(listed) || listed.size() != core.expandableSegments.size()) {
            v.add("expandable segment list (" + core.expandableSegments.size() + ") disagrees with the blocks ("
                    + segmentsSeen.size() + ")");
        }
        long pendingEvents = 0;
        for (Block b : pending) {
            pendingEvents += b.eventCount;
        }
        if (pendingEvents != core.events.pendingCount()) {
            v.add("event queues hold " + core.events.pendingCount() + " events, pending blocks expect "
                    + pendingEvents);
        }

        DeviceStats s = core.stats;
        // an uncounted copy (a capacity-search probe's) keeps no figures to check
        if (s.counting()) {
            for (int stat = 0; stat < DeviceStats.ARRAY_STATS; stat++) {
                long small = cur[stat][DeviceStats.SMALL_POOL];
                long large = cur[stat][DeviceStats.LARGE_POOL];
                expect(
                        v,
                        StatKind.values()[stat].key() + ".small_pool.current",
                        s.current(stat, DeviceStats.SMALL_POOL),
                        small);
                expect(
                        v,
                        StatKind.values()[stat].key() + ".large_pool.current",
                        s.current(stat, DeviceStats.LARGE_POOL),
                        large);
                expect(
                        v,
                        StatKind.values()[stat].key() + ".all.current",
                        s.current(stat, DeviceStats.ALL),
                        small + large);
                for (int type = 0; type < 3; type++) {
                    String key = StatKind.values()[stat].key() + "." + StatType.values()[type].key();
                    if (s.peak(stat, type) < s.current(stat, type)) {
                        v.add(key + ": peak " + s.peak(stat, type) + " below current " + s.current(stat, type));
                    }
                    if (!core.accumulatedReset
                            && s.current(stat, type) != s.allocated(stat, type) - s.freed(stat, type)) {
                        v.add(key + ": current " + s.current(stat, type) + " != allocated − freed ("
                                + s.allocated(stat, type) + " − " + s.freed(stat, type) + ")");
                    }
                }
            }
            if (core.config.maxSplitSizeReported() == core.maxSplitSizeAtCreation) {
                expect(v, "oversize_allocations.current", s.oversizeAllocationsCurrent(), oversizeAllocations);
                expect(v, "oversize_segments.current", s.oversizeSegmentsCurrent(), oversizeSegments);
            }
        }
        long reserved = core.reservedBytesNow();
        long allocated = core.allocatedBytesNow();
        expect(v, "total_allocated_memory", core.totalAllocatedMemory, reserved);
        expect(v, "reserved − allocated (cached bytes)", reserved - allocated, cached);

        if (!v.isEmpty()) {
            throw new IllegalStateException(
                    "allocator invariants violated (" + v.size() + "):\n  " + String.join("\n  ", v));
        }
    }

    private static void add(long[][] cur, int stat, int type, long amount) {
        cur[stat][type] += amount;
    }

    private static void expect(List<String> v, String what, long actual, long expected) {
        if (actual != expected) {
            v.add(what + " is " + actual + ", recomputed " + expected);
        }
    }

    /** Checks a block against the page table; returns the number of pages it maps. */
    private static int checkPages(ExpandableSegment es, Block b, String at, List<String> v) {
        int first = es.pageFloor(b.ptr);
        int end = es.pageCeil(b.ptr + b.size);
        if (!b.mapped) {
            if (es.pageAddress(first) != b.ptr || es.pageAddress(end) != b.ptr + b.size) {
                v.add(at + ": unmapped block not page-aligned");
            }
            int covered = Math.min(end, es.coveredPages()); // pages past the handle table are never mapped
            for (int i = first; i < covered; i++) {
                if (es.isPageMapped(i)) {
                    v.add(at + ": unmapped block over mapped page " + i);
                    break;
                }
            }
            return 0;
        }
        int owned = 0;
        for (int i = first; i < end; i++) {
            if (!es.isPageMapped(i)) {
                v.add(at + ": mapped block over unmapped page " + i);
                break;
            }
            // count each page once: by the block that contains its first byte
            long pageStart = es.pageAddress(i);
            if (pageStart >= b.ptr && pageStart < b.ptr + b.size) {
                owned++;
            }
        }
        return owned;
    }

    private static void checkSizeOrder(SizeOrderedBlocks set, String name, List<String> v) {
        Block prev = null;
        int n = 0;
        for (Block b = set.first(); b != null; b = set.next(b)) {
            SizeOrderedBlocks.Lane lane = b.lane;
            if (!set.contains(b)
                    || b.sizeClass != SizeOrderedBlocks.sizeClass(b.size)
                    || lane == null
                    || lane.stream != b.stream) {
                v.add(name + ": block filed in the wrong place: " + b);
            }
            if (prev != null) {
                int c = Long.compareUnsigned(prev.stream, b.stream);
                boolean ok = c < 0
                        || (c == 0
                                && (prev.size < b.size
                                        || (prev.size == b.size && Long.compareUnsigned(prev.ptr, b.ptr) < 0)));
                if (!ok) {
                    v.add(name + ": out of order at " + b);
                }
                if (set.prev(b) != prev) {
                    v.add(name + ": prev disagrees with next at " + b);
                }
            }
            prev = b;
            n++;
        }
        if (n != set.size()) {
            v.add(name + ": walked " + n + " blocks, size says " + set.size());
        }
    }
}
