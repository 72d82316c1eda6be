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
 * site, and each request's lifetime: the data behind the report's timeline and the hover text of its
 * segment maps.
 *
 * <p>Method: start from the window's rebuilt start state (its live blocks count as allocated, their site is
 * {@link Sites#BEFORE_TRACE}); an {@code alloc} adds its block size (the request rounded as the recorded
 * configuration rounds it: a whole-block take of an unsplittable remainder is not visible in a trace, so a
 * block can be up to 1 MiB larger than counted), a {@code free_completed} subtracts what its {@code alloc}
 * added; segment entries move reserved bytes exactly. An {@code alloc} at an address that is still live (a
 * trace with a lost free) first retires the old block.
 *
 * <p>Invariants: arrays are indexed by entry; {@code allocSite[i]} and {@code freedAt[i]} are meaningful only
 * for {@code alloc} entries ({@code freedAt} −1 when the block is live at the end); allocated and reserved
 * never go below zero in a consistent trace.
 */
final class Timeline {
    /** Marker in a live map for a block allocated before the trace. */
    static final int BEFORE = -1;

    final List<TraceEntry> trace;
    /** The trace's columns: every pass reads them, no record built per entry. */
    private final EntryFields fields;

    final long startAllocated;
    final long startReserved;
    final long[] allocated;
    final long[] reserved;
    final int[] allocSite;
    final long[] allocSize;
    final int[] freedAt;
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

    /** The blocks live after the last entry, as the pass that measured the levels left them. */
    private final Map<Long, Integer> liveAtEnd;

    Timeline(
            List<TraceEntry> trace,
            WindowStart start,
            AllocatorConfig config,
            Sites sites,
            Map<Long, List<Frame>> endFrames) {
        this.trace = trace;
        this.fields = EntryFields.of(trace);
        this.sites = sites;
        this.beforeSite = sites.id(Sites.BEFORE_TRACE);
        int n = trace.size();
        allocated = new long[n];
        reserved = new long[n];
        allocSite = new int[n];
        allocSize = new long[n];
        freedAt = new int[n];
        Arrays.fill(allocSite, -1);
        Arrays.fill(freedAt, -1);
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
        for (int i = 0; i < n; i++) {
            if (fields.action(i) == TraceAction.ALLOC) {
                allocSite[i] = sites.of(fields.frames(i));
                allocSize[i] = SizeRules.roundSize(Math.max(0, fields.size(i)), config);
            }
        }
        long[] siteBytes = new long[sites.size() + 1];
        siteMax = new long[sites.size() + 1];
        Map<Long, Integer> open = openAtStart();
        int peak = -1;
        long peakAlloc = Long.MIN_VALUE;
        long peakRes = res;
        for (long[] b : startBlocks.values()) {
            siteBytes[(int) b[1]] += b[0];
        }
        maxInto(siteBytes);
        for (int i = 0; i < n; i++) {
            TraceAction action = fields.action(i);
            switch (action) {
                case ALLOC -> {
                    long addr = fields.addr(i);
                    alloc -= retire(open, addr, i, siteBytes);
                    open.put(addr, i);
                    alloc += allocSize[i];
                    siteBytes[allocSite[i]] += allocSize[i];
                }
                case FREE_COMPLETED -> alloc -= retire(open, fields.addr(i), i, siteBytes);
                case SEGMENT_ALLOC, SEGMENT_MAP -> res += fields.size(i);
                case SEGMENT_FREE, SEGMENT_UNMAP -> res -= fields.size(i);
                default -> {}
            }
            allocated[i] = alloc;
            reserved[i] = res;
            if (alloc > peakAlloc) {
                peakAlloc = alloc;
                peak = i;
            }
            peakRes = Math.max(peakRes, res);
            if (action == TraceAction.ALLOC) {
                int s = allocSite[i];
                siteMax[s] = Math.max(siteMax[s], siteBytes[s]);
            }
        }
        this.liveAtEnd = open;
        this.peakIndex = peak;
        this.peakAllocated = n == 0 ? startAllocated : Math.max(peakAlloc, startAllocated);
        this.peakReserved = peakRes;
    }

    private void maxInto(long[] siteBytes) {
        for (int s = 0; s < siteBytes.length; s++) {
            siteMax[s] = Math.max(siteMax[s], siteBytes[s]);
        }
    }

    private Map<Long, Integer> openAtStart() {
        Map<Long, Integer> open = new HashMap<>();
        for (Long addr : startBlocks.keySet()) {
            open.put(addr, BEFORE);
        }
        return open;
    }

    /** Closes the block open at {@code addr} (if any) at entry {@code i}; returns the bytes it held. */
    private long retire(Map<Long, Integer> open, long addr, int i, long[] siteBytes) {
        Integer a = open.remove(addr);
        if (a == null) {
            return 0;
        }
        if (a == BEFORE) {
            long[] b = startBlocks.get(addr);
            startFreedAt.putIfAbsent(addr, i);
            if (siteBytes != null) {
                siteBytes[(int) b[1]] -= b[0];
            }
            return b[0];
        }
        freedAt[a] = i;
        if (siteBytes != null) {
            siteBytes[allocSite[a]] -= allocSize[a];
        }
        return allocSize[a];
    }

    int entries() {
        return trace.size();
    }

    /**
     * The blocks live after entry {@code n} (−1: at the start): address to alloc entry, or {@link #BEFORE}. After
     * the last entry (the end state a report usually analyses) it is what the levels' pass left, with no pass of
     * its own.
     */
    Map<Long, Integer> liveAfter(int n) {
        if (n >= trace.size() - 1 && n >= 0) {
            return new HashMap<>(liveAtEnd);
        }
        Map<Long, Integer> open = openAtStart();
        for (int i = 0; i <= n && i < trace.size(); i++) {
            TraceAction action = fields.action(i);
            if (action == TraceAction.ALLOC) {
                long addr = fields.addr(i);
                open.remove(addr);
                open.put(addr, i);
            } else if (action == TraceAction.FREE_COMPLETED) {
                open.remove(fields.addr(i));
            }
        }
        return open;
    }

    /**
     * The timeline cut to at most {@code maxPoints} points plus one per {@code oom} entry, however long the trace
     * (what keeps a report of millions of entries as quick to draw as one of thousands): each point is the entry of
     * its bucket where allocated bytes are highest, with the bucket's highest reserved bytes, so the peak is kept
     * exactly ({@link #peakIndex}, the first entry at the peak, is its bucket's first maximum); every {@code oom}
     * entry is a point too, with its own bytes, where it is not its bucket's point already. Allocated bytes are
     * split over the {@code topSites} sites that held most at any moment, the rest summed as "other" (the last
     * column).
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
        int points = n == 0 ? 0 : Math.ceilDiv(n, bucket);
        int[] index = new int[points];
        long[] res = new long[points];
        for (int p = 0; p < points; p++) {
            int best = p * bucket;
            long maxRes = reserved[best];
            for (int i = p * bucket; i < Math.min(n, (p + 1) * bucket); i++) {
                if (allocated[i] > allocated[best]) {
                    best = i;
                }
                maxRes = Math.max(maxRes, reserved[i]);
            }
            index[p] = best;
            res[p] = maxRes;
        }
        if (bucket > 1) {
            int[] ooms = oomEntries();
            int[] keptIndex = new int[points + ooms.length];
            long[] keptRes = new long[points + ooms.length];
            int kept = 0;
            int o = 0;
            for (int q = 0; q <= points; q++) {
                int next = q < points ? index[q] : Integer.MAX_VALUE;
                for (; o < ooms.length && ooms[o] <= next; o++) {
                    if (ooms[o] < next) { // an OOM that is not its bucket's point: its own point, exact
                        keptIndex[kept] = ooms[o];
                        keptRes[kept++] = reserved[ooms[o]];
                    }
                }
                if (q < points) {
                    keptIndex[kept] = index[q];
                    keptRes[kept++] = res[q];
                }
            }
            points = kept;
            index = Arrays.copyOf(keptIndex, kept);
            res = Arrays.copyOf(keptRes, kept);
        }
        long[][] stack = new long[points][k + 1];
        long[] siteBytes = new long[siteMax.length];
        for (long[] b : startBlocks.values()) {
            siteBytes[(int) b[1]] += b[0];
        }
        Map<Long, Integer> open = openAtStart();
        int p = 0;
        for (int i = 0; i < n && p < points; i++) {
            TraceAction action = fields.action(i);
            if (action == TraceAction.ALLOC) {
                long addr = fields.addr(i);
                retireQuiet(open, addr, siteBytes);
                open.put(addr, i);
                siteBytes[allocSite[i]] += allocSize[i];
            } else if (action == TraceAction.FREE_COMPLETED) {
                retireQuiet(open, fields.addr(i), siteBytes);
            }
            if (i == index[p]) {
                for (int s = 0; s < siteBytes.length; s++) {
                    if (siteBytes[s] != 0) {
                        stack[p][column[s] >= 0 ? column[s] : k] += siteBytes[s];
                    }
                }
                p++;
            }
        }
        long[] alloc = new long[points];
        for (int q = 0; q < points; q++) {
            alloc[q] = allocated[index[q]];
        }
        return new Sampled(index, alloc, res, top, stack);
    }

    /** The indexes of the trace's {@code oom} entries, in order. */
    private int[] oomEntries() {
        int[] ooms = new int[8];
        int count = 0;
        for (int i = 0; i < trace.size(); i++) {
            if (fields.action(i) == TraceAction.OOM) {
                if (count == ooms.length) {
                    ooms = Arrays.copyOf(ooms, count * 2);
                }
                ooms[count++] = i;
            }
        }
        return Arrays.copyOf(ooms, count);
    }

    private void retireQuiet(Map<Long, Integer> open, long addr, long[] siteBytes) {
        Integer a = open.remove(addr);
        if (a == null) {
            return;
        }
        if (a == BEFORE) {
            long[] b = startBlocks.get(addr);
            siteBytes[(int) b[1]] -= b[0];
        } else {
            siteBytes[allocSite[a]] -= allocSize[a];
        }
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
