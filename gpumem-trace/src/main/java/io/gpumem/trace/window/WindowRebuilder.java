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
import io.gpumem.trace.window.StartSegmentWalk.Seg;
import io.gpumem.trace.window.StartSegmentWalk.SegIndex;
import io.gpumem.trace.window.StartSegmentWalk.SegsByAddress;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.jspecify.annotations.Nullable;

/**
 * Rebuilds the allocator state at the first entry of a trace window (docs/replay-method.md §2 "Start state").
 *
 * <p>A snapshot's trace is a window over a longer run: blocks allocated before recording began show up
 * only in the end-state segments, or as frees without a matching alloc. The state at the window's start
 * follows from the end state and the trace:
 * <ol>
 *   <li><b>Segments</b>: walked back from the end-state segments through the window's segment events, with the
 *       expandable reservations the window makes and how far each start reservation reaches
 *       ({@link StartSegmentWalk}). An expandable run holding live blocks takes the pool they show (a large-pool
 *       block is longer than 1 MiB, a small-pool one never is): a reservation given back is handed to another
 *       stream's next segment, which can mislead the walk.</li>
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
 *       one that need not end where the start block ended. The rebuild does not follow it there (it plays nothing),
 *       so such a value the window shows is not taken here: a replay that writes its snapshot takes it, by playing
 *       the window with marks on the start's free blocks ({@code FreeBlockMarks} in the replay package,
 *       docs/replay-method.md §2).</li>
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
    private final StartSegmentWalk segmentWalk;

    /** @param config the configuration the trace was recorded under (round_size and split rules) */
    public WindowRebuilder(AllocatorConfig config) {
        this.config = config;
        this.segmentWalk = new StartSegmentWalk(config);
    }

    /**
     * A block live at the window's start.
     *
     * @param address   its address
     * @param size      its size, or {@link #INFERRED} when only its request is known (freed in the window)
     * @param request   the size requested for it
     * @param freeIndex the trace entry that frees it, {@link Long#MAX_VALUE} when it outlives the window
     */
    record LiveBlock(long address, long size, long request, long freeIndex) {
        static final long INFERRED = -1;
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
        SegsByAddress startSegments =
                segmentWalk.startSegments(endState, trace, pass.segmentEvents, pass.segmentEventCount);
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
                Collections.unmodifiableMap(startSegments.reachInWindow),
                Collections.unmodifiableMap(startSegments.floorInWindow));
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
