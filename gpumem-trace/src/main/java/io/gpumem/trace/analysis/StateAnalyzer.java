package io.gpumem.trace.analysis;

import io.gpumem.alloc.Pool;
import io.gpumem.alloc.SizeRules;
import io.gpumem.history.BlockInfo;
import io.gpumem.history.SegmentInfo;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * Computes the accounting, free-space and waste figures of a {@link MemoryState} and asks
 * {@link DiagnosisRules} for a verdict.
 *
 * <p>Algorithm: one pass over segments and blocks. Per pool it sums reserved, allocated, active, requested
 * and free bytes; a free block counts as <em>inactive split</em> when its non-expandable segment holds an
 * active block (PyTorch's definition: free neighbours always merge, so a free block with neighbours is
 * pinned by them), and as <em>releasable</em> when its segment is wholly free (or, in an expandable
 * segment, for the whole pages inside it, allocator.md §5.4). Free space is grouped per (pool, stream) because a
 * cached block never serves another pool or stream. Waste per segment is its free bytes plus the
 * rounding slack of its allocated blocks; the top segments are kept.
 *
 * <p>Stateless and thread-safe.
 */
public final class StateAnalyzer {
    private final int topSegments;

    /** An analyzer that reports the 5 most wasteful segments. */
    public StateAnalyzer() {
        this(5);
    }

    /** An analyzer that reports the {@code topSegments} most wasteful segments. */
    public StateAnalyzer(int topSegments) {
        if (topSegments < 0) {
            throw new IllegalArgumentException("topSegments must be >= 0, got " + topSegments);
        }
        this.topSegments = topSegments;
    }

    public StateAnalysis analyze(MemoryState state) {
        Map<Pool, Accumulator> pools = new EnumMap<>(Pool.class);
        for (Pool p : Pool.values()) {
            pools.put(p, new Accumulator(p.statName()));
        }
        Map<Pool, Map<Long, long[]>> free = new EnumMap<>(Pool.class); // [largest, total, count]
        List<SegmentWaste> wastes = new ArrayList<>();
        for (SegmentInfo seg : state.segments()) {
            Accumulator acc = pools.get(seg.pool());
            acc.segments++;
            boolean anyActive = !seg.isFullyFree();
            long segAllocated = 0;
            long segFree = 0;
            long segSlack = 0;
            for (BlockInfo b : seg.blocks()) {
                acc.reserved += b.size();
                switch (b.state()) {
                    case ACTIVE_ALLOCATED -> {
                        acc.allocated += b.size();
                        acc.active += b.size();
                        acc.requested += Math.min(Math.max(0, b.requestedSize()), b.size());
                        segAllocated += b.size();
                        segSlack += b.internalSlack();
                    }
                    case ACTIVE_PENDING_FREE -> acc.active += b.size();
                    case INACTIVE -> {
                        acc.cachedFree += b.size();
                        acc.freeBlocks++;
                        acc.largestFree = Math.max(acc.largestFree, b.size());
                        segFree += b.size();
                        if (!seg.expandable() && anyActive) {
                            acc.inactiveSplit += b.size();
                        }
                        if (seg.expandable()) {
                            acc.releasable += wholePages(seg, b);
                        }
                        long[] f = free.computeIfAbsent(seg.pool(), k -> new TreeMap<>())
                                .computeIfAbsent(seg.stream(), k -> new long[3]);
                        f[0] = Math.max(f[0], b.size());
                        f[1] += b.size();
                        f[2]++;
                    }
                    case UNKNOWN -> throw new IllegalStateException("MemoryState refuses UNKNOWN blocks");
                }
            }
            if (!seg.expandable() && !anyActive) {
                acc.releasable += seg.totalSize();
            }
            wastes.add(new SegmentWaste(
                    seg.address(),
                    seg.pool(),
                    seg.stream(),
                    seg.expandable(),
                    seg.totalSize(),
                    segAllocated,
                    segFree,
                    segSlack,
                    anyActive));
        }
        PoolUsage small = pools.get(Pool.SMALL).toUsage();
        PoolUsage large = pools.get(Pool.LARGE).toUsage();
        PoolUsage all = sum(small, large);

        List<StreamFree> streamFree = new ArrayList<>();
        free.forEach((pool, byStream) ->
                byStream.forEach((stream, f) -> streamFree.add(new StreamFree(pool, stream, f[0], f[1], (int) f[2]))));
        streamFree.sort(Comparator.comparingLong(StreamFree::largestFree)
                .reversed()
                .thenComparing(StreamFree::pool)
                .thenComparingLong(StreamFree::stream));

        wastes.removeIf(w -> w.waste() == 0);
        wastes.sort(Comparator.comparingLong(SegmentWaste::waste).reversed().thenComparingLong(SegmentWaste::address));
        List<SegmentWaste> top = wastes.subList(0, Math.min(topSegments, wastes.size()));

        StateAnalysis partial = new StateAnalysis(state, all, small, large, streamFree, top, null);
        return new StateAnalysis(state, all, small, large, streamFree, top, DiagnosisRules.diagnose(partial));
    }

    /** Bytes of the whole expandable pages inside a free block, pages counted from the segment's start. */
    private static long wholePages(SegmentInfo seg, BlockInfo b) {
        long page = SizeRules.expandablePageSize(seg.pool());
        long offset = b.address() - seg.address();
        long first = Math.ceilDiv(offset, page) * page;
        long last = Math.floorDiv(offset + b.size(), page) * page;
        return Math.max(0, last - first);
    }

    private static PoolUsage sum(PoolUsage a, PoolUsage b) {
        return new PoolUsage(
                "all",
                a.segments() + b.segments(),
                a.reserved() + b.reserved(),
                a.allocated() + b.allocated(),
                a.active() + b.active(),
                a.requested() + b.requested(),
                a.inactiveSplit() + b.inactiveSplit(),
                a.cachedFree() + b.cachedFree(),
                a.releasable() + b.releasable(),
                Math.max(a.largestFree(), b.largestFree()),
                a.freeBlocks() + b.freeBlocks());
    }

    private static final class Accumulator {
        final String scope;
        int segments;
        long reserved;
        long allocated;
        long active;
        long requested;
        long inactiveSplit;
        long cachedFree;
        long releasable;
        long largestFree;
        int freeBlocks;

        Accumulator(String scope) {
            this.scope = scope;
        }

        PoolUsage toUsage() {
            return new PoolUsage(
                    scope,
                    segments,
                    reserved,
                    allocated,
                    active,
                    requested,
                    inactiveSplit,
                    cachedFree,
                    releasable,
                    largestFree,
                    freeBlocks);
        }
    }
}
