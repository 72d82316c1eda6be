package io.gpumem.trace.window;

import io.gpumem.alloc.AddressTable;
import io.gpumem.alloc.Pool;
import io.gpumem.alloc.SizeRules;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.io.EntryFields;
import io.gpumem.trace.window.WindowRebuilder.LiveBlock;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.NavigableMap;
import java.util.TreeMap;
import org.jspecify.annotations.Nullable;

/**
 * The segments that existed at a trace window's start, found from the end-state segments and the window's segment
 * events, for {@link WindowRebuilder} to fill with the start's live blocks (docs/replay-method.md §2 "Start state").
 * It also finds the expandable reservations the window makes ({@link WindowStart#reservationsMadeInWindow}) and how
 * far the window maps in each start reservation ({@link WindowStart#reservationReach},
 * {@link WindowStart#reservationFloor}).
 *
 * <p>Algorithm: walk the segment events backwards from the end-state segments. A {@code segment_alloc} means the
 * segment did not exist before it; a {@code segment_free} means it did (stream from the entry, pool by size: 2 MiB
 * is small). Expandable segments are mapped runs: a {@code segment_map} range is subtracted from its (stream, pool)
 * group (the pool of the request that follows the map), a {@code segment_unmap} range is added back to the group of
 * its segment (the entry's stream, and the pool of any map of the range in the window or of its run at the end,
 * another stream's too: a reservation wholly unmapped is given back and its range reused only by a reservation of
 * the same size, so an address keeps its pool; else of a run of the stream it touches, or the pool its size says:
 * whole large pages (20 MiB) the large pool, any other range the small pool's nearest run). A map undone to nothing
 * mapped in its group made a new reservation, based at the map. Walking forward again from the start runs, the
 * highest and lowest ranges the window maps in a start reservation before giving it back say how far that reservation
 * reaches up and down.
 * The pool given an expandable run is the walk's best guess: {@link WindowRebuilder} corrects it by the run's live
 * blocks.
 *
 * <p>Invariants: a group's mapped runs are disjoint half-open ranges, and no two touch ({@link #add} merges them);
 * the owner ranges (the group each expandable range was last seen mapped in) are disjoint, and so are the pool
 * ranges, a later {@link #own} replacing whatever it overlaps; the result holds one segment per address. Only the
 * segment events are read, by the indices the rebuild's forward pass noted, and each map's pool is found once.
 */
final class StartSegmentWalk {

    private final AllocatorConfig config;

    /** @param config the configuration the trace was recorded under (round_size, for the pool of a map's request) */
    StartSegmentWalk(AllocatorConfig config) {
        this.config = config;
    }

    /**
     * A segment in the making: range, stream, pool, and its live blocks (filled in later, by the rebuild), kept in the
     * order they were found; {@link #liveByAddress} sorts them and keeps the last one found at each address. The list
     * starts without an array, so a segment without live blocks costs no more than this record and an empty list.
     */
    record Seg(long address, long size, long stream, Pool pool, boolean expandable, List<LiveBlock> live) {
        Seg(long address, long size, long stream, Pool pool, boolean expandable) {
            this(address, size, stream, pool, expandable, new ArrayList<>());
        }

        long end() {
            return address + size;
        }

        void addLive(LiveBlock b) {
            live.add(b);
        }

        /** The live blocks by ascending address, one per address (the one found last, as a map's put keeps). */
        List<LiveBlock> liveByAddress() {
            List<LiveBlock> l = live;
            l.sort(Comparator.comparingLong(LiveBlock::address)); // stable: equal addresses stay in found order
            int kept = 0;
            for (int i = 0; i < l.size(); i++) {
                if (i + 1 < l.size() && l.get(i + 1).address() == l.get(i).address()) {
                    continue;
                }
                l.set(kept++, l.get(i));
            }
            return l.subList(0, kept);
        }
    }

    /**
     * The segments of the backward pass by address, one per address (a later put replaces): an address table, and
     * the segment at address 0 (no table key) beside it.
     */
    static final class SegsByAddress {
        private final AddressTable<Seg> table;
        private @Nullable Seg atZero;
        /** The expandable reservations the window makes: base address to pool. */
        final Map<Long, Pool> madeInWindow = new TreeMap<>();
        /**
         * How far up the window maps in a start reservation, past its highest run: that run's address to the end of
         * the highest range mapped in the reservation before it was given back (only where the window maps above the
         * run).
         */
        final Map<Long, Long> reachInWindow = new TreeMap<>();
        /**
         * How far down the window maps in a start reservation, below its lowest run: that run's address to the lowest
         * address mapped in the reservation before it was given back (only where the window maps below the run).
         */
        final Map<Long, Long> floorInWindow = new TreeMap<>();

        SegsByAddress(int expected) {
            table = AddressTable.forObjects(expected);
        }

        void put(Seg seg) {
            if (seg.address() == 0) {
                atZero = seg;
            } else {
                table.put(seg.address(), seg);
            }
        }

        void remove(long address) {
            if (address == 0) {
                atZero = null;
            } else {
                table.remove(address);
            }
        }
    }

    /** The start segments by ascending address, with their addresses in an array for binary search. */
    static final class SegIndex {
        /** The segments, by ascending address. */
        final Seg[] segs;

        private final long[] starts;

        SegIndex(SegsByAddress byAddress) {
            int n = byAddress.table.size() + (byAddress.atZero != null ? 1 : 0);
            starts = new long[n];
            int[] at = {0};
            byAddress.table.forEach(seg -> starts[at[0]++] = seg.address());
            if (byAddress.atZero != null) {
                starts[at[0]] = 0;
            }
            Arrays.sort(starts); // signed, as the sorted map of boxed addresses this replaces
            segs = new Seg[n];
            for (int i = 0; i < n; i++) {
                segs[i] = starts[i] == 0 ? byAddress.atZero : byAddress.table.get(starts[i]);
            }
        }

        /** The segment holding {@code address}, or null. */
        @Nullable
        Seg containing(long address) {
            int i = Arrays.binarySearch(starts, address);
            int floor = i >= 0 ? i : -i - 2;
            if (floor < 0) {
                return null;
            }
            Seg s = segs[floor];
            return address < s.end() ? s : null;
        }
    }

    /**
     * Segments that existed at the window's start, keyed by address.
     *
     * @param endState the device's segments at the end of the window (the snapshot's)
     * @param segmentEvents the indices of the trace's segment events, ascending, in {@code [0, segmentEventCount)}
     */
    SegsByAddress startSegments(
            List<SegmentInfo> endState, List<TraceEntry> trace, int[] segmentEvents, int segmentEventCount) {
        SegsByAddress segs = new SegsByAddress(endState.size() + segmentEventCount);
        // Expandable mapped runs per (stream, pool) group: start -> end.
        Map<List<Long>, NavigableMap<Long, Long>> groups = new HashMap<>();
        // Which group each expandable address range was last seen in (end state, then every undone map): an unmap
        // puts its range back into the group that mapped it later, which by then may hold no run at all.
        NavigableMap<Long, Owner> owners = new TreeMap<>();
        for (SegmentInfo s : endState) {
            if (s.expandable()) {
                List<Long> key = List.of(s.stream(), poolKey(s.isSmall() ? Pool.SMALL : Pool.LARGE));
                groups.computeIfAbsent(key, k -> new TreeMap<>()).merge(s.address(), s.end(), Math::max);
                own(owners, s.address(), s.end(), key);
            } else {
                segs.put(new Seg(s.address(), s.totalSize(), s.stream(), s.isSmall() ? Pool.SMALL : Pool.LARGE, false));
            }
        }
        EntryFields fields = EntryFields.of(trace);
        // The pool of every expandable range the window shows mapped (end state, and every map with the pool of its
        // request). A reservation given back is reused only by one of the same size, so of the same pool: an address
        // keeps its pool however often its reservation changes hands, and an unmap takes the pool of any map of it.
        NavigableMap<Long, Owner> pools = new TreeMap<>();
        owners.forEach((from, o) ->
                pools.put(from, new Owner(o.end(), List.of(o.key().get(1)))));
        Pool[] mapPool = new Pool[segmentEventCount]; // per segment event, a map's pool (found once, used twice)
        for (int n = 0; n < segmentEventCount; n++) {
            int i = segmentEvents[n];
            if (fields.action(i) == TraceAction.SEGMENT_MAP) {
                long addr = fields.addr(i);
                mapPool[n] = nextRequestPool(trace, i);
                own(pools, addr, addr + fields.size(i), List.of(poolKey(mapPool[n])));
            }
        }
        List<List<Long>> groupOf = new ArrayList<>(Collections.nCopies(segmentEventCount, List.of()));
        for (int n = segmentEventCount - 1; n >= 0; n--) {
            int i = segmentEvents[n];
            TraceAction action = fields.action(i);
            // (fields by index, not trace.get(i): building an entry copies its frames)
            long addr = fields.addr(i);
            switch (action) {
                case SEGMENT_ALLOC -> segs.remove(addr);
                case SEGMENT_FREE -> {
                    long size = fields.size(i);
                    segs.put(new Seg(addr, size, fields.stream(i), poolOfSegment(size), false));
                }
                case SEGMENT_MAP -> {
                    Pool pool = mapPool[n];
                    List<Long> key = List.of(fields.stream(i), poolKey(pool));
                    groupOf.set(n, key);
                    NavigableMap<Long, Long> g = groups.computeIfAbsent(key, k -> new TreeMap<>());
                    subtract(g, addr, addr + fields.size(i));
                    own(owners, addr, addr + fields.size(i), key);
                    if (g.isEmpty()) {
                        // nothing of the stream's pool mapped before: a new reservation, whose first map is at its base
                        segs.madeInWindow.put(addr, pool);
                    }
                }
                case SEGMENT_UNMAP -> {
                    long end = addr + fields.size(i);
                    Long shownPool = poolOf(pools, addr, end);
                    List<Long> key = shownPool != null
                            ? List.of(fields.stream(i), shownPool)
                            : unmapGroup(owners, groups, addr, end, fields.stream(i));
                    groupOf.set(n, key);
                    add(groups.computeIfAbsent(key, k -> new TreeMap<>()), addr, end);
                    own(owners, addr, end, key);
                }
                default -> {}
            }
        }
        reachInWindow(
                groups, groupOf, fields, segmentEvents, segmentEventCount, segs.reachInWindow, segs.floorInWindow);
        for (Map.Entry<List<Long>, NavigableMap<Long, Long>> g : groups.entrySet()) {
            long stream = g.getKey().get(0);
            Pool pool = Pool.values()[g.getKey().get(1).intValue()];
            for (Map.Entry<Long, Long> run : g.getValue().entrySet()) {
                segs.put(new Seg(run.getKey(), run.getValue() - run.getKey(), stream, pool, true));
            }
        }
        return segs;
    }

    /**
     * How far up and down the window maps in each start reservation: walking the segment events forward from the start
     * runs ({@code groups}, per (stream, pool) group; {@code groupOf} the group of each map and unmap), the highest end
     * and the lowest address a map of a group reaches while the group has anything mapped, that is before its start
     * reservation is wholly unmapped and given back (a later map of the group makes a new reservation). The highest is
     * recorded against the group's highest start run where it lies above that run's end ({@code reach}), the lowest
     * against its lowest start run where it lies below that run ({@code floor}): the start reservation ends at or above
     * the one and begins at or below the other, which the replay's placement of reservations must respect (a
     * reservation placed right after another may end at its highest run; one that cannot follow another starts at its
     * lowest run).
     */
    private static void reachInWindow(
            Map<List<Long>, NavigableMap<Long, Long>> groups,
            List<List<Long>> groupOf,
            EntryFields fields,
            int[] segmentEvents,
            int segmentEventCount,
            Map<Long, Long> reach,
            Map<Long, Long> floor) {
        Map<List<Long>, NavigableMap<Long, Long>> mapped = new HashMap<>();
        Map<List<Long>, Long> highest = new HashMap<>();
        Map<List<Long>, Long> lowest = new HashMap<>();
        groups.forEach((key, runs) -> {
            if (!runs.isEmpty()) {
                mapped.put(key, new TreeMap<>(runs));
                highest.put(key, runs.lastEntry().getValue());
                lowest.put(key, runs.firstKey());
            }
        });
        for (int n = 0; n < segmentEventCount && !mapped.isEmpty(); n++) {
            NavigableMap<Long, Long> runs = mapped.get(groupOf.get(n));
            if (runs == null) {
                continue;
            }
            int i = segmentEvents[n];
            long addr = fields.addr(i);
            long end = addr + fields.size(i);
            if (fields.action(i) == TraceAction.SEGMENT_MAP) {
                add(runs, addr, end);
                highest.merge(groupOf.get(n), end, Math::max);
                lowest.merge(groupOf.get(n), addr, Math::min);
            } else {
                subtract(runs, addr, end);
                if (runs.isEmpty()) {
                    mapped.remove(groupOf.get(n)); // given back: its later maps are another reservation's
                }
            }
        }
        groups.forEach((key, runs) -> {
            Long top = highest.get(key);
            if (top != null && top > runs.lastEntry().getValue()) {
                reach.put(runs.lastKey(), top);
            }
            Long bottom = lowest.get(key);
            if (bottom != null && bottom < runs.firstKey()) {
                floor.put(runs.firstKey(), bottom);
            }
        });
    }

    /** The pool of the first request after {@code from}: the one an expandable segment's map was made for. */
    private Pool nextRequestPool(List<TraceEntry> trace, int from) {
        EntryFields fields = EntryFields.of(trace);
        for (int j = from + 1; j < trace.size(); j++) {
            if (fields.action(j) == TraceAction.ALLOC) {
                return SizeRules.poolFor(SizeRules.roundSize(fields.size(j), config));
            }
        }
        return Pool.LARGE;
    }

    /** A classic segment's pool, from its size: only the small pool makes 2 MiB segments. */
    private static Pool poolOfSegment(long segmentSize) {
        return segmentSize == SizeRules.SMALL_BUFFER ? Pool.SMALL : Pool.LARGE;
    }

    private static long poolKey(Pool pool) {
        return pool.ordinal();
    }

    /**
     * An expandable address range's owner: the (stream, pool) group it was last seen mapped in, walking backwards.
     *
     * @param end the range's end (exclusive); the start is the map key
     * @param key the group, as {@code List.of(stream, poolKey)}
     */
    private record Owner(long end, List<Long> key) {}

    /** Records {@code key} as the owner of [from, to), replacing the owners of whatever of it was owned before. */
    private static void own(NavigableMap<Long, Owner> owners, long from, long to, List<Long> key) {
        Map.Entry<Long, Owner> e = owners.floorEntry(from);
        if (e == null || e.getValue().end() <= from) {
            e = owners.ceilingEntry(from);
        }
        while (e != null && e.getKey() < to) {
            long s = e.getKey();
            Owner o = e.getValue();
            owners.remove(s);
            if (s < from) {
                owners.put(s, new Owner(from, o.key()));
            }
            if (o.end() > to) {
                owners.put(to, o);
            }
            e = owners.higherEntry(s);
        }
        owners.put(from, new Owner(to, key));
    }

    /** The pool key of the first range of {@code pools} that [from, to) meets, or null. */
    private static @Nullable Long poolOf(NavigableMap<Long, Owner> pools, long from, long to) {
        Map.Entry<Long, Owner> e = pools.floorEntry(from);
        if (e == null || e.getValue().end() <= from) {
            e = pools.ceilingEntry(from);
        }
        return e != null && e.getKey() < to ? e.getValue().key().get(0) : null;
    }

    /**
     * The group an unmapped range [from, to) on {@code stream} goes back to. An expandable segment keeps its stream and
     * pool, so the group that maps any of the range later (or holds it at the end) is the segment's; a range that
     * stayed unmapped takes the group of a range {@code stream} ever had or of a run on {@code stream} that it touches
     * (a range of small pages, not whole large ones, of the nearest small one), else the pool its size says. Never
     * another stream's: the entry names the segment's stream, and the group of the nearest run
     * regardless of stream put a segment unmapped by {@code empty_cache()} into another stream and pool.
     */
    private static List<Long> unmapGroup(
            NavigableMap<Long, Owner> owners,
            Map<List<Long>, NavigableMap<Long, Long>> groups,
            long from,
            long to,
            long stream) {
        Map.Entry<Long, Owner> e = owners.floorEntry(from);
        if (e == null || e.getValue().end() <= from) {
            e = owners.ceilingEntry(from);
        }
        List<Long> reused = null;
        for (; e != null && e.getKey() < to; e = owners.higherEntry(e.getKey())) {
            if (e.getValue().key().get(0) == stream) {
                return e.getValue().key();
            }
            reused = reused != null ? reused : e.getValue().key();
        }
        // Mapped later by another stream: the reservation was given back once wholly unmapped and the driver handed the
        // range to that stream's next segment, a reservation of the same size, so of the same pool.
        if (reused != null) {
            return List.of(stream, reused.get(1));
        }
        // A range that is not whole large pages (20 MiB) is small-pool pages (2 MiB): never the large pool's, however
        // near a large run of the stream lies (nearest regardless of pool put a small page unmapped by empty_cache()
        // into the large group, 4,560 pages away from it, and loading that start state failed).
        boolean onlySmall = (to - from) % SizeRules.LARGE_BUFFER != 0;
        long smallKey = poolKey(Pool.SMALL);
        List<Long> best = null;
        long bestDistance = Long.MAX_VALUE;
        for (Map.Entry<Long, Owner> o : owners.entrySet()) {
            long d = distance(from, o.getKey(), o.getValue().end());
            if (onlySmall && o.getValue().key().get(1) != smallKey) {
                continue;
            }
            if (o.getValue().key().get(0) == stream && d < bestDistance) {
                bestDistance = d;
                best = o.getValue().key();
            }
        }
        for (Map.Entry<List<Long>, NavigableMap<Long, Long>> g : groups.entrySet()) {
            if (g.getKey().get(0) != stream || (onlySmall && g.getKey().get(1) != smallKey)) {
                continue;
            }
            for (Map.Entry<Long, Long> run : g.getValue().entrySet()) {
                long d = distance(from, run.getKey(), run.getValue());
                if (d < bestDistance) {
                    bestDistance = d;
                    best = g.getKey();
                }
            }
        }
        // nothing on the stream to go by: the size does (a large pool maps 20 MiB pages, a small one 2 MiB)
        // A run the range touches is of its reservation. One farther off may be another reservation's (the stream's
        // other pool's, or a reservation the range's own replaced): whole large pages then say the large pool, as a
        // small pool maps 2 MiB pages and seldom leaves ten of them free together.
        return best != null && (onlySmall || bestDistance == 0)
                ? best
                : List.of(stream, poolKey((to - from) % SizeRules.LARGE_BUFFER == 0 ? Pool.LARGE : Pool.SMALL));
    }

    /** How far {@code addr} lies from the run [start, end): 0 inside it. */
    private static long distance(long addr, long start, long end) {
        return addr < start ? start - addr : Math.max(0, addr - end);
    }

    /** Removes [from, to) from a set of disjoint runs. */
    static void subtract(NavigableMap<Long, Long> runs, long from, long to) {
        Map.Entry<Long, Long> e = runs.floorEntry(from);
        if (e == null || e.getValue() <= from) {
            e = runs.ceilingEntry(from);
        }
        while (e != null && e.getKey() < to) {
            long s = e.getKey();
            long t = e.getValue();
            runs.remove(s);
            if (s < from) {
                runs.put(s, from);
            }
            if (t > to) {
                runs.put(to, t);
            }
            e = runs.higherEntry(s);
        }
    }

    /** Adds [from, to) to a set of disjoint runs, merging touching runs. */
    static void add(NavigableMap<Long, Long> runs, long from, long to) {
        subtract(runs, from, to);
        Map.Entry<Long, Long> before = runs.floorEntry(from);
        if (before != null && before.getValue() == from) {
            runs.remove(before.getKey());
            from = before.getKey();
        }
        Long after = runs.get(to);
        if (after != null) {
            runs.remove(to);
            to = after;
        }
        runs.put(from, to);
    }
}
