package io.gpumem.report;

import io.gpumem.alloc.AddressTable;
import io.gpumem.alloc.SizeRules;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.history.BlockInfo;
import io.gpumem.history.Frame;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.io.EntryFields;
import io.gpumem.trace.window.WindowStart;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import org.jspecify.annotations.Nullable;

/**
 * Allocated and reserved bytes along one device trace, downsampled to a bounded number of points, allocated bytes
 * split by allocation site, and the lifetimes of the blocks live at chosen moments and at peak allocated: the data
 * behind the report's timeline and the hover text of its segment maps.
 *
 * <p>Method: start from the window's rebuilt start state (its live blocks count as allocated, their site is
 * {@link Sites#BEFORE_TRACE}); an {@code alloc} adds its block size (the request rounded as the recorded
 * configuration rounds it: a whole-block take of an unsplittable remainder is not visible in a trace, so a
 * block can be up to 1 MiB larger than counted), a {@code free_completed} subtracts what its {@code alloc}
 * added; segment entries move reserved bytes exactly. An {@code alloc} at an address that is still live (a
 * trace with a lost free) first retires the old block.
 *
 * <p>One walk over the trace, in the constructor, answers every question; nothing is kept per entry (a snapshot
 * of a gigabyte has tens of millions of entries, and arrays of them would outweigh the trace itself), only the
 * blocks live at once and a bounded record per sample point:
 * <ul>
 *   <li>the points: the buckets depend only on the entry count and {@code maxPoints}, so each bucket's point (its
 *       first maximum of allocated bytes, with its highest reserved bytes) and its {@code oom} entries are chosen
 *       as the walk leaves the bucket;
 *   <li>their split by site: the columns (the sites that held most at any moment) are known only at the end, so
 *       each point keeps its non-zero sites (at most the sites live at once). They are read off a second copy of
 *       the bytes per site that lags at the bucket's start, brought forward through the bucket's (site, change)
 *       log to each point as the bucket closes; {@link #sample} folds them into columns;
 *   <li>the lifetimes at the {@code moments} asked for in advance: the blocks open then, whose free entries the
 *       walk fills in as it retires them;
 *   <li>the lifetimes at the peak, known only at the end: the blocks retired since the running maximum that were
 *       allocated at or before it (dropped at each new maximum), and at the end the blocks still open that were
 *       allocated at or before the peak.
 * </ul>
 *
 * <p>Invariants: allocated and reserved never go below zero in a consistent trace; the site ids are given in
 * the order the start blocks and then the trace's {@code alloc} entries first name them; the points are in entry
 * order, without duplicates.
 */
final class Timeline {
    /** Marker in a live map for a block allocated before the trace. */
    static final int BEFORE = -1;

    final List<TraceEntry> trace;
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

    /** The sample points in entry order: entry index, allocated bytes, highest reserved bytes of the bucket. */
    private final int[] pointIndex;

    private final long[] pointAllocated;
    private final long[] pointReserved;
    /** Per point, the sites holding bytes then and their bytes (parallel arrays, sites ascending). */
    private final int[][] pointSites;

    private final long[][] pointSiteBytes;
    /** The blocks open after each moment asked for (−1: at the start), by moment. */
    private final Map<Integer, List<Open>> openAt = new HashMap<>();
    /** The blocks open after {@link #peakIndex}. */
    private final List<Open> openAtPeak;

    /**
     * Walks {@code trace} once.
     *
     * @param maxPoints most points of {@link #sample} besides its {@code oom} entries
     * @param moments   entries after which {@link #lifetimesAfter} will be asked (−1: the start; past the end: the
     *                  end)
     */
    Timeline(
            List<TraceEntry> trace,
            WindowStart start,
            AllocatorConfig config,
            Sites sites,
            Map<Long, List<Frame>> endFrames,
            int maxPoints,
            int... moments) {
        this.trace = trace;
        EntryFields fields = EntryFields.of(trace);
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
        OpenBlocks open = new OpenBlocks(startBlocks.size());
        long[] siteBytes = new long[sites.size() + 1];
        for (Map.Entry<Long, long[]> b : startBlocks.entrySet()) {
            long[] v = b.getValue();
            open.put(new Open(b.getKey(), BEFORE, (int) v[1], v[0]));
            siteBytes[(int) v[1]] += v[0];
        }
        int[] wanted = moments.clone();
        for (int m = 0; m < wanted.length; m++) {
            wanted[m] = moment(wanted[m], n);
        }
        Arrays.sort(wanted);
        int nextMoment = 0;
        for (; nextMoment < wanted.length && wanted[nextMoment] < 0; nextMoment++) {
            openAt.put(-1, open.values());
        }
        Sampler sampler = new Sampler(n, maxPoints, siteBytes);
        Walk walk = new Walk(fields, config, sites, open, siteBytes, sampler, startFreedAt, startAllocated, res);
        for (int i = 0; i < n; i++) {
            walk.entry(i);
            for (; nextMoment < wanted.length && wanted[nextMoment] == i; nextMoment++) {
                openAt.put(i, open.values());
            }
        }
        List<Open> atPeak = walk.retiredSincePeak;
        int peakEntry = walk.peak;
        open.forEach(b -> {
            if (b.entry <= peakEntry) {
                atPeak.add(b);
            }
        });
        this.openAtPeak = atPeak;
        this.siteMax = Arrays.copyOf(walk.max, sites.size() + 1);
        this.peakIndex = walk.peak;
        this.peakAllocated = n == 0 ? startAllocated : Math.max(walk.peakAlloc, startAllocated);
        this.peakReserved = walk.peakRes;
        this.pointIndex = Arrays.copyOf(sampler.index, sampler.points);
        this.pointAllocated = Arrays.copyOf(sampler.alloc, sampler.points);
        this.pointReserved = Arrays.copyOf(sampler.res, sampler.points);
        this.pointSites = Arrays.copyOf(sampler.sitesAt, sampler.points);
        this.pointSiteBytes = Arrays.copyOf(sampler.bytesAt, sampler.points);
    }

    /** A moment as the walk meets it: −1 for the start, the last entry for any moment at or past the end. */
    private static int moment(int n, int entries) {
        return n < 0 ? -1 : Math.min(n, entries - 1);
    }

    /**
     * A block open in the walk: its address, alloc entry ({@link #BEFORE} for a start block), site and bytes, and the
     * entry that retired it (−1 while open).
     */
    private static final class Open {
        final long addr;
        final int entry;
        final int site;
        final long bytes;
        int freed = -1;

        Open(long addr, int entry, int site, long bytes) {
            this.addr = addr;
            this.entry = entry;
            this.site = site;
            this.bytes = bytes;
        }
    }

    /**
     * The walk's state and its step, one entry at a time: a method of its own (not the body of the constructor's
     * loop), so that the JIT compiles this small step early, where it would otherwise run the whole walk of a cold
     * report in the interpreter and in profiled code until it had compiled the large constructor around it (the
     * walk of the 276 MB demo snapshot took 0.4 s in a report, against 0.1 s warm).
     */
    private static final class Walk {
        final EntryFields fields;
        final AllocatorConfig config;
        final Sites sites;
        final OpenBlocks open;
        final Sampler sampler;
        final Map<Long, Integer> startFreedAt;
        /** Bytes per site now, and the most each site held at any moment. */
        long[] siteBytes;

        long[] max;
        /** The blocks allocated at or before the running maximum and retired since. */
        final List<Open> retiredSincePeak = new ArrayList<>();

        long allocated;
        long reserved;
        int peak = -1;
        long peakAlloc = Long.MIN_VALUE;
        long peakRes;

        Walk(
                EntryFields fields,
                AllocatorConfig config,
                Sites sites,
                OpenBlocks open,
                long[] siteBytes,
                Sampler sampler,
                Map<Long, Integer> startFreedAt,
                long allocated,
                long reserved) {
            this.fields = fields;
            this.config = config;
            this.sites = sites;
            this.open = open;
            this.siteBytes = siteBytes;
            this.max = siteBytes.clone();
            this.sampler = sampler;
            this.startFreedAt = startFreedAt;
            this.allocated = allocated;
            this.reserved = reserved;
            this.peakRes = reserved;
        }

        /** Entry {@code i}: retire and open blocks, move reserved bytes, note the peak and the sample point. */
        void entry(int i) {
            TraceAction action = fields.action(i);
            switch (action) {
                case ALLOC, FREE_COMPLETED -> {
                    long addr = fields.addr(i);
                    Open retired = open.remove(addr);
                    if (retired != null) {
                        retire(retired, addr, i);
                    }
                    if (action == TraceAction.ALLOC) {
                        allocate(addr, i);
                    }
                }
                case SEGMENT_ALLOC, SEGMENT_MAP -> reserved += fields.size(i);
                case SEGMENT_FREE, SEGMENT_UNMAP -> reserved -= fields.size(i);
                default -> {}
            }
            if (allocated > peakAlloc) {
                peakAlloc = allocated;
                peak = i;
                retiredSincePeak.clear();
            }
            peakRes = Math.max(peakRes, reserved);
            sampler.after(i, allocated, reserved, action == TraceAction.OOM, siteBytes.length);
        }

        private void retire(Open retired, long addr, int i) {
            retired.freed = i;
            allocated -= retired.bytes;
            siteBytes[retired.site] -= retired.bytes;
            sampler.change(i, retired.site, -retired.bytes);
            if (retired.entry == BEFORE) {
                startFreedAt.putIfAbsent(addr, i);
            }
            if (retired.entry <= peak) { // live at the running maximum, freed after it
                retiredSincePeak.add(retired);
            }
        }

        private void allocate(long addr, int i) {
            int site = sites.of(fields.frames(i));
            if (site >= siteBytes.length) {
                siteBytes = Arrays.copyOf(siteBytes, Math.max(site + 1, siteBytes.length * 2));
            }
            long bytes = SizeRules.roundSize(Math.max(0, fields.size(i)), config);
            open.put(new Open(addr, i, site, bytes));
            allocated += bytes;
            siteBytes[site] += bytes;
            sampler.change(i, site, bytes);
            if (site >= max.length) {
                max = Arrays.copyOf(max, Math.max(site + 1, max.length * 2));
            }
            max[site] = Math.max(max[site], siteBytes[site]);
        }
    }

    /**
     * The blocks open in the walk by address, without boxing a key per entry: an {@link AddressTable}, which keeps no
     * key 0, and a slot of its own for a block at address 0 (a trace recorded without addresses has them).
     */
    private static final class OpenBlocks {
        private final AddressTable<Open> byAddress;
        private @Nullable Open atZero;

        OpenBlocks(int expected) {
            byAddress = AddressTable.forObjects(Math.max(expected, 1024));
        }

        /** Adds {@code b}; the caller has retired any block open at its address first. */
        void put(Open b) {
            if (b.addr == 0) {
                atZero = b;
            } else {
                byAddress.put(b.addr, b);
            }
        }

        /** Removes and returns the block open at {@code addr}, or null. */
        @Nullable
        Open remove(long addr) {
            if (addr != 0) {
                return byAddress.remove(addr);
            }
            Open b = atZero;
            atZero = null;
            return b;
        }

        void forEach(Consumer<Open> action) {
            byAddress.forEach(action);
            if (atZero != null) {
                action.accept(atZero);
            }
        }

        /** The open blocks, copied once into a list no one else holds. */
        List<Open> values() {
            List<Open> out = new ArrayList<>(byAddress.size() + 1);
            forEach(out::add);
            return Collections.unmodifiableList(out);
        }
    }

    /**
     * The sample points chosen as the walk goes: per bucket of {@code bucket} entries its first maximum of allocated
     * bytes and highest reserved bytes, and (when buckets are longer than one entry) every {@code oom} entry that is
     * not its bucket's point, with its own bytes; each point's bytes per site, from {@code lag} (the bytes per site
     * at the bucket's start) and the bucket's log of changes, replayed to each point when the bucket closes.
     */
    private static final class Sampler {
        final int entries;
        final int bucket;
        int[] index;
        long[] alloc;
        long[] res;
        int[][] sitesAt;
        long[][] bytesAt;
        int points;

        private long[] lag;
        /** Entries left in the current bucket, {@code bucket} at its first entry. */
        private int left;

        private int best = -1;
        private long bestAlloc;
        private long maxRes;
        /** The bucket's {@code oom} entries: entry, allocated and reserved bytes. */
        private final Log ooms = new Log();
        /** The bucket's changes of bytes per site: entry, site, bytes. */
        private final Log changes = new Log();

        Sampler(int entries, int maxPoints, long[] startSiteBytes) {
            this.entries = entries;
            this.bucket = Math.max(1, Math.ceilDiv(Math.max(entries, 1), maxPoints));
            int buckets = entries == 0 ? 0 : Math.ceilDiv(entries, bucket);
            index = new int[buckets + 8];
            alloc = new long[index.length];
            res = new long[index.length];
            sitesAt = new int[index.length][];
            bytesAt = new long[index.length][];
            lag = startSiteBytes.clone();
            left = bucket;
        }

        /** Entry {@code i} changed the bytes of {@code site} by {@code bytes}. */
        void change(int i, int site, long bytes) {
            changes.add(i, site, bytes);
        }

        /**
         * The bytes after entry {@code i} (called for every entry in order); {@code sites}: how many site ids there
         * are so far, at most.
         */
        void after(int i, long allocated, long reserved, boolean oom, int sites) {
            if (best < 0 || allocated > bestAlloc) {
                best = i;
                bestAlloc = allocated;
            }
            maxRes = left == bucket ? reserved : Math.max(maxRes, reserved);
            if (bucket > 1 && oom) {
                ooms.add(i, allocated, reserved);
            }
            // a countdown rather than i % bucket: a division per entry of a trace of millions shows in the walk
            if (--left == 0 || i == entries - 1) {
                close(sites);
                left = bucket;
            }
        }

        /** Adds the closing bucket's points in entry order, each with its bytes per site, and starts the next. */
        private void close(int sites) {
            if (lag.length < sites) {
                lag = Arrays.copyOf(lag, sites);
            }
            int oomCount = ooms.size();
            if (points + oomCount + 1 > index.length) {
                int grown = Math.max(points + oomCount + 1, index.length * 2);
                index = Arrays.copyOf(index, grown);
                alloc = Arrays.copyOf(alloc, grown);
                res = Arrays.copyOf(res, grown);
                sitesAt = Arrays.copyOf(sitesAt, grown);
                bytesAt = Arrays.copyOf(bytesAt, grown);
            }
            int applied = 0;
            boolean placed = false;
            for (int o = 0; o <= oomCount; o++) {
                if (!placed && (o == oomCount || ooms.entry(o) >= best)) {
                    applied = point(best, bestAlloc, maxRes, applied);
                    placed = true;
                }
                if (o < oomCount
                        && ooms.entry(o) != best) { // an OOM that is not its bucket's point: its own point, exact
                    applied = point(ooms.entry(o), ooms.first(o), ooms.second(o), applied);
                }
            }
            for (; applied < changes.size(); applied++) {
                lag[(int) changes.first(applied)] += changes.second(applied);
            }
            changes.clear();
            ooms.clear();
            best = -1;
        }

        /** Adds the point at entry {@code at}, bringing {@code lag} forward to it from change {@code applied}. */
        private int point(int at, long allocated, long reserved, int applied) {
            for (; applied < changes.size() && changes.entry(applied) <= at; applied++) {
                lag[(int) changes.first(applied)] += changes.second(applied);
            }
            int live = 0;
            for (long b : lag) {
                if (b != 0) {
                    live++;
                }
            }
            int[] s = new int[live];
            long[] b = new long[live];
            for (int site = 0, k = 0; k < live; site++) {
                if (lag[site] != 0) {
                    s[k] = site;
                    b[k++] = lag[site];
                }
            }
            index[points] = at;
            alloc[points] = allocated;
            res[points] = reserved;
            sitesAt[points] = s;
            bytesAt[points++] = b;
            return applied;
        }
    }

    /**
     * A growing list of entries with two figures each, packed three longs an item in one array (one array to grow
     * and copy, not three); {@link #clear} empties it and keeps the array for the next bucket.
     */
    private static final class Log {
        private long[] items = new long[48];
        private int size;

        void add(int entry, long a, long b) {
            int k = 3 * size;
            if (k == items.length) {
                items = Arrays.copyOf(items, 2 * k);
            }
            items[k] = entry;
            items[k + 1] = a;
            items[k + 2] = b;
            size++;
        }

        int size() {
            return size;
        }

        int entry(int i) {
            return (int) items[3 * i];
        }

        long first(int i) {
            return items[3 * i + 1];
        }

        long second(int i) {
            return items[3 * i + 2];
        }

        void clear() {
            size = 0;
        }
    }

    int entries() {
        return trace.size();
    }

    /**
     * The blocks live after entry {@code n} (−1: at the start; at or past the last entry: the end), by address: {site,
     * alloc entry ({@link #BEFORE} for a start block), entry that frees it (−1: live at the end)}. A fresh map each
     * call.
     *
     * @throws IllegalArgumentException when {@code n} was not among the moments the timeline was built for
     */
    Map<Long, int[]> lifetimesAfter(int n) {
        List<Open> open = openAt.get(moment(n, trace.size()));
        if (open == null) {
            throw new IllegalArgumentException("the timeline was not built to keep the blocks live after entry " + n);
        }
        return lifetimes(open);
    }

    /** The blocks live after {@link #peakIndex}, as {@link #lifetimesAfter} gives them. */
    Map<Long, int[]> lifetimesAtPeak() {
        return lifetimes(openAtPeak);
    }

    private static Map<Long, int[]> lifetimes(List<Open> open) {
        Map<Long, int[]> live = HashMap.newHashMap(open.size());
        for (Open b : open) {
            live.put(b.addr, new int[] {b.site, b.entry, b.freed});
        }
        return live;
    }

    /**
     * The timeline cut to at most the constructor's {@code maxPoints} points plus one per {@code oom} entry, however
     * long the trace (what keeps a report of millions of entries as quick to draw as one of thousands): each point is
     * the entry of its bucket where allocated bytes are highest, with the bucket's highest reserved bytes, so the peak
     * is kept exactly ({@link #peakIndex}, the first entry at the peak, is its bucket's first maximum); every
     * {@code oom} entry is a point too, with its own bytes, where it is not its bucket's point already. Allocated
     * bytes are split over the {@code topSites} sites that held most at any moment, the rest summed as "other" (the
     * last column). Computed by the constructor's walk; this only folds the sites into columns.
     */
    Sampled sample(int topSites) {
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
        int points = pointIndex.length;
        long[][] stack = new long[points][k + 1];
        for (int p = 0; p < points; p++) {
            int[] s = pointSites[p];
            for (int j = 0; j < s.length; j++) {
                stack[p][s[j] < column.length && column[s[j]] >= 0 ? column[s[j]] : k] += pointSiteBytes[p][j];
            }
        }
        return new Sampled(pointIndex.clone(), pointAllocated.clone(), pointReserved.clone(), top, stack);
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
