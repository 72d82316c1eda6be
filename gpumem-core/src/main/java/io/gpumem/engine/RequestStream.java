package io.gpumem.engine;

import io.gpumem.history.BlockInfo;
import io.gpumem.history.Frame;
import io.gpumem.history.SegmentInfo;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.jspecify.annotations.Nullable;

/**
 * The one request stream every what-if source compiles into (trace windows, generated workloads, ops scripts,
 * lifetime CSVs, RMM logs) and {@link StreamRunner} plays on any allocator: what a program asks of the allocator,
 * with nothing about where it lands. Ops are parallel primitive arrays (no object per op), so a replay touches
 * no hash map and boxes nothing per op.
 *
 * <p>Blocks are numbered by <i>slot</i>: slots {@code 0 .. startBlocks()-1} are the live blocks of the optional
 * start state (in the order {@link #forEachLiveBlock} visits them), the following slots are the stream's allocs
 * in op order. A replay keeps the address its allocator returned for each slot in a {@code long[]}.
 *
 * <p>Ops: {@link #ALLOC} (slot, size, stream index), {@link #FREE} (slot of an earlier alloc or start block),
 * {@link #EMPTY_CACHE} ({@code torch.cuda.empty_cache()}), {@link #STEP} (a step boundary of an iterated
 * workload; the first STEP opens step 0). Each op also keeps the index of the source entry it came from (a trace
 * entry, a script line; −1 when none), an optional <i>site</i> (an index into {@link #sites()}, the stacks a run
 * with history attaches to the op; −1: {@link #defaultFrames()}) and an optional time in microseconds.
 *
 * <p>Invariants (checked by {@link Builder#build}): every FREE names a slot that is live at that point, no slot
 * is freed twice, and streams are indexes into {@link #streams()}, the distinct stream handles of the allocs and
 * the start state in unsigned ascending order (or in order of first use, {@link Builder#streamsInFirstUseOrder}).
 */
public final class RequestStream {

    public static final byte ALLOC = 1;
    public static final byte FREE = 2;
    public static final byte EMPTY_CACHE = 3;
    public static final byte STEP = 4;

    /**
     * How much larger than its request a block may be and still stand for it when a loop is closed
     * ({@link #iterated}, {@link #loopClosure}): a large block is its request rounded to 512 bytes plus an unsplit
     * remainder below 1 MiB, within a segment rounded to 2 MiB.
     */
    static final long ROUNDING_SLACK = 2L << 20;

    final byte[] op;
    final int[] slot;
    final long[] size;
    final int[] streamIndex;
    final int[] entry;
    /** Per-op site, or null when no op has one. */
    final int @Nullable [] site;
    /** Per-op time in microseconds, or null when the source has none. */
    final long @Nullable [] time;

    final long[] streams;
    final int length;
    final int startBlocks;
    final int slots;
    final int allocs;
    final int steps;
    /** The most slots live at once (start blocks included), counted as the builder appended the ops. */
    private final int peakLive;
    /**
     * {@link #peakLiveBytes()} once asked (−1 before): every minimum-capacity search and every what-if row of a
     * workload asks it, and it walks the whole stream with an array of a long per slot.
     */
    private volatile long peakLiveBytes = -1;

    private final List<SegmentInfo> start;
    private final List<List<Frame>> sites;
    private final List<Frame> defaultFrames;
    /** Whether {@link #streams} is in order of first use ({@link Builder#streamsInFirstUseOrder}). */
    private final boolean firstUseOrder;

    /**
     * Takes the builder's arrays as they are when they are at most an eighth longer than the ops (a builder sized
     * from a close bound, such as a trace window's), else copies them to length: a stream's arrays may be longer
     * than {@link #length}, and nothing reads past it.
     */
    private RequestStream(Builder b, int[] streamIndex, long[] streams) {
        this.length = b.length;
        boolean adopt = b.op.length - length <= b.op.length / 8;
        this.op = adopt ? b.op : Arrays.copyOf(b.op, length);
        this.slot = adopt ? b.slot : Arrays.copyOf(b.slot, length);
        this.size = adopt ? b.size : Arrays.copyOf(b.size, length);
        this.entry = adopt ? b.entry : Arrays.copyOf(b.entry, length);
        this.site = b.site == null ? null : adopt ? b.site : Arrays.copyOf(b.site, length);
        this.time = b.time == null ? null : adopt ? b.time : Arrays.copyOf(b.time, length);
        this.streamIndex = streamIndex;
        this.streams = streams;
        this.startBlocks = b.startBlocks;
        this.slots = b.slots;
        this.allocs = b.allocs;
        this.steps = b.steps;
        this.peakLive = b.peakLive;
        this.start = b.start;
        this.sites = List.copyOf(b.sites);
        this.defaultFrames = b.defaultFrames;
        this.firstUseOrder = b.firstUseOrder;
    }

    public static Builder builder() {
        return new Builder();
    }

    /** A builder sized for about {@code expectedOps} ops (and as many slots) before it grows. */
    public static Builder builder(int expectedOps) {
        return new Builder(expectedOps);
    }

    /** Number of ops. */
    public int length() {
        return length;
    }

    public byte op(int k) {
        return op[k];
    }

    public int slot(int k) {
        return slot[k];
    }

    /** The request size of an ALLOC op (the caller's unrounded bytes); 0 for other ops. */
    public long size(int k) {
        return size[k];
    }

    /** The source entry op {@code k} came from, or −1. */
    public int entry(int k) {
        return entry[k];
    }

    /** The stream handle of an ALLOC op. */
    public long stream(int k) {
        return streams[streamIndex[k]];
    }

    /** The index in {@link #streams()} of an ALLOC op's stream (0 for other ops). */
    public int streamIndex(int k) {
        return streamIndex[k];
    }

    /** {@link #size} of every op, in op order (a copy: a benchmark's replay loop reads it without a call). */
    public long[] requestSizes() {
        return Arrays.copyOf(size, length);
    }

    /** {@link #streamIndex} of every op, in op order (a copy). */
    public int[] streamIndexes() {
        return Arrays.copyOf(streamIndex, length);
    }

    /** The stacks a run with history attaches to op {@code k}. */
    public List<Frame> frames(int k) {
        int s = site == null ? -1 : site[k];
        return s < 0 ? defaultFrames : sites.get(s);
    }

    /** The distinct stream handles, unsigned ascending. */
    public long[] streams() {
        return streams.clone();
    }

    /** Number of ALLOC ops. */
    public int allocs() {
        return allocs;
    }

    /** Number of STEP ops (0 for a stream that is not iterated). */
    public int steps() {
        return steps;
    }

    /** Slots: start blocks plus allocs. */
    public int slots() {
        return slots;
    }

    /** Live blocks of the start state (the first slots). */
    public int startBlocks() {
        return startBlocks;
    }

    /** The segments the stream starts from (empty: an empty allocator). */
    public List<SegmentInfo> startState() {
        return start;
    }

    /** The distinct stacks ops refer to by site. */
    public List<List<Frame>> sites() {
        return sites;
    }

    /** The stacks of ops without a site. */
    public List<Frame> defaultFrames() {
        return defaultFrames;
    }

    /**
     * Peak of the sum of live request sizes (start blocks by their size): the floor no allocator goes below.
     *
     * <p>Exact: every request is under 2^63 bytes, but many of them live at once can add up past it, and a wrapped
     * sum would be a wrong floor that looks plausible (a model of 2^64 bytes read as 8 EiB less), so the sum is
     * checked instead.
     *
     * @throws ArithmeticException when the live sizes add up to more than {@link Long#MAX_VALUE} bytes
     */
    public long peakLiveBytes() {
        long known = peakLiveBytes;
        if (known < 0) {
            known = computePeakLiveBytes();
            peakLiveBytes = known; // the same value whichever thread computes it first
        }
        return known;
    }

    private long computePeakLiveBytes() {
        long[] bytes = new long[slots];
        long[] live = {0};
        int[] s = {0};
        forEachLiveBlock(start, (seg, b) -> {
            bytes[s[0]++] = b.size();
            live[0] = addLive(live[0], b.size(), "the start state's live blocks");
        });
        long peak = live[0];
        long now = live[0];
        for (int k = 0; k < length; k++) {
            if (op[k] == ALLOC) {
                bytes[slot[k]] = size[k];
                now = addLive(now, size[k], "the requests live at op " + k);
                peak = Math.max(peak, now);
            } else if (op[k] == FREE) {
                now -= bytes[slot[k]];
            }
        }
        return peak;
    }

    private static long addLive(long sum, long size, String what) {
        long total = sum + size;
        if (total < sum) { // sizes are non-negative, so a sum that went down wrapped
            throw new ArithmeticException(what + " add up to more than " + Long.MAX_VALUE + " bytes (2^63 - 1)");
        }
        return total;
    }

    /**
     * The slot of each op renumbered so that an alloc takes the slot freed most recently, or a new one when none is
     * free (start blocks keep the first slots; −1 for ops without a slot). A replay that keeps one address per slot
     * then needs an array only {@link #peakLiveBlocks()} long, where {@link #slots()} grows with every alloc: the
     * compact view a benchmark's loop keeps hot in cache.
     */
    public int[] compactSlots() {
        int[] compact = new int[length];
        int[] renamed = new int[slots];
        int[] free = new int[slots + 1]; // stack of freed compact slots, most recent on top
        int top = 0;
        int used = startBlocks;
        for (int i = 0; i < startBlocks; i++) {
            renamed[i] = i;
        }
        for (int k = 0; k < length; k++) {
            switch (op[k]) {
                case ALLOC -> {
                    int c = top > 0 ? free[--top] : used++;
                    renamed[slot[k]] = c;
                    compact[k] = c;
                }
                case FREE -> {
                    int c = renamed[slot[k]];
                    free[top++] = c;
                    compact[k] = c;
                }
                default -> compact[k] = -1;
            }
        }
        return compact;
    }

    /** The most blocks live at once, start blocks included: the number of distinct {@link #compactSlots()}. */
    public int peakLiveBlocks() {
        return peakLive;
    }

    /**
     * The stream's first {@code ops} ops, from the same start state: what a replay plays to reach the state after a
     * prefix of its source. Slots keep their numbers (start blocks first, then the allocs in op order); sites, times,
     * source entries and the default stacks are kept; the stream table holds the handles the prefix uses.
     *
     * @throws IllegalArgumentException when {@code ops} is outside {@code [0, length()]}
     */
    public RequestStream prefix(int ops) {
        if (ops < 0 || ops > length) {
            throw new IllegalArgumentException("prefix of " + ops + " ops, outside [0, " + length + "]");
        }
        Builder b = builder(ops).defaultFrames(defaultFrames).startState(start);
        if (firstUseOrder) {
            b.streamsInFirstUseOrder();
        }
        for (int k = 0; k < ops; k++) {
            switch (op[k]) {
                case ALLOC -> b.alloc(size[k], stream(k), entry[k]);
                case FREE -> b.free(slot[k], entry[k]);
                case EMPTY_CACHE -> b.emptyCache(entry[k]);
                default -> b.step(entry[k]);
            }
            if (site != null && site[k] >= 0) {
                b.atSite(b.site(sites.get(site[k])));
            }
            if (time != null) {
                b.at(time[k]);
            }
        }
        return b.build();
    }

    /**
     * The number of ops whose source entry is at most {@code entry}: the length of the prefix that reaches the state
     * after that entry, for a stream compiled from its source in order (source entries never decrease).
     */
    public int opsThroughEntry(int entry) {
        int lo = 0;
        int hi = length;
        while (lo < hi) {
            int mid = (lo + hi) >>> 1;
            if (this.entry[mid] <= entry) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        return lo;
    }

    /**
     * Ops {@code [from, to)} as a stream that can be played in an endless loop: its allocs and frees (steps and
     * {@code empty_cache} calls dropped), then a free of every block it allocated and left live, in allocation
     * order. The result has no start state and as many frees as allocs, so every pass through it leaves the
     * allocator's live set as it found it. Sites, times and source entries are kept.
     *
     * @throws IllegalArgumentException when an op of the range frees a block allocated before it
     */
    public RequestStream balanced(int from, int to) {
        if (from < 0 || to > length || from > to) {
            throw new IllegalArgumentException("op range [" + from + ", " + to + ") outside [0, " + length + ")");
        }
        Builder b = builder().defaultFrames(defaultFrames);
        int[] slotIn = new int[slots];
        Arrays.fill(slotIn, -1);
        for (int k = from; k < to; k++) {
            if (op[k] == ALLOC) {
                slotIn[slot[k]] = b.alloc(size[k], stream(k), entry[k]);
            } else if (op[k] == FREE) {
                if (slotIn[slot[k]] < 0) {
                    throw new IllegalArgumentException("op " + k + " (entry " + entry[k] + ") frees a block allocated"
                            + " before op " + from + ", where the balanced stream starts");
                }
                b.free(slotIn[slot[k]], entry[k]);
            } else {
                continue;
            }
            if (site != null && site[k] >= 0) {
                b.atSite(b.site(sites.get(site[k])));
            }
            if (time != null) {
                b.at(time[k]);
            }
        }
        for (int s : slotIn) {
            if (s >= 0 && b.isLive(s)) {
                b.free(s, -1);
            }
        }
        return b.build();
    }

    /**
     * The stream as the body of a loop run from its live blocks alone (the steady state of a window that starts
     * warm): no start state; the start state's live blocks are its first requests, on their segment's stream,
     * those the stream never frees first (the program's persistent state), then those it frees (the previous step's
     * outputs), each in slot order; then {@code passes} passes of the ops (a STEP opens each; the source's own STEP ops are
     * dropped, its {@code empty_cache} calls kept). In the first pass a free of a start block frees the block
     * allocated for it; at the end of each pass every block the pass allocated and left live stands for the start
     * block freed earliest whose size it has (the previous step's outputs that the next step frees), in
     * allocation order, and the rest are freed, so nothing accumulates over passes; a start block freed with no
     * such partner is allocated afresh. Sites, times and source entries are kept.
     *
     * @throws IllegalArgumentException when {@code passes} is below 1
     */
    public RequestStream iterated(int passes) {
        if (passes < 1) {
            throw new IllegalArgumentException("passes must be at least 1, got " + passes);
        }
        Builder b = builder(startBlocks + passes * (length + 1)).defaultFrames(defaultFrames);
        int[] startSlot = new int[startBlocks];
        long[] startSize = new long[startBlocks];
        long[] startStream = new long[startBlocks];
        int[] i = {0};
        forEachLiveBlock(start, (seg, blk) -> {
            startSize[i[0]] = blk.size();
            startStream[i[0]] = seg.stream();
            i[0]++;
        });
        long[] allocSize = new long[slots];
        int[] freedStart = new int[startBlocks]; // start blocks in the order a pass frees them
        boolean[] freedInPass = new boolean[startBlocks];
        int nFreed = 0;
        for (int k = 0; k < length; k++) {
            if (op[k] == FREE && slot[k] < startBlocks) {
                freedInPass[slot[k]] = true;
                freedStart[nFreed++] = slot[k];
            } else if (op[k] == ALLOC) {
                allocSize[slot[k]] = size[k];
            }
        }
        // the blocks the loop keeps (parameters, optimizer state) came first in the program, then the previous
        // step's outputs that the window frees
        for (int round = 0; round < 2; round++) {
            for (int s = 0; s < startBlocks; s++) {
                boolean first = !freedInPass[s];
                if (first == (round == 0)) {
                    startSlot[s] = b.alloc(startSize[s], startStream[s], -1);
                }
            }
        }
        int[] slotIn = new int[slots];
        for (int pass = 0; pass < passes; pass++) {
            Arrays.fill(slotIn, -1);
            System.arraycopy(startSlot, 0, slotIn, 0, startBlocks);
            b.step(-1);
            for (int k = 0; k < length; k++) {
                switch (op[k]) {
                    case ALLOC -> slotIn[slot[k]] = b.alloc(size[k], stream(k), entry[k]);
                    case FREE -> {
                        int s = slotIn[slot[k]];
                        if (s < 0 || !b.isLive(s)) {
                            continue;
                        }
                        b.free(s, entry[k]);
                    }
                    case EMPTY_CACHE -> b.emptyCache(entry[k]);
                    default -> {
                        continue;
                    }
                }
                if (site != null && site[k] >= 0) {
                    b.atSite(b.site(sites.get(site[k])));
                }
                if (time != null) {
                    b.at(time[k]);
                }
            }
            if (pass == passes - 1) {
                break;
            }
            // the blocks this pass left live, in allocation order, stand for the start blocks it freed
            int nLeft = 0;
            int[] leftSlot = new int[slots - startBlocks];
            long[] leftSize = new long[slots - startBlocks];
            for (int s = startBlocks; s < slots; s++) {
                if (slotIn[s] >= 0 && b.isLive(slotIn[s])) {
                    leftSlot[nLeft] = slotIn[s];
                    leftSize[nLeft++] = allocSize[s];
                }
            }
            long[] freedSize = new long[nFreed];
            for (int t = 0; t < nFreed; t++) {
                freedSize[t] = startSize[freedStart[t]];
            }
            int[] pairedWith = pairBySize(freedSize, leftSize, nLeft);
            boolean[] standsIn = new boolean[nLeft];
            int[] partner = new int[nFreed];
            for (int t = 0; t < nFreed; t++) {
                partner[t] = pairedWith[t] < 0 ? -1 : leftSlot[pairedWith[t]];
                if (pairedWith[t] >= 0) {
                    standsIn[pairedWith[t]] = true;
                }
            }
            for (int j = 0; j < nLeft; j++) {
                if (!standsIn[j]) {
                    b.free(leftSlot[j], -1);
                }
            }
            for (int t = 0; t < nFreed; t++) {
                int s = freedStart[t];
                startSlot[s] = partner[t] >= 0 ? partner[t] : b.alloc(startSize[s], startStream[s], -1);
            }
        }
        return b.build();
    }

    /**
     * How well the stream closes as a loop body: the fraction of the start blocks it frees that it allocates again
     * (a block of the same size, left live at its end: the previous step's outputs that this step makes anew). A
     * stream that frees no start block closes when it also leaves nothing live (1: a stateless loop such as
     * inference) and does not when it leaves blocks live (0: a window that only fills memory, such as a first step).
     */
    public double loopClosure() {
        long[] startSize = new long[startBlocks];
        int[] startIndex = {0};
        forEachLiveBlock(start, (seg, blk) -> startSize[startIndex[0]++] = blk.size());
        boolean[] liveAtEnd = new boolean[slots];
        long[] allocSize = new long[slots];
        long[] freedSize = new long[startBlocks];
        int nFreed = 0;
        for (int k = 0; k < length; k++) {
            if (op[k] == ALLOC) {
                liveAtEnd[slot[k]] = true;
                allocSize[slot[k]] = size[k];
            } else if (op[k] == FREE) {
                if (slot[k] < startBlocks) {
                    freedSize[nFreed++] = startSize[slot[k]];
                }
                liveAtEnd[slot[k]] = false;
            }
        }
        long[] leftSize = new long[slots];
        int nLeft = 0;
        for (int s = startBlocks; s < slots; s++) {
            if (liveAtEnd[s]) {
                leftSize[nLeft++] = allocSize[s];
            }
        }
        if (nFreed == 0) {
            return nLeft == 0 ? 1.0 : 0.0;
        }
        int paired = 0;
        for (int j : pairBySize(Arrays.copyOf(freedSize, nFreed), leftSize, nLeft)) {
            paired += j >= 0 ? 1 : 0;
        }
        return (double) paired / nFreed;
    }

    /**
     * Pairs each start block (by its block size, in order) with a request left live (its request size, in order):
     * the first unpaired request of the same size, else the largest unpaired request below the block's size by less
     * than {@link #ROUNDING_SLACK} (a block is its request rounded up, with an unsplit remainder kept). Returns the
     * index of each block's request, or −1.
     */
    private static int[] pairBySize(long[] blockSize, long[] requestSize, int requests) {
        Map<Long, ArrayDeque<Integer>> bySize = new HashMap<>();
        for (int j = 0; j < requests; j++) {
            bySize.computeIfAbsent(requestSize[j], x -> new ArrayDeque<>()).add(j);
        }
        int[] pair = new int[blockSize.length];
        for (int t = 0; t < blockSize.length; t++) {
            ArrayDeque<Integer> same = bySize.get(blockSize[t]);
            pair[t] = same == null || same.isEmpty() ? -1 : same.poll();
        }
        TreeMap<Long, ArrayDeque<Integer>> rest = new TreeMap<>();
        bySize.forEach((size, left) -> {
            if (!left.isEmpty()) {
                rest.put(size, left);
            }
        });
        for (int t = 0; t < blockSize.length; t++) {
            if (pair[t] >= 0) {
                continue;
            }
            Map.Entry<Long, ArrayDeque<Integer>> below = rest.floorEntry(blockSize[t]);
            if (below != null && blockSize[t] - below.getKey() < ROUNDING_SLACK) {
                pair[t] = below.getValue().poll();
                if (below.getValue().isEmpty()) {
                    rest.remove(below.getKey());
                }
            }
        }
        return pair;
    }

    /** The index of {@code handle} in {@link #streams()}. */
    int streamIndexOf(long handle) {
        for (int i = 0; i < streams.length; i++) {
            if (streams[i] == handle) {
                return i;
            }
        }
        throw new IllegalArgumentException("stream " + handle + " is not in the request stream");
    }

    /** Visits a start state's live blocks. */
    @FunctionalInterface
    public interface LiveBlockVisitor {
        void visit(SegmentInfo segment, BlockInfo block);
    }

    /** Whether a start-state block holds a slot (it is allocated, or freed but waiting on stream events). */
    public static boolean isLive(BlockInfo block) {
        return block.state().isActive();
    }

    /** Visits the live blocks of {@code segments} in slot order. */
    public static void forEachLiveBlock(List<SegmentInfo> segments, LiveBlockVisitor visitor) {
        for (SegmentInfo seg : segments) {
            for (BlockInfo b : seg.blocks()) {
                if (isLive(b)) {
                    visitor.visit(seg, b);
                }
            }
        }
    }

    /**
     * Builds a {@link RequestStream} op by op. Start state first (its live blocks take the first slots), then ops
     * in order; {@link #alloc} returns the slot a later {@link #free} names.
     */
    public static final class Builder {
        private static final int LINEAR_HANDLES = 16;

        private byte[] op;
        private int[] slot;
        private long[] size;
        private int[] entry;
        /** Per-op sites and times, allocated by the first {@link #atSite} / {@link #at} (most sources have none). */
        private int @Nullable [] site;

        private long @Nullable [] time;
        /** Per ALLOC op, the index of its stream in {@link #handles} (first-use order); 0 for other ops. */
        private int[] handleIndex;
        /** The distinct stream handles of the allocs so far, in order of first use ({@code handleCount} of them). */
        private long[] handles = new long[4];

        private int handleCount;
        /** {@link #handles} by value, once there are more than {@link #LINEAR_HANDLES} (else searched in order). */
        private @Nullable Map<Long, Integer> handleByValue;
        /** The index of the last alloc's stream (streams change rarely from one alloc to the next); −1 before. */
        private int lastHandle = -1;

        private int length;
        private int startBlocks;
        private int slots;
        private int allocs;
        private int steps;
        /** Slots live now, and the most live at once so far. */
        private int liveNow;

        private int peakLive;
        private boolean[] live;
        private List<SegmentInfo> start = List.of();
        private final List<List<Frame>> sites = new ArrayList<>();
        private final IdentityHashMap<List<Frame>, Integer> siteIndex = new IdentityHashMap<>();
        private List<Frame> defaultFrames = List.of();
        private boolean firstUseOrder;
        /** Set by {@link #build}, whose stream may share this builder's arrays: a builder builds one stream. */
        private boolean built;

        private Builder() {
            this(1024);
        }

        private Builder(int expectedOps) {
            int n = Math.max(16, expectedOps);
            op = new byte[n];
            slot = new int[n];
            size = new long[n];
            entry = new int[n];
            handleIndex = new int[n];
            live = new boolean[n];
        }

        /** The state the stream starts from; its live blocks become slots 0.. in {@link #forEachLiveBlock} order. */
        public Builder startState(List<SegmentInfo> segments) {
            if (length > 0 || slots > 0) {
                throw new IllegalStateException("the start state comes before the first op");
            }
            start = List.copyOf(segments);
            forEachLiveBlock(start, (seg, b) -> markLive(slots++));
            startBlocks = slots;
            liveNow = slots;
            peakLive = slots;
            return this;
        }

        /** The stacks of ops without a site (default: none). */
        public Builder defaultFrames(List<Frame> frames) {
            defaultFrames = List.copyOf(frames);
            return this;
        }

        /**
         * Numbers the streams in order of first use instead of unsigned ascending (a generated workload's order:
         * the device creates its streams in that order).
         */
        public Builder streamsInFirstUseOrder() {
            firstUseOrder = true;
            return this;
        }

        /** The site of {@code frames} (the same list object gets the same site). */
        public int site(List<Frame> frames) {
            Integer s = siteIndex.get(frames);
            if (s == null) {
                s = sites.size();
                sites.add(frames);
                siteIndex.put(frames, s);
            }
            return s;
        }

        /** Appends an alloc of {@code bytes} on stream handle {@code stream}; returns its slot. */
        public int alloc(long bytes, long stream, int sourceEntry) {
            if (bytes < 0) {
                throw new IllegalArgumentException("entry " + sourceEntry + ": negative request size " + bytes);
            }
            int s = slots++;
            append(ALLOC, s, bytes, sourceEntry);
            handleIndex[length - 1] = handleIndexOf(stream);
            markLive(s);
            allocs++;
            peakLive = Math.max(peakLive, ++liveNow);
            return s;
        }

        /** The index of {@code stream} in {@link #handles}, added there on its first use. */
        private int handleIndexOf(long stream) {
            int last = lastHandle;
            if (last >= 0 && handles[last] == stream) {
                return last;
            }
            Map<Long, Integer> byHandle = handleByValue;
            int h = -1;
            if (byHandle != null) {
                h = byHandle.getOrDefault(stream, -1);
            } else {
                for (int i = 0; i < handleCount && h < 0; i++) {
                    h = handles[i] == stream ? i : -1;
                }
            }
            if (h < 0) {
                h = handleCount++;
                if (h == handles.length) {
                    handles = Arrays.copyOf(handles, h * 2);
                }
                handles[h] = stream;
                if (byHandle != null) {
                    byHandle.put(stream, h);
                } else if (handleCount > LINEAR_HANDLES) {
                    byHandle = new HashMap<>();
                    for (int i = 0; i < handleCount; i++) {
                        byHandle.put(handles[i], i);
                    }
                    handleByValue = byHandle;
                }
            }
            lastHandle = h;
            return h;
        }

        /** Appends a free of {@code slot}, which must be live. */
        public Builder free(int slot, int sourceEntry) {
            if (slot < 0 || slot >= slots || !live[slot]) {
                throw new IllegalArgumentException(
                        "entry " + sourceEntry + ": free of slot " + slot + ", which is not live");
            }
            live[slot] = false;
            liveNow--;
            append(FREE, slot, 0, sourceEntry);
            return this;
        }

        /** Whether {@code slot} is allocated and not yet freed. */
        public boolean isLive(int slot) {
            return slot >= 0 && slot < slots && live[slot];
        }

        public Builder emptyCache(int sourceEntry) {
            append(EMPTY_CACHE, -1, 0, sourceEntry);
            return this;
        }

        /** Appends a step boundary (the first opens step 0). */
        public Builder step(int sourceEntry) {
            append(STEP, -1, 0, sourceEntry);
            steps++;
            return this;
        }

        /** Gives the last op a site (see {@link #site}). */
        public Builder atSite(int site) {
            int[] sites = this.site;
            if (sites == null) {
                sites = new int[op.length];
                Arrays.fill(sites, -1);
                this.site = sites;
            }
            sites[length - 1] = site;
            return this;
        }

        /** Gives the last op a time in microseconds (a replay with history stamps its entries with it). */
        public Builder at(long timeMicros) {
            long[] times = this.time;
            if (times == null) {
                times = new long[op.length];
                this.time = times;
            }
            times[length - 1] = timeMicros;
            return this;
        }

        /** Ops so far. */
        public int length() {
            return length;
        }

        private void markLive(int s) {
            if (s >= live.length) {
                live = Arrays.copyOf(live, Math.max(s + 1, live.length * 2));
            }
            live[s] = true;
        }

        private void append(byte o, int s, long bytes, int sourceEntry) {
            if (built) {
                throw new IllegalStateException("the stream is built: a builder builds one stream");
            }
            if (length == op.length) {
                int n = length * 2;
                op = Arrays.copyOf(op, n);
                slot = Arrays.copyOf(slot, n);
                size = Arrays.copyOf(size, n);
                entry = Arrays.copyOf(entry, n);
                handleIndex = Arrays.copyOf(handleIndex, n);
                if (site != null) {
                    int[] grown = Arrays.copyOf(site, n);
                    Arrays.fill(grown, length, n, -1);
                    site = grown;
                }
                if (time != null) {
                    time = Arrays.copyOf(time, n);
                }
            }
            op[length] = o;
            slot[length] = s;
            size[length] = bytes;
            entry[length] = sourceEntry;
            length++;
        }

        public RequestStream build() {
            if (built) {
                throw new IllegalStateException("the stream is built: a builder builds one stream");
            }
            built = true;
            int used = handleCount; // the allocs' streams, in first use; then the start state's that no alloc uses
            for (SegmentInfo seg : start) {
                handleIndexOf(seg.stream());
            }
            int n = handleCount;
            long[] streams = Arrays.copyOf(handles, n);
            int[] renamed = new int[n];
            boolean same = true;
            if (!firstUseOrder) {
                Integer[] order = new Integer[n];
                Arrays.setAll(order, h -> h);
                Arrays.sort(order, (x, y) -> Long.compareUnsigned(handles[x], handles[y]));
                for (int to = 0; to < n; to++) {
                    streams[to] = handles[order[to]];
                    renamed[order[to]] = to;
                    same &= order[to] == to;
                }
            }
            int[] streamIndex = handleIndex.length - length <= handleIndex.length / 8
                    ? handleIndex
                    : Arrays.copyOf(handleIndex, length);
            if (!same && used > 0) { // renumber the allocs' first-use indexes as the table is sorted
                for (int k = 0; k < length; k++) {
                    if (op[k] == ALLOC) {
                        streamIndex[k] = renamed[streamIndex[k]];
                    }
                }
            }
            return new RequestStream(this, streamIndex, streams);
        }
    }
}
