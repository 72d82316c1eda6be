package io.gpumem.report;

import io.gpumem.alloc.SizeRules;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.history.BlockInfo;
import io.gpumem.history.Frame;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.io.EntryFields;
import io.gpumem.trace.window.WindowStart;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Allocated and reserved bytes after every entry of one device trace, allocated bytes split by allocation
 * site, and the lifetimes of the blocks live at a given moment: the data behind the report's timeline and the
 * hover text of its segment maps.
 *
 * <p>Method: start from the window's rebuilt start state (its live blocks count as allocated, their site is
 * {@link Sites#BEFORE_TRACE}); an {@code alloc} adds its block size (the request rounded as the recorded
 * configuration rounds it: a whole-block take of an unsplittable remainder is not visible in a trace, so a
 * block can be up to 1 MiB larger than counted), a {@code free_completed} subtracts what its {@code alloc}
 * added; segment entries move reserved bytes exactly. An {@code alloc} at an address that is still live (a
 * trace with a lost free) first retires the old block.
 *
 * <p>Memory: nothing is kept per entry (a snapshot of a gigabyte has tens of millions of entries, and arrays of
 * them would outweigh the trace itself). Each question walks the trace again ({@link Walk}: the blocks open at
 * each moment, the bytes per site), holding only the blocks live at once: the constructor walks it once for the
 * peaks and each site's maximum, {@link #sample} twice (the points, then their split by site) and
 * {@link #lifetimesAfter} up to its moment and on to the frees of the blocks live then.
 *
 * <p>Invariants: allocated and reserved never go below zero in a consistent trace; the site ids are given in
 * the order the start blocks and then the trace's {@code alloc} entries first name them.
 */
final class Timeline {
    /** Marker in a live map for a block allocated before the trace. */
    static final int BEFORE = -1;

    final List<TraceEntry> trace;
    private final EntryFields fields;
    private final AllocatorConfig config;
    final long startAllocated;
    final long startReserved;
    /** Block size and site of blocks live at the start, by address. */
    final Map<Long, long[]> startBlocks = new HashMap<>();
    /** Entry that freed a block live at the start, by address. */
    final Map<Long, Integer> startFreedAt = new HashMap<>();

    final Sites sites;
    final int beforeSite;
    /** Index of the first entry after which allocated bytes peak, or −1 for an empty trace. */
    final int peakIndex;

    final long peakAllocated;
    final long peakReserved;
    /** Largest bytes each site held at any moment. */
    final long[] siteMax;

    /** The blocks live after the last entry, as the constructor's walk left them. */
    private final Map<Long, Open> liveAtEnd;

    Timeline(
            List<TraceEntry> trace,
            WindowStart start,
            AllocatorConfig config,
            Sites sites,
            Map<Long, List<Frame>> endFrames) {
        this.trace = trace;
        this.fields = EntryFields.of(trace);
        this.config = config;
        this.sites = sites;
        this.beforeSite = sites.id(Sites.BEFORE_TRACE);
        int n = trace.size();
        long alloc = 0;
        long res = 0;
        if (start != null) {
            for (SegmentInfo s : start.segments()) {
                res += s.totalSize();
                for (BlockInfo b : s.blocks()) {
                    if (b.isAllocated()) {
                        alloc += b.size();
                        List<Frame> frames = endFrames.get(b.address());
                        int site = frames != null && !frames.isEmpty() ? sites.of(frames) : beforeSite;
                        startBlocks.put(b.address(), new long[] {b.size(), site});
                    }
                }
            }
        }
        startAllocated = alloc;
        startReserved = res;
        Walk w = new Walk();
        long[] max = w.siteBytes.clone();
        int peak = -1;
        long peakAlloc = Long.MIN_VALUE;
        long peakRes = res;
        for (int i = 0; i < n; i++) {
            Open retired = w.step(i);
            if (retired != null && retired.entry == BEFORE) {
                startFreedAt.putIfAbsent(fields.addr(i), i);
            }
            if (w.allocated > peakAlloc) {
                peakAlloc = w.allocated;
                peak = i;
            }
            peakRes = Math.max(peakRes, w.reserved);
            if (fields.action(i) == TraceAction.ALLOC) {
                int s = w.open.get(fields.addr(i)).site;
                if (s >= max.length) {
                    max = Arrays.copyOf(max, Math.max(s + 1, max.length * 2));
                }
                max[s] = Math.max(max[s], w.siteBytes[s]);
            }
        }
        this.siteMax = Arrays.copyOf(max, sites.size() + 1);
        this.liveAtEnd = w.open;
        this.peakIndex = peak;
        this.peakAllocated = n == 0 ? startAllocated : Math.max(peakAlloc, startAllocated);
        this.peakReserved = peakRes;
    }

    /** A block open in a {@link Walk}: its alloc entry ({@link #BEFORE} for a start block), site and bytes. */
    private record Open(int entry, int site, long bytes) {}

    /**
     * One walk over the trace from the window's start: the blocks open after each entry by address, allocated and
     * reserved bytes, and the bytes each site holds (grown as sites appear).
     */
    private final class Walk {
        final Map<Long, Open> open = new HashMap<>();
        long allocated = startAllocated;
        long reserved = startReserved;
        long[] siteBytes = new long[sites.size() + 1];

        Walk() {
            for (Map.Entry<Long, long[]> b : startBlocks.entrySet()) {
                long[] v = b.getValue();
                open.put(b.getKey(), new Open(BEFORE, (int) v[1], v[0]));
                siteBytes[(int) v[1]] += v[0];
            }
        }

        /** Applies entry {@code i}; returns the block it retired, or null. */
        Open step(int i) {
            return switch (fields.action(i)) {
                case ALLOC -> {
                    long addr = fields.addr(i);
                    Open old = retire(addr);
                    int site = sites.of(fields.frames(i));
                    if (site >= siteBytes.length) {
                        siteBytes = Arrays.copyOf(siteBytes, Math.max(site + 1, siteBytes.length * 2));
                    }
                    long bytes = SizeRules.roundSize(Math.max(0, fields.size(i)), config);
                    open.put(addr, new Open(i, site, bytes));
                    allocated += bytes;
                    siteBytes[site] += bytes;
                    yield old;
                }
                case FREE_COMPLETED -> retire(fields.addr(i));
                case SEGMENT_ALLOC, SEGMENT_MAP -> {
                    reserved += fields.size(i);
                    yield null;
                }
                case SEGMENT_FREE, SEGMENT_UNMAP -> {
                    reserved -= fields.size(i);
                    yield null;
                }
                default -> null;
            };
        }

        private Open retire(long addr) {
            Open b = open.remove(addr);
            if (b != null) {
                allocated -= b.bytes;
                siteBytes[b.site] -= b.bytes;
            }
            return b;
        }
    }

    int entries() {
        return trace.size();
    }

    /**
     * The blocks live after entry {@code n} (−1: at the start), by address: {site, alloc entry ({@link #BEFORE} for a
     * start block), entry that frees it (−1: live at the end)}. One walk to {@code n}, then on until every one of
     * them is freed; after the last entry (the end state a report usually analyses), none: the constructor's walk
     * left them. A fresh map each call.
     */
    Map<Long, int[]> lifetimesAfter(int n) {
        int count = trace.size();
        int i = 0;
        Map<Long, Open> open = liveAtEnd;
        if (n < count - 1 || n < 0) {
            Walk w = new Walk();
            for (; i <= n && i < count; i++) {
                w.step(i);
            }
            open = w.open;
        } else {
            i = count;
        }
        Map<Long, int[]> live = new HashMap<>();
        for (Map.Entry<Long, Open> b : open.entrySet()) {
            live.put(b.getKey(), new int[] {b.getValue().site, b.getValue().entry, -1});
        }
        int pending = live.size();
        for (; i < count && pending > 0; i++) {
            TraceAction a = fields.action(i);
            if (a == TraceAction.ALLOC || a == TraceAction.FREE_COMPLETED) {
                int[] b = live.get(fields.addr(i));
                if (b != null && b[2] < 0) {
                    b[2] = i;
                    pending--;
                }
            }
        }
        return live;
    }

    /**
     * The timeline cut to at most {@code maxPoints} points plus one per {@code oom} entry, however long the trace
     * (what keeps a report of millions of entries as quick to draw as one of thousands): each point is the entry of
     * its bucket where allocated bytes are highest, with the bucket's highest reserved bytes, so the peak is kept
     * exactly ({@link #peakIndex}, the first entry at the peak, is its bucket's first maximum); every {@code oom}
     * entry is a point too, with its own bytes, where it is not its bucket's point already. Allocated bytes are
     * split over the {@code topSites} sites that held most at any moment, the rest summed as "other" (the last
     * column). Two walks: the points and their bytes, then each point's split by site.
     */
    Sampled sample(int maxPoints, int topSites) {
        int n = trace.size();
        Integer[] order = new Integer[siteMax.length];
        for (int i = 0; i < order.length; i++) {
            order[i] = i;
        }
        Arrays.sort(order, (x, y) -> Long.compare(siteMax[y], siteMax[x]));
        int k = 0;
        int[] column = new int[siteMax.length];
        Arrays.fill(column, -1);
        int[] top = new int[Math.min(topSites, order.length)];
        for (int s : order) {
            if (k < top.length && siteMax[s] > 0 && s < sites.size()) {
                column[s] = k;
                top[k++] = s;
            }
        }
        top = Arrays.copyOf(top, k);
        int bucket = Math.max(1, Math.ceilDiv(Math.max(n, 1), maxPoints));
        int buckets = n == 0 ? 0 : Math.ceilDiv(n, bucket);
        // the points in entry order: each bucket's first maximum of allocated bytes, and (when buckets are longer than
        // one entry) every oom entry that is not its bucket's point, with its own bytes
        int[] index = new int[buckets + 8];
        long[] alloc = new long[index.length];
        long[] res = new long[index.length];
        int points = 0;
        Walk w = new Walk();
        int[] ooms = new int[8];
        long[] oomAlloc = new long[8];
        long[] oomRes = new long[8];
        for (int p = 0; p < buckets; p++) {
            int best = -1;
            long bestAlloc = 0;
            long maxRes = 0;
            int oomCount = 0;
            for (int i = p * bucket; i < Math.min(n, (p + 1) * bucket); i++) {
                w.step(i);
                if (best < 0 || w.allocated > bestAlloc) {
                    best = i;
                    bestAlloc = w.allocated;
                }
                maxRes = i == p * bucket ? w.reserved : Math.max(maxRes, w.reserved);
                if (bucket > 1 && fields.action(i) == TraceAction.OOM) {
                    if (oomCount == ooms.length) {
                        ooms = Arrays.copyOf(ooms, oomCount * 2);
                        oomAlloc = Arrays.copyOf(oomAlloc, oomCount * 2);
                        oomRes = Arrays.copyOf(oomRes, oomCount * 2);
                    }
                    ooms[oomCount] = i;
                    oomAlloc[oomCount] = w.allocated;
                    oomRes[oomCount++] = w.reserved;
                }
            }
            if (points + oomCount + 1 > index.length) {
                int grown = Math.max(points + oomCount + 1, index.length * 2);
                index = Arrays.copyOf(index, grown);
                alloc = Arrays.copyOf(alloc, grown);
                res = Arrays.copyOf(res, grown);
            }
            boolean placed = false;
            for (int o = 0; o <= oomCount; o++) {
                if (!placed && (o == oomCount || ooms[o] >= best)) {
                    index[points] = best;
                    alloc[points] = bestAlloc;
                    res[points++] = maxRes;
                    placed = true;
                }
                if (o < oomCount && ooms[o] != best) { // an OOM that is not its bucket's point: its own point, exact
                    index[points] = ooms[o];
                    alloc[points] = oomAlloc[o];
                    res[points++] = oomRes[o];
                }
            }
        }
        index = Arrays.copyOf(index, points);
        alloc = Arrays.copyOf(alloc, points);
        res = Arrays.copyOf(res, points);
        long[][] stack = new long[points][k + 1];
        Walk split = new Walk();
        int p = 0;
        for (int i = 0; i < n && p < points; i++) {
            split.step(i);
            if (i == index[p]) {
                long[] siteBytes = split.siteBytes;
                for (int s = 0; s < siteBytes.length; s++) {
                    if (siteBytes[s] != 0) {
                        stack[p][s < column.length && column[s] >= 0 ? column[s] : k] += siteBytes[s];
                    }
                }
                p++;
            }
        }
        return new Sampled(index, alloc, res, top, stack);
    }

    /**
     * A downsampled timeline, point by point: {@code index} (entry index of each point), {@code allocated}
     * (allocated bytes at each point), {@code reserved} (highest reserved bytes in each point's bucket), {@code sites}
     * (the site ids of the stack columns) and {@code stack} (per point, bytes per column: one per site in
     * {@code sites}, then "other"). A class rather than a record: its components are arrays, which a record would
     * compare by identity in equals.
     */
    static final class Sampled {
        private final int[] index;
        private final long[] allocated;
        private final long[] reserved;
        private final int[] sites;
        private final long[][] stack;

        Sampled(int[] index, long[] allocated, long[] reserved, int[] sites, long[][] stack) {
            this.index = index;
            this.allocated = allocated;
            this.reserved = reserved;
            this.sites = sites;
            this.stack = stack;
        }

        int[] index() {
            return index;
        }

        long[] allocated() {
            return allocated;
        }

        long[] reserved() {
            return reserved;
        }

        int[] sites() {
            return sites;
        }

        long[][] stack() {
            return stack;
        }
    }
}
