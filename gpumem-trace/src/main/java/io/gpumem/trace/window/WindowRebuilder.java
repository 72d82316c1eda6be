package io.gpumem.trace.window;

import io.gpumem.alloc.AddressTable;
import io.gpumem.alloc.Pool;
import io.gpumem.alloc.SizeRules;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.history.BlockInfo;
import io.gpumem.history.BlockState;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.io.EntryFields;
import io.gpumem.trace.io.TraceSnapshot;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.NavigableMap;
import java.util.Set;
import java.util.TreeMap;
import org.jspecify.annotations.Nullable;

/**
 * Rebuilds the allocator state at the first entry of a trace window (docs/replay-method.md §2 "Start state").
 *
 * <p>A snapshot's trace is a window over a longer run: blocks allocated before recording began show up
 * only in the end-state segments, or as frees without a matching alloc. The state at the window's start
 * follows from the end state and the trace:
 * <ol>
 *   <li><b>Segments</b>: walk the trace backwards from the end-state segments. A {@code segment_alloc}
 *       means the segment did not exist before it; a {@code segment_free} means it did (stream from the
 *       entry, pool by size: 2 MiB is small). Expandable segments are mapped runs: a {@code segment_map}
 *       range is subtracted from its (stream, pool) group (the pool of the request that follows the map),
 *       a {@code segment_unmap} range is added back to the group of its segment (the entry's stream, and the
 *       pool of any map of the range in the window or of its run at the end, another stream's too: a reservation
 *       wholly unmapped is given back and its range reused only by a reservation of the same size, so an address
 *       keeps its pool; else of a run of the stream it touches, or the pool its size says: whole large pages
 *       (20 MiB) the large pool, any other range the small pool's nearest run). A run holding live blocks takes
 *       the pool they show instead (a large-pool block is longer than 1 MiB, a small-pool one never is): a
 *       reservation given back is handed to another stream's next segment, which can mislead the walk. A map
 *       undone to nothing mapped in its group made a new reservation, based at the map
 *       ({@link WindowStart#reservationsMadeInWindow}). Walking forward again from the start runs, the highest
 *       range the window maps in a start reservation before giving it back says how far that reservation reaches
 *       ({@link WindowStart#reservationReach}).</li>
 *   <li><b>Live blocks</b>: end-state active blocks that were not allocated in the window, plus blocks
 *       freed in the window without an alloc before (allocated before the window).</li>
 *   <li><b>Sizes</b> of the latter are not recorded (a free carries the request). The block is
 *       {@code round_size(request)} long, plus a remainder that was too small to split off. <i>Gap rule</i>:
 *       if the space between {@code round_size} and the next live block (or the segment end) would not have
 *       been split off, it belongs to the block. <i>Slack rule</i>: otherwise, an alloc recorded while the
 *       block is live, within the unsplit-remainder distance past {@code round_size}, marks the block's end.</li>
 *   <li><b>Free space</b> between live blocks in a segment is one merged free block (free neighbours are
 *       always merged). Its {@code requested_size} is the stale one PyTorch keeps on a free block (the request
 *       last served by that block object; 0 for a block split off and never allocated). The trace cannot show
 *       it, but the end state can: a free block keeps its object (and so its value) until it is allocated
 *       whole, absorbed by a neighbour being freed (the freed block absorbs, keeping its own value), or
 *       released; splitting it for an allocation carves the low part off as a new block and leaves the object
 *       as the remainder, ending where it ended. So if the object outlives the window, it is the end state's
 *       free block that ends where the start block ends and begins no lower, and that block's value is the
 *       start block's. When no such block exists the object did not survive, and its value never shows. With
 *       expandable segments the object can also be absorbed by an unmapped block mapped beside it, or have its
 *       pages unmapped: it then becomes the unmapped block, and a map of those pages makes it a free block again,
 *       one that need not end where the start block ended. The rebuild does not follow it there, so such a value
 *       the window shows is not taken (docs/replay-method.md §2).</li>
 *   <li><b>A window that opens inside a request</b>, after its {@code segment_alloc} (a history ring cut there),
 *       starts with an {@code alloc} at the base of a segment that looks cached and wholly free. Where a cached
 *       segment could not have served that request (under {@code max_split_size_mb}, an oversize segment for a
 *       smaller request) the segment was made for it: it is left out, and {@link WindowStart#segmentAllocBeforeWindow}
 *       names it for the replay.</li>
 * </ol>
 * Cost: O(n log n) in the trace length plus the number of end-state blocks.
 */
public final class WindowRebuilder {

    // Per-address state of the forward pass. A window alloc's block (live, or its free requested: no rule tells
    // the two apart) is its alloc ordinal; the negative values are the rest.
    /** Neither allocated nor freed in the window so far. */
    private static final int UNTOUCHED = -1;
    /** Allocated or freed in the window, and nothing of the window live there now. */
    private static final int GONE = -2;
    /** A block from before the window whose free was requested, the address untouched before. */
    private static final int PRE_FREE_REQUESTED = -3;
    /** The same after the address was touched (a second free of a start block: it frees nothing). */
    private static final int PRE_FREE_REQUESTED_GONE = -4;

    private final AllocatorConfig config;

    /** @param config the configuration the trace was recorded under (round_size and split rules) */
    public WindowRebuilder(AllocatorConfig config) {
        this.config = config;
    }

    /**
     * A segment in the making: range, stream, pool, and its live blocks (filled in later), kept in the order they
     * were found; {@link #liveByAddress} sorts them and keeps the last one found at each address. The list starts
     * without an array, so a segment without live blocks costs no more than this record and an empty list.
     */
    private record Seg(long address, long size, long stream, Pool pool, boolean expandable, List<LiveBlock> live) {
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
     * A block live at the window's start.
     *
     * @param address   its address
     * @param size      its size, or {@link #INFERRED} when only its request is known (freed in the window)
     * @param request   the size requested for it
     * @param freeIndex the trace entry that frees it, {@link Long#MAX_VALUE} when it outlives the window
     */
    private record LiveBlock(long address, long size, long request, long freeIndex) {
        static final long INFERRED = -1;
    }

    /**
     * The segments of the backward pass by address, one per address (a later put replaces): an address table, and
     * the segment at address 0 (no table key) beside it.
     */
    private static final class SegsByAddress {
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
    private static final class SegIndex {
        private final Seg[] segs;
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

    /** A block allocated before the window and freed in it: its address, request and freeing entry. */
    private record PreFreed(long address, long request, long freeIndex) {
        PreFreed freedAt(long index) {
            return new PreFreed(address, request, index);
        }
    }

    /** Rebuilds the start state of {@code device}'s window. */
    public WindowStart rebuild(TraceSnapshot snapshot, int device) {
        List<TraceEntry> trace = snapshot.traceOf(device);

        // Forward pass (ForwardPass); it also notes where the segment events are, so the backward pass over them need
        // not walk the whole trace again.
        EntryFields fields = EntryFields.of(trace);
        ForwardPass pass = new ForwardPass(fields, recordsFreeCompletions(fields, trace.size()), trace.size());
        for (int from = 0; from < trace.size(); from += ForwardPass.CHUNK) {
            pass.run(from, Math.min(trace.size(), from + ForwardPass.CHUNK));
        }
        List<SegmentInfo> endState = snapshot.segmentsOf(device);
        SegsByAddress startSegments = startSegments(endState, trace, pass.segmentEvents, pass.segmentEventCount);
        SegIndex segs = new SegIndex(startSegments);

        // Live blocks at the start, and the end state's free blocks by end address (where a start free block's
        // object can have survived to), in one pass over the end state.
        AddressTable<BlockInfo> freeByEnd = AddressTable.forObjects(endState.size());
        for (SegmentInfo s : endState) {
            for (BlockInfo b : s.blocks()) {
                long address = b.address();
                BlockState blockState = b.state();
                // (address 0 is never a window block, and never a start block)
                if (blockState.isActive() && address != 0 && !heldInWindow(pass.state.getInt(address, UNTOUCHED))) {
                    Seg seg = segs.containing(address);
                    if (seg != null) {
                        seg.addLive(new LiveBlock(address, b.size(), b.requestedSize(), Long.MAX_VALUE));
                    }
                }
                long end = address + b.size();
                if (blockState == BlockState.INACTIVE && end != 0) {
                    freeByEnd.put(end, b);
                }
            }
        }
        Set<Long> preWindowFreed = new HashSet<>();
        for (PreFreed p : pass.preFreed) {
            Seg seg = segs.containing(p.address());
            if (seg != null) {
                seg.addLive(new LiveBlock(p.address(), LiveBlock.INFERRED, p.request(), p.freeIndex()));
                preWindowFreed.add(p.address());
            }
        }

        // Alloc addresses with their first index, for the slack rule; built only if a block needs it.
        SlackIndex slackIndex = new SlackIndex(fields, trace.size());
        int inferred = 0;
        List<SegmentInfo> out = new ArrayList<>(segs.segs.length);
        for (Seg seg : segs.segs) {
            List<LiveBlock> live = seg.liveByAddress();
            List<BlockInfo> blocks = new ArrayList<>(live.size() * 2 + 1);
            long cursor = seg.address();
            for (int k = 0; k < live.size(); k++) {
                LiveBlock info = live.get(k);
                long addr = info.address();
                long next = k + 1 < live.size() ? live.get(k + 1).address() : seg.end();
                long size = info.size();
                boolean exact = size != LiveBlock.INFERRED;
                if (!exact) {
                    long rounded = SizeRules.roundSize(info.request(), config);
                    size = inferSize(addr, rounded, next, info.freeIndex(), seg.pool(), slackIndex);
                    if (size != rounded) {
                        inferred++;
                    }
                }
                size = Math.min(size, next - addr);
                if (addr > cursor) {
                    blocks.add(freeBlock(cursor, addr, freeByEnd));
                }
                blocks.add(BlockInfo.of(addr, size, info.request(), BlockState.ACTIVE_ALLOCATED));
                cursor = addr + size;
            }
            if (cursor < seg.end()) {
                blocks.add(freeBlock(cursor, seg.end(), freeByEnd));
            }
            out.add(SegmentInfo.ofBlocks(
                    device,
                    seg.address(),
                    seg.stream(),
                    seg.expandable() ? poolOfBlocks(blocks, seg.pool()) : seg.pool(),
                    seg.expandable(),
                    Collections.unmodifiableList(blocks)));
        }
        long cutSegment = segmentAllocCutOff(fields, trace.size(), out);
        if (cutSegment != 0) {
            out.removeIf(s -> s.address() == cutSegment);
        }
        return new WindowStart(
                device,
                Collections.unmodifiableList(out),
                Collections.unmodifiableSet(preWindowFreed),
                inferred,
                new FreeMatches(
                        pass.matches,
                        pass.hasCompletions,
                        pass.allocOrdinal + pass.freeing + pass.releases,
                        pass.allocOrdinal),
                cutSegment,
                Collections.unmodifiableMap(startSegments.madeInWindow),
                Collections.unmodifiableMap(startSegments.reachInWindow));
    }

    /**
     * The address of the segment cudaMalloc'd for the window's first entry just before the window opened, or 0.
     *
     * <p>A history ring can cut between a request's {@code segment_alloc} and its {@code alloc}: the window then opens
     * with an {@code alloc} at the base of a segment the rebuild finds wholly free (the walk back from the end state
     * cannot tell it from a cached one). Mostly the replay does not need to know: a request PyTorch found no cached
     * block for would be served by that segment, cached or fresh. Not under {@code max_split_size_mb} when the
     * segment is oversize and the request is not: a cached oversize block never serves a smaller request
     * ({@code get_free_block}), while a fresh segment does. There the segment cannot have been cached, so it was made
     * for this request: the start state is the one before it. The segment's size must be the one
     * {@code get_allocation_size} gives the request, on its stream.
     */
    private long segmentAllocCutOff(EntryFields fields, int entries, List<SegmentInfo> start) {
        if (entries == 0 || fields.action(0) != TraceAction.ALLOC) {
            return 0;
        }
        long address = fields.addr(0);
        long rounded = SizeRules.roundSize(fields.size(0), config);
        long maxSplit = config.maxSplitSize();
        if (address == 0 || rounded >= maxSplit) {
            return 0;
        }
        for (SegmentInfo s : start) {
            if (s.address() == address) {
                boolean wholeFree = s.blocks().size() == 1 && s.blocks().get(0).state() == BlockState.INACTIVE;
                boolean madeForIt = !s.expandable()
                        && s.stream() == fields.stream(0)
                        && s.totalSize() == SizeRules.allocationSize(rounded)
                        && s.totalSize() >= maxSplit;
                return wholeFree && madeForIt ? address : 0;
            }
        }
        return 0;
    }

    /**
     * The pool a mapped run's live blocks show, else {@code guessed}. A large-pool block serves a request rounded
     * above 1 MiB and a small-pool block one rounded to at most 1 MiB, whose remainder it splits off from 512 bytes,
     * so a live block longer than 1 MiB is the large pool's and any other the small pool's. The walk back assigns an
     * unmapped range by its neighbours, which a reservation given back and handed to another stream's segment can
     * mislead; the blocks cannot.
     */
    private static Pool poolOfBlocks(List<BlockInfo> blocks, Pool guessed) {
        Pool shown = null;
        for (BlockInfo b : blocks) {
            if (b.state() != BlockState.INACTIVE) {
                Pool p = b.size() > SizeRules.SMALL_SIZE ? Pool.LARGE : Pool.SMALL;
                if (shown != null && shown != p) {
                    return guessed;
                }
                shown = p;
            }
        }
        return shown != null ? shown : guessed;
    }

    /** Whether the trace has {@code free_completed} entries (then they, not the requests, free blocks). */
    private static boolean recordsFreeCompletions(EntryFields fields, int entries) {
        for (int i = 0; i < entries; i++) {
            if (fields.action(i) == TraceAction.FREE_COMPLETED) {
                return true;
            }
        }
        return false;
    }

    /** Whether the forward pass's state of an address holds a block at the window's end (allocated or freed late). */
    private static boolean heldInWindow(int state) {
        return state >= 0 || state == PRE_FREE_REQUESTED || state == PRE_FREE_REQUESTED_GONE;
    }

    /** The free block [from, to) at the start, with the requested size its object shows if it survives. */
    private static BlockInfo freeBlock(long from, long to, AddressTable<BlockInfo> freeByEnd) {
        BlockInfo survivor = to == 0 ? null : freeByEnd.get(to);
        long requested = survivor != null && survivor.address() >= from ? Math.max(0, survivor.requestedSize()) : 0;
        return BlockInfo.of(from, to - from, requested, BlockState.INACTIVE);
    }

    private long inferSize(long addr, long rounded, long next, long freeIndex, Pool pool, SlackIndex firstAllocIndex) {
        long end = addr + rounded;
        if (end >= next) {
            return rounded;
        }
        if (!SizeRules.shouldSplit(next - end, rounded, pool, config.expandableSegments(), config.maxSplitSize())) {
            return next - addr; // gap rule
        }
        long slack =
                SizeRules.largestUnsplitRemainder(rounded, pool, config.expandableSegments(), config.maxSplitSize());
        if (slack < 0) {
            return next - addr;
        }
        // Slack rule: an alloc inside (end, end + slack] while this block was still live marks its end.
        long marker = firstAllocIndex.lowestAllocatedBefore(end, end + slack, freeIndex);
        return marker != NO_ADDRESS ? marker - addr : rounded;
    }

    /** What {@link SlackIndex#lowestAllocatedBefore} returns when no address qualifies (0 is never an alloc's). */
    private static final long NO_ADDRESS = 0;

    /**
     * The window's alloc addresses, each with the trace index of its first alloc, for the slack rule: built on first
     * use (most rebuilds infer no size, so the forward pass keeps nothing for it) by one more walk over the trace's
     * alloc entries, as two parallel arrays sorted by address, the distinct addresses and their first indexes, found
     * with one hash probe per alloc (a sorted map of boxed pairs cost about 60 bytes per address, and a lookup per
     * alloc in a tree: the larger part of a rebuild from an early entry of a 276 MB snapshot, which walks nearly all
     * of it). Addresses compare as signed longs, as that map's keys did.
     */
    private static final class SlackIndex {
        private final EntryFields fields;
        private final int entries;
        /** Distinct alloc addresses, ascending; null until first used. */
        private long @Nullable [] sorted;
        /** {@code first[j]}: the trace index of the first alloc at {@code sorted[j]}. */
        private int @Nullable [] first;

        /** @param fields the trace's entries, {@code entries} of them */
        SlackIndex(EntryFields fields, int entries) {
            this.fields = fields;
            this.entries = entries;
        }

        /**
         * The lowest address in {@code (from, to]} whose first alloc came before trace index {@code before}, or
         * {@link #NO_ADDRESS}.
         */
        long lowestAllocatedBefore(long from, long to, long before) {
            long[] keys = sorted;
            int[] firsts = first;
            if (keys == null || firsts == null) {
                build();
                keys = sorted;
                firsts = first;
            }
            int j = Arrays.binarySearch(keys, from);
            for (j = j >= 0 ? j + 1 : -j - 1; j < keys.length && keys[j] <= to; j++) {
                if (firsts[j] < before) {
                    return keys[j];
                }
            }
            return NO_ADDRESS;
        }

        private void build() {
            // trace order: the first index met for an address is its first alloc's; addresses repeat (a cache reuses
            // them), so the table holds the distinct ones, far fewer than the allocs
            AddressTable<Void> firstOf = AddressTable.forInts(Math.min(entries, 1 << 12));
            long[] keys = new long[Math.min(Math.max(entries, 1), 1 << 12)];
            int m = 0;
            for (int i = 0; i < entries; i++) {
                if (fields.action(i) != TraceAction.ALLOC) {
                    continue;
                }
                long a = fields.addr(i);
                if (a == 0) {
                    continue;
                }
                if (firstOf.getInt(a, -1) < 0) {
                    firstOf.putInt(a, i, -1);
                    if (m == keys.length) {
                        keys = Arrays.copyOf(keys, m * 2);
                    }
                    keys[m++] = a;
                }
            }
            keys = Arrays.copyOf(keys, m);
            Arrays.sort(keys);
            int[] firsts = new int[m];
            for (int j = 0; j < m; j++) {
                firsts[j] = firstOf.getInt(keys[j], -1);
            }
            sorted = keys;
            first = firsts;
        }
    }

    /**
     * Segments that existed at the window's start, keyed by address.
     *
     * @param endState the device's segments at the end of the window (the snapshot's)
     * @param segmentEvents the indices of the trace's segment events, ascending, in {@code [0, segmentEventCount)}
     */
    private SegsByAddress startSegments(
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
        reachInWindow(groups, groupOf, fields, segmentEvents, segmentEventCount, segs.reachInWindow);
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
     * How far up the window maps in each start reservation: walking the segment events forward from the start runs
     * ({@code groups}, per (stream, pool) group; {@code groupOf} the group of each map and unmap), the highest end a
     * map of a group reaches while the group has anything mapped, that is before its start reservation is wholly
     * unmapped and given back (a later map of the group makes a new reservation). Recorded against the group's highest
     * start run where it lies above that run's end: the start reservation ends at or above it, which the replay's
     * placement of reservations must respect (a reservation placed right after another may end at its highest run).
     */
    private static void reachInWindow(
            Map<List<Long>, NavigableMap<Long, Long>> groups,
            List<List<Long>> groupOf,
            EntryFields fields,
            int[] segmentEvents,
            int segmentEventCount,
            Map<Long, Long> reach) {
        Map<List<Long>, NavigableMap<Long, Long>> mapped = new HashMap<>();
        Map<List<Long>, Long> highest = new HashMap<>();
        groups.forEach((key, runs) -> {
            if (!runs.isEmpty()) {
                mapped.put(key, new TreeMap<>(runs));
                highest.put(key, runs.lastEntry().getValue());
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

    /**
     * The forward pass of {@link #rebuild}, a chunk of entries at a time: which addresses the window itself
     * allocated, which frees hit older blocks, what each freeing entry frees ({@link FreeMatches}), and where the
     * segment events are. Addresses stay in {@link #state} once touched (UNTOUCHED vs GONE). A class of its own rather
     * than a loop of the rebuild, so that the JIT compiles this small method early (and from the launcher's
     * ahead-of-time profile), where a cold command would otherwise walk millions of entries in the interpreter and in
     * profiled code until it had compiled the whole of the large method around the loop.
     */
    private static final class ForwardPass {
        /** Entries per call of {@link #run}: enough to make the call's cost nothing, few enough to compile it soon. */
        static final int CHUNK = 1 << 10;

        final EntryFields fields;
        final boolean hasCompletions;
        int[] segmentEvents = new int[16];
        int segmentEventCount;
        /**
         * Sized up front from the trace's length: a trace reuses its addresses heavily (lm2.7b: 1,868 distinct in
         * 19,342 entries), so an eighth of the entries, at most 4,096, holds most windows without growing, and a
         * table grown mid-pass (from the 1,024 it started with) was 35 of the 310 µs of lm2.7b's rebuild.
         */
        final AddressTable<Void> state;

        int allocOrdinal;
        int freeing;
        int releases;
        final int[] matches;
        final List<PreFreed> preFreed = new ArrayList<>();
        final AddressTable<Void> preFreedSlot = AddressTable.forInts(64);
        private static final TraceAction[] ACTIONS = TraceAction.values();
        /** The chunk's actions and addresses, read in bulk before its loop. */
        private final byte[] actions = new byte[CHUNK];

        private final long[] addrs = new long[CHUNK];

        ForwardPass(EntryFields fields, boolean hasCompletions, int entries) {
            this.fields = fields;
            this.hasCompletions = hasCompletions;
            this.matches = new int[entries];
            this.state = AddressTable.forInts(Math.min(entries / 8, 1 << 12));
        }

        /**
         * Entries {@code from} to {@code to} (exclusive), in order. The counters and growing arrays are copied into
         * locals for the chunk and back after it, so the loop keeps them in registers, as a loop of the rebuild
         * itself would.
         */
        void run(int from, int to) {
            int[] segmentEvents = this.segmentEvents;
            int segmentEventCount = this.segmentEventCount;
            int allocOrdinal = this.allocOrdinal;
            int freeing = this.freeing;
            int releases = this.releases;
            byte[] actions = this.actions;
            long[] addrs = this.addrs;
            fields.actionOrdinals(from, to, actions);
            fields.addrs(from, to, addrs);
            for (int i = from; i < to; i++) {
                long a = addrs[i - from];
                TraceAction action = ACTIONS[actions[i - from]];
                switch (action) {
                    case ALLOC -> {
                        int ordinal = allocOrdinal++;
                        if (a == 0) {
                            break;
                        }
                        state.putInt(a, ordinal, UNTOUCHED);
                    }
                    case FREE_REQUESTED -> {
                        freeing += hasCompletions ? 0 : 1;
                        if (a == 0) {
                            break;
                        }
                        int s = state.getInt(a, UNTOUCHED);
                        if (s == UNTOUCHED || s == GONE) {
                            if (s == UNTOUCHED) { // a block from before the window (GONE: a second free, of nothing)
                                preFreedSlot.putInt(a, preFreed.size(), -1);
                                preFreed.add(new PreFreed(a, fields.size(i), i));
                            }
                            if (hasCompletions) {
                                state.putInt(
                                        a, s == UNTOUCHED ? PRE_FREE_REQUESTED : PRE_FREE_REQUESTED_GONE, UNTOUCHED);
                            } else {
                                matches[i] = FreeMatches.encode(
                                        s == UNTOUCHED ? FreeMatches.START_BLOCK : FreeMatches.NOTHING);
                                state.putInt(a, GONE, UNTOUCHED);
                            }
                        } else if (s >= 0 && !hasCompletions) { // a window block, freed now
                            matches[i] = FreeMatches.encode(s);
                            state.putInt(a, GONE, UNTOUCHED);
                        }
                    }
                    case FREE_COMPLETED -> {
                        freeing++;
                        if (a == 0) {
                            break;
                        }
                        int s = state.putInt(a, GONE, UNTOUCHED);
                        if (s >= 0) {
                            matches[i] = FreeMatches.encode(s);
                        } else if (s == UNTOUCHED) {
                            preFreed.add(new PreFreed(a, fields.size(i), i));
                            matches[i] = FreeMatches.encode(FreeMatches.START_BLOCK);
                        } else if (s == PRE_FREE_REQUESTED) { // pre-window block whose free was requested in the window
                            int slot = preFreedSlot.getInt(a, 0);
                            preFreed.set(slot, preFreed.get(slot).freedAt(i));
                            matches[i] = FreeMatches.encode(FreeMatches.START_BLOCK);
                        } else { // GONE, PRE_FREE_REQUESTED_GONE: a second free of the address, of nothing
                            matches[i] = FreeMatches.encode(FreeMatches.NOTHING);
                        }
                    }
                    default -> {
                        if (action.isSegmentEvent()) {
                            if (action == TraceAction.SEGMENT_FREE || action == TraceAction.SEGMENT_UNMAP) {
                                releases++;
                            }
                            if (segmentEventCount == segmentEvents.length) {
                                segmentEvents = Arrays.copyOf(segmentEvents, segmentEventCount * 2);
                            }
                            segmentEvents[segmentEventCount++] = i;
                        }
                    }
                }
            }
            this.segmentEvents = segmentEvents;
            this.segmentEventCount = segmentEventCount;
            this.allocOrdinal = allocOrdinal;
            this.freeing = freeing;
            this.releases = releases;
        }
    }
}
