package io.gpumem.trace.replay;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.alloc.AllocatorInternals;
import io.gpumem.alloc.CachingAllocator;
import io.gpumem.alloc.Pool;
import io.gpumem.alloc.SizeRules;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.history.BlockInfo;
import io.gpumem.history.BlockState;
import io.gpumem.history.HistoryOptions;
import io.gpumem.history.MemorySnapshot;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.io.AllocatorSnapshots;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.window.WindowRebuilder;
import io.gpumem.trace.window.WindowStart;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.function.ObjIntConsumer;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Windows of gpumem's own recordings, cut as a history ring cuts them, checked against ground truth. Each run
 * (random sizes, three streams, {@code record_stream} with held events, {@code empty_cache()}; with expandable
 * segments, reservations given back and reused by other streams) is generated as a list of operations and played
 * with its whole history recorded; the window is the last {@code ring} entries, which is what a ring of that length
 * keeps. Where the window opens between two operations, the run is played again up to there and snapshotted: the
 * true state at the window's start. A window that opens inside an operation has one too, the state the allocator held
 * as it was about to record the window's first entry ({@link #insideOperation} says why each is read as it is):
 * <ul>
 *   <li>between a request's {@code segment_alloc} and its {@code alloc}: the state before the request, whose first
 *       segment was made for it ({@link WindowStart#segmentAllocBeforeWindow});</li>
 *   <li>between a free's {@code free_requested} and its {@code free_completed}: the state before the free (the block
 *       is still allocated until {@code free_block} runs);</li>
 *   <li>among the {@code segment_free} entries of one {@code empty_cache()}: the state before it without the segments
 *       those entries gave back (each release is whole: the segments still cached are untouched);</li>
 *   <li>after the {@code free_completed} entries of the pending frees a malloc ({@code process_events}) or an
 *       {@code empty_cache()} ({@code synchronize_and_free_events}) completes first, among them or after them: the
 *       state before the operation with those blocks freed and merged in order, less the segments given back since
 *       and, where the window opens at the request's {@code alloc}, with its {@code segment_alloc} before it as
 *       above;</li>
 *   <li>right after a {@code segment_map} or {@code segment_unmap} (expandable segments: between a request's maps
 *       and its {@code alloc}, among the unmaps of an {@code empty_cache()}): the state the allocator holds as it
 *       records that entry, read from its trace tracker.</li>
 * </ul>
 * Seeded, the seed printed ({@code -Dgpumem.seed=N} replays a run).
 *
 * <p>Claims, for each window with a true start state:
 * <ol>
 *   <li>Played from the true start state, the oracle replay is exact (every alloc, every driver call, the end
 *       state) and every block of its end state, live or free, has the recorded requested size: the allocator and the
 *       replay engine, with nothing inferred (the start's free blocks are played with marks for requested sizes, read
 *       back at the end, see {@link FreeBlockMarks}). Except a block that was unmapped at the start (expandable
 *       segments): no snapshot shows an unmapped block, so no start state says what requested size it keeps
 *       (PyTorch's keeps the stale one of the free block whose pages it took over), and a map makes it a free block
 *       again; the loader makes it with none.</li>
 *   <li>The rebuilt start state equals the true one, except in what the window cannot show: the size of a block
 *       allocated before the window and freed in it is not recorded (docs/replay-method.md §2), and where neither
 *       the gap rule nor the slack rule settles it the rebuild takes {@code round_size}, so such a block (and with it
 *       the free block after it) may differ. A live block's requested size the window always shows (the end state,
 *       or the free of a block freed in it); a free block's stale one only where its block object outlives the window
 *       free, never allocated whole, absorbed by a neighbour or released ({@link FreeBlockMarks} find where), and only
 *       there must the rebuilt one be the true one. Except where the window unmaps the block's pages: its object
 *       lives on unmapped and a map revives it, as a free block that need not end where it ended, and the rebuild
 *       does not follow it. The start a written replay plays ({@link FreeBlockMarks#withRecordedStaleSizes}) does:
 *       it has the true value there too, unless the rebuilt start differs from the true one or its replay is not
 *       exact (then the marks of its own play may reach other blocks).</li>
 *   <li>Where the rebuilt state equals the true one (a free block's requested size the window does not show aside),
 *       the replay from it is exact too, and from the start a written replay plays, the end state's requested
 *       sizes are the recorded ones (with the exception of claim 1).</li>
 * </ol>
 * The runs record no other entries inside an operation (no {@code oom}: the device is too large to fill), so every
 * window has a true start state, and the test fails on one that has none. How many windows of each kind it checked,
 * how many were rebuilt equal to the truth and replayed exactly from the rebuilt start, and how many requested sizes
 * each exception left out (the rebuild's, and what of them the refinement for a written replay left), is printed.
 */
class RingWindowFuzzTest {

    private static final long MiB = 1L << 20;
    /** The recording device's memory, which the replay is told (it sizes expandable reservations). */
    private static final long DEVICE_MEMORY = 1L << 40;

    /** One operation of a run; {@code pick} chooses among the live blocks, {@code stream} among three streams. */
    private record Op(int kind, long size, int stream, int pick) {
        static final int MALLOC = 0;
        static final int FREE = 1;
        static final int RECORD_STREAM = 2;
        static final int COMPLETE_EVENTS = 3;
        static final int EMPTY_CACHE = 4;
    }

    /**
     * One device's recording: the snapshot holding the window's trace, the true state at the window's start (null
     * when the window opens at a point inside an operation the class comment does not list) and where the window
     * opens, in the words the summary counts it by. When the window opens at a request's {@code alloc} whose
     * {@code segment_alloc} came before it, the truth is the state before that driver call and
     * {@code openingSegment} the segment made for the request (else 0).
     */
    private record Recording(
            MemorySnapshot snapshot, @Nullable List<SegmentInfo> truth, long openingSegment, String opensWhere) {}

    @ParameterizedTest
    @ValueSource(strings = {"", "max_split_size_mb:40", "roundup_power2_divisions:4", "expandable_segments:True"})
    void ringWindowsReplayFromTheTrueStartAndRebuildItWhereTheWindowShowsIt(String conf) {
        long seed = Long.getLong("gpumem.seed", System.nanoTime()); // -Dgpumem.seed=N replays a run
        System.out.println("conf '" + conf + "' seed=" + seed);
        SplittableRandom rnd = new SplittableRandom(seed);
        AllocatorConfig config = AllocatorConfig.parse(conf);
        int withTruth = 0;
        int sameStart = 0;
        int exactFromRebuilt = 0;
        // requested sizes: start free blocks whose one the window shows, those of them rebuilt otherwise (revived from
        // unmapped pages) and the windows holding them, free blocks rebuilt otherwise whose one it does not show and
        // their windows, and end blocks unmapped at the start and their windows
        int staleShown = 0;
        int staleRevived = 0;
        int windowsRevived = 0;
        int staleLeft = 0;
        int windowsLeft = 0;
        int staleUnshown = 0;
        int windowsUnshown = 0;
        int unmappedAtStart = 0;
        int windowsUnmappedAtStart = 0;
        TreeMap<String, Integer> byOpening = new TreeMap<>();
        for (int round = 0; round < 30; round++) {
            List<Recording> recordings = new ArrayList<>();
            int n = 1 + rnd.nextInt(2);
            for (int d = 0; d < n; d++) {
                recordings.add(record(config, rnd));
            }
            TraceSnapshot s = AllocatorSnapshots.toTraceSnapshot(
                    recordings.stream().map(Recording::snapshot).toList(), "fuzz");
            for (int d = 0; d < n; d++) {
                String where = "conf '" + conf + "' seed " + seed + " round " + round + " device " + d + " (window "
                        + recordings.get(d).opensWhere() + ")";
                WindowStart rebuilt = new WindowRebuilder(config).rebuild(s, d);
                // the start a written replay plays: the rebuilt one, its free blocks' stale requested sizes refined
                WindowStart refined = FreeBlockMarks.withRecordedStaleSizes(
                                s, OracleWindow.prepare(s, d, rebuilt), config, DEVICE_MEMORY)
                        .start();
                Played playedFromRebuilt = replay(s, d, refined, config);
                DeviceFidelity fromRebuilt = playedFromRebuilt.fidelity();
                assertThat(fromRebuilt.notes()).as(where).noneMatch(note -> note.contains("stopped"));
                List<SegmentInfo> truthSegments = recordings.get(d).truth();
                assertThat(truthSegments)
                        .as(where + ": a window without a true start")
                        .isNotNull();
                withTruth++;
                byOpening.merge(recordings.get(d).opensWhere(), 1, Integer::sum);
                WindowStart truth = new WindowStart(
                        d,
                        asStart(d, truthSegments),
                        rebuilt.preWindowFreed(),
                        rebuilt.inferredSizes(),
                        rebuilt.frees(),
                        recordings.get(d).openingSegment(),
                        rebuilt.reservationsMadeInWindow(),
                        rebuilt.reservationReach(),
                        rebuilt.reservationFloor());
                FreeBlockMarks marked = FreeBlockMarks.of(truth);
                Played fromTruth = replay(s, d, marked.start(), config);
                assertThat(isExact(fromTruth.fidelity()))
                        .as(where + " from the true start: " + fromTruth.fidelity())
                        .isTrue();
                Map<Long, BlockInfo> recordedEnd = new HashMap<>();
                s.segmentsOf(d).forEach(seg -> seg.blocks().forEach(b -> recordedEnd.put(b.address(), b)));
                List<BlockInfo> trueEnd = fromTruth.end().stream()
                        .map(b -> BlockInfo.of(b.address(), b.size(), marked.unmark(b.requestedSize()), b.state()))
                        .toList();
                Map<Long, BlockInfo> markedEnd = new HashMap<>();
                fromTruth.end().forEach(b -> markedEnd.put(b.address(), b));
                List<String> fromTruthMismatches = requestedSizeMismatches(recordedEnd, trueEnd, markedEnd, config);
                for (String m : fromTruthMismatches) {
                    assertThat(m).as(where + " from the true start").startsWith("unmapped at the start");
                }
                unmappedAtStart += fromTruthMismatches.size();
                windowsUnmappedAtStart += fromTruthMismatches.isEmpty() ? 0 : 1;

                Set<Long> shown = shown(marked, fromTruth.end());
                String difference = difference(rebuilt, truth, config);
                boolean revived = false;
                boolean unshown = false;
                for (BlockInfo[] pair : sameFreeBlocks(rebuilt, truth)) {
                    BlockInfo r = pair[0];
                    boolean same = r.requestedSize() == pair[1].requestedSize();
                    if (shown.contains(r.address())) {
                        staleShown++;
                        if (!same) {
                            assertThat(unmappedInWindow(s.traceOf(d), r))
                                    .as(where + ": the free block at " + Long.toHexString(r.address())
                                            + " rebuilt with requested size " + r.requestedSize() + ", true "
                                            + pair[1].requestedSize() + ", which the window shows")
                                    .isTrue();
                            staleRevived++;
                            revived = true;
                        }
                    } else if (!same) {
                        staleUnshown++;
                        unshown = true;
                    }
                }
                windowsRevived += revived ? 1 : 0;
                windowsUnshown += unshown ? 1 : 0;
                boolean left = false;
                for (BlockInfo[] pair : sameFreeBlocks(refined, truth)) {
                    BlockInfo r = pair[0];
                    if (shown.contains(r.address()) && r.requestedSize() != pair[1].requestedSize()) {
                        assertThat(unmappedInWindow(s.traceOf(d), r) && (difference != null || !isExact(fromRebuilt)))
                                .as(where + ": the free block at " + Long.toHexString(r.address())
                                        + " refined for a written replay with requested size " + r.requestedSize()
                                        + ", true " + pair[1].requestedSize() + ", which the window shows")
                                .isTrue();
                        staleLeft++;
                        left = true;
                    }
                }
                windowsLeft += left ? 1 : 0;
                if (difference == null) {
                    sameStart++;
                    assertThat(isExact(fromRebuilt))
                            .as(where + " from the rebuilt start, equal to the true one: " + fromRebuilt)
                            .isTrue();
                    List<String> mismatches =
                            requestedSizeMismatches(recordedEnd, playedFromRebuilt.end(), markedEnd, config);
                    for (String m : mismatches) {
                        assertThat(m)
                                .as(where + " from the rebuilt start, equal to the true one")
                                .startsWith("unmapped at the start");
                    }
                } else {
                    assertThat(difference).as(where).startsWith("unknowable");
                }
                exactFromRebuilt += isExact(fromRebuilt) ? 1 : 0;
            }
        }
        System.out.println(
                "conf '" + conf + "': " + withTruth + " windows with a true start " + byOpening + ": " + sameStart
                        + " rebuilt equal to the true start, " + exactFromRebuilt + " exact from the rebuilt start");
        System.out.println("conf '" + conf + "' requested sizes: " + staleShown + " of start free blocks the window "
                + "shows, " + staleRevived + " of them revived from unmapped pages rebuilt otherwise (" + windowsRevived
                + " windows), " + staleLeft + " left otherwise by the refinement for a written replay (" + windowsLeft
                + " windows); " + staleUnshown + " the window does not show rebuilt otherwise (" + windowsUnshown
                + " windows); " + unmappedAtStart + " of end blocks unmapped at the start (" + windowsUnmappedAtStart
                + " windows)");
    }

    /**
     * With expandable segments on three streams (a reservation given back is handed to another stream's next segment),
     * every mapped run holding live blocks that the rebuild finds at the start of a window with a true start state has
     * the true run's stream and pool (a wholly free run shows neither). Only the rebuild is checked here; the replays
     * of such windows are checked by {@link #ringWindowsReplayFromTheTrueStartAndRebuildItWhereTheWindowShowsIt}.
     */
    @Test
    void expandableRunsAreRebuiltWithTheirStreamAndPool() {
        long seed = Long.getLong("gpumem.seed", System.nanoTime()); // -Dgpumem.seed=N replays a run
        System.out.println("expandable seed=" + seed);
        expandableRunsKeepTheirStreamAndPool(seed);
        // seeds whose runs the walk back put in the wrong pool before the rebuild read the pool off the live blocks
        for (long regression : new long[] {14, 30, 38}) {
            expandableRunsKeepTheirStreamAndPool(regression);
        }
    }

    private static void expandableRunsKeepTheirStreamAndPool(long seed) {
        SplittableRandom rnd = new SplittableRandom(seed);
        AllocatorConfig config = AllocatorConfig.parse("expandable_segments:True");
        int runs = 0;
        for (int round = 0; round < 30; round++) {
            Recording r = record(config, rnd);
            if (r.truth() == null || r.openingSegment() != 0) {
                continue;
            }
            TraceSnapshot s = AllocatorSnapshots.toTraceSnapshot(r.snapshot(), "fuzz");
            WindowStart rebuilt = new WindowRebuilder(config).rebuild(s, 0);
            for (SegmentInfo t : asStart(0, r.truth())) {
                for (SegmentInfo b : rebuilt.segments()) {
                    if (b.address() == t.address() && b.totalSize() == t.totalSize() && !live(t).isEmpty()) {
                        runs++;
                        assertThat(b.stream() + " " + b.pool())
                                .as("seed " + seed + " round " + round + ": rebuilt " + show(b) + ", true " + show(t))
                                .isEqualTo(t.stream() + " " + t.pool());
                    }
                }
            }
        }
        System.out.println("expandable: " + runs + " runs compared");
    }

    /** A replay's fidelity, and the model's end state block by block (requested sizes included). */
    private record Played(DeviceFidelity fidelity, List<BlockInfo> end) {}

    private static Played replay(TraceSnapshot s, int device, WindowStart start, AllocatorConfig config) {
        OracleWindow window = OracleWindow.prepare(s, device, start);
        DeviceReplay replay = new DeviceReplay(window, config, DEVICE_MEMORY, false);
        DeviceFidelity f = replay.run(ProgressListener.NONE, 0, window.trace().size());
        List<BlockInfo> end = new ArrayList<>();
        replay.model().visitSegments(new AllocatorInternals.SegmentVisitor() {
            @Override
            public void segment(long address, long stream, Pool pool, boolean expandable) {}

            @Override
            public void block(long address, long size, long requestedSize, BlockState state) {
                end.add(BlockInfo.of(address, size, requestedSize, state));
            }
        });
        return new Played(
                OracleReplay.withEndState(f, OracleReplay.EndState.compare(s.segmentsOf(device), replay.model())), end);
    }

    /**
     * The blocks of a model's end state {@code end} whose requested size differs from the recorded block at the same
     * address, size and state ({@code recorded}, by address; the end-state comparison of {@code replay --check} leaves
     * requested sizes out), each described; "unmapped at the start: ..." where the block is one that was unmapped at
     * the window's start. A snapshot, and so a start state, shows no unmapped block: the loader makes them without a
     * requested size (0), while PyTorch's keeps the stale one of the free block whose pages were unmapped, and a map
     * makes the block free again, absorbing its free neighbours, so it shows. Such a block is one the true start
     * played with marks ({@code markedEnd}, the end it reaches) shows 0 on: no start free block (each has a mark), no
     * live one (requests are at least 1), and a block made in the window without one is made so in the recording too.
     */
    private static List<String> requestedSizeMismatches(
            Map<Long, BlockInfo> recorded,
            List<BlockInfo> end,
            Map<Long, BlockInfo> markedEnd,
            AllocatorConfig config) {
        List<String> out = new ArrayList<>();
        for (BlockInfo m : end) {
            BlockInfo r = recorded.get(m.address());
            if (r != null && r.size() == m.size() && r.state() == m.state() && r.requestedSize() != m.requestedSize()) {
                BlockInfo marked = markedEnd.get(m.address());
                boolean unmapped = config.expandableSegments() && marked != null && marked.requestedSize() == 0;
                out.add((unmapped ? "unmapped at the start: " : "") + Long.toHexString(m.address()) + "+" + m.size()
                        + " " + m.state() + ": requested " + m.requestedSize() + " replayed, " + r.requestedSize()
                        + " recorded");
            }
        }
        return out;
    }

    /**
     * The free blocks the rebuilt start holds as the true one does (address and size), each paired with the true one,
     * whose requested size the rebuild reads off the end state (the stale one PyTorch leaves on a free block).
     */
    private static List<BlockInfo[]> sameFreeBlocks(WindowStart rebuilt, WindowStart truth) {
        Map<Long, BlockInfo> trueFree = new HashMap<>();
        for (SegmentInfo seg : truth.segments()) {
            for (BlockInfo b : seg.blocks()) {
                if (b.state() == BlockState.INACTIVE) {
                    trueFree.put(b.address(), b);
                }
            }
        }
        List<BlockInfo[]> out = new ArrayList<>();
        for (SegmentInfo seg : rebuilt.segments()) {
            for (BlockInfo b : seg.blocks()) {
                BlockInfo t = trueFree.get(b.address());
                if (b.state() == BlockState.INACTIVE && t != null && t.size() == b.size()) {
                    out.add(new BlockInfo[] {b, t});
                }
            }
        }
        return out;
    }

    /**
     * Whether a {@code segment_unmap} of the window {@code trace} unmaps pages of the start block {@code b}. PyTorch
     * unmaps a free block's pages by turning its block object into the unmapped block (its requested size kept) and
     * the mapped ends into new blocks, and a map of those pages turns it back into a free block, absorbing its free
     * neighbours: its requested size shows again, at a block that need not end where the start block ended, where the
     * rebuild does not look for it.
     */
    private static boolean unmappedInWindow(List<TraceEntry> trace, BlockInfo b) {
        for (TraceEntry e : trace) {
            if (e.action() == TraceAction.SEGMENT_UNMAP
                    && e.addr() < b.address() + b.size()
                    && b.address() < e.addr() + e.size()) {
                return true;
            }
        }
        return false;
    }

    /**
     * The addresses of the start free blocks whose marks the end state {@code end} of a play from the marked start
     * shows: the blocks whose object outlives the window as a free block (never allocated whole, absorbed by a
     * neighbour freed or mapped beside it, or released; with expandable segments it may have been unmapped and mapped
     * again on the way). Only there does the window show the block's requested size.
     */
    private static Set<Long> shown(FreeBlockMarks marks, List<BlockInfo> end) {
        Set<Long> out = new HashSet<>();
        for (BlockInfo b : end) {
            BlockInfo start = marks.startBlock(b.requestedSize());
            if (start != null) {
                out.add(start.address());
            }
        }
        return out;
    }

    private static boolean isExact(DeviceFidelity f) {
        return f.firstMismatch() == null
                && f.exact() == f.allocs()
                && f.segmentMatched() == f.segmentEvents()
                && f.endSegmentsSame() == f.endSegments();
    }

    /**
     * Null when the rebuilt start equals the true one (segments, blocks by address, size and state, and the live
     * blocks' requested sizes; the free blocks' are checked apart, where the window shows them);
     * "unknowable: ..." when they differ only in the size of blocks freed in the window (and so in the free block
     * after each); "differs: ..." otherwise.
     */
    private static String difference(WindowStart rebuilt, WindowStart truth, AllocatorConfig config) {
        List<SegmentInfo> rebuiltSegments = rebuilt.segments();
        long opening = truth.segmentAllocBeforeWindow();
        if (rebuilt.segmentAllocBeforeWindow() != opening) {
            // Where a cached segment would serve the request as well (no max_split_size_mb), the rebuild keeps the
            // segment made for it, wholly free: the same state once the request is served.
            boolean keptWhollyFree = rebuilt.segmentAllocBeforeWindow() == 0
                    && rebuiltSegments.stream()
                            .anyMatch(
                                    seg -> seg.address() == opening && live(seg).isEmpty());
            if (!keptWhollyFree) {
                return "differs: segment made for the first request " + Long.toHexString(opening) + " true, "
                        + Long.toHexString(rebuilt.segmentAllocBeforeWindow()) + " rebuilt";
            }
            rebuiltSegments = rebuiltSegments.stream()
                    .filter(seg -> seg.address() != opening)
                    .toList();
        }
        if (rebuiltSegments.size() != truth.segments().size()) {
            return "differs: " + rebuiltSegments.size() + " segments rebuilt, "
                    + truth.segments().size() + " true";
        }
        String unknowable = null;
        for (int i = 0; i < truth.segments().size(); i++) {
            SegmentInfo r = rebuiltSegments.get(i);
            SegmentInfo t = truth.segments().get(i);
            String both = show(r) + " rebuilt, " + show(t) + " true";
            if (r.address() != t.address()
                    || r.totalSize() != t.totalSize()
                    || r.stream() != t.stream()
                    || r.pool() != t.pool()
                    || r.expandable() != t.expandable()) {
                return "differs: segment " + both;
            }
            List<BlockInfo> rl = live(r);
            List<BlockInfo> tl = live(t);
            if (rl.size() != tl.size()) {
                return "differs: live blocks of " + both;
            }
            for (int k = 0; k < tl.size(); k++) {
                BlockInfo rb = rl.get(k);
                BlockInfo tb = tl.get(k);
                if (rb.address() != tb.address()) {
                    return "differs: live blocks of " + both;
                }
                if (rb.requestedSize() != tb.requestedSize()) {
                    return "differs: the requested size of " + Long.toHexString(rb.address()) + " in " + both;
                }
                if (rb.size() != tb.size()) {
                    long nextLive = k + 1 < tl.size() ? tl.get(k + 1).address() : t.address() + t.totalSize();
                    if (!unknowableSize(rebuilt, rb, tb.size(), nextLive, r, config)) {
                        return "differs: a block's size in " + both;
                    }
                    unknowable = "unknowable: " + both;
                }
            }
        }
        return unknowable;
    }

    /**
     * Whether {@code trueSize} is a size the window cannot show for {@code b}: a block freed in the window whose size
     * the rebuild took as {@code round_size} (no rule settled it: the gap up to the next live block would have been
     * split off), and whose true size is larger by no more than a remainder PyTorch leaves unsplit.
     */
    private static boolean unknowableSize(
            WindowStart rebuilt, BlockInfo b, long trueSize, long nextLive, SegmentInfo seg, AllocatorConfig config) {
        long rounded = SizeRules.roundSize(b.requestedSize(), config);
        long slack = SizeRules.largestUnsplitRemainder(
                rounded, seg.pool(), config.expandableSegments(), config.maxSplitSize());
        return rebuilt.preWindowFreed().contains(b.address())
                && b.size() == rounded
                && SizeRules.shouldSplit(
                        nextLive - b.address() - rounded,
                        rounded,
                        seg.pool(),
                        config.expandableSegments(),
                        config.maxSplitSize())
                && trueSize > rounded
                && trueSize - rounded <= slack;
    }

    private static List<BlockInfo> live(SegmentInfo s) {
        return s.blocks().stream().filter(b -> b.state() != BlockState.INACTIVE).toList();
    }

    /** The true segments as a start state: a block whose free waits on events is live at the start. */
    private static List<SegmentInfo> asStart(int device, List<SegmentInfo> segments) {
        List<SegmentInfo> out = new ArrayList<>();
        for (SegmentInfo s : segments) {
            List<BlockInfo> blocks = new ArrayList<>();
            for (BlockInfo b : s.blocks()) {
                BlockState state = b.state() == BlockState.INACTIVE ? BlockState.INACTIVE : BlockState.ACTIVE_ALLOCATED;
                blocks.add(BlockInfo.of(b.address(), b.size(), b.requestedSize(), state));
            }
            out.add(SegmentInfo.ofBlocks(device, s.address(), s.stream(), s.pool(), s.expandable(), blocks));
        }
        out.sort((a, b) -> Long.compare(a.address(), b.address()));
        return out;
    }

    private static String show(SegmentInfo seg) {
        StringBuilder b = new StringBuilder(Long.toHexString(seg.address()) + " " + seg.totalSize() + " s"
                + seg.stream() + " " + seg.pool() + (seg.expandable() ? " exp" : "") + ":");
        for (BlockInfo bl : seg.blocks()) {
            b.append(' ')
                    .append(Long.toHexString(bl.address()))
                    .append('+')
                    .append(bl.size())
                    .append(bl.state() == BlockState.INACTIVE ? 'I' : 'A');
        }
        return b.toString();
    }

    /**
     * Generates a run, plays it with its whole history recorded, keeps the last {@code ring} entries as the window
     * and, when the window opens between two operations or inside one at a point the class comment names, plays the
     * run again up to there for the true state.
     */
    private static Recording record(AllocatorConfig config, SplittableRandom rnd) {
        boolean holdEvents = rnd.nextBoolean();
        int ring = 40 + rnd.nextInt(300);
        List<Op> ops = new ArrayList<>();
        int count = 200 + rnd.nextInt(600);
        for (int i = 0; i < count; i++) {
            int what = rnd.nextInt(100);
            int kind = what < 50
                    ? Op.MALLOC
                    : what < 90
                            ? Op.FREE
                            : what < 95 ? Op.RECORD_STREAM : what < 98 ? Op.COMPLETE_EVENTS : Op.EMPTY_CACHE;
            long size = switch (rnd.nextInt(4)) {
                case 0 -> 1 + rnd.nextInt(4096);
                case 1 -> 1 + rnd.nextLong(MiB + 1);
                case 2 -> MiB + rnd.nextLong(10 * MiB);
                default -> 10 * MiB + rnd.nextLong(90 * MiB);
            };
            ops.add(new Op(kind, size, rnd.nextInt(3), rnd.nextInt(Integer.MAX_VALUE)));
        }
        int[] entriesBefore = new int[count + 1];
        int[] kinds = new int[count];
        MemorySnapshot end = play(config, holdEvents, ops, count, entriesBefore, kinds, null);
        List<TraceEntry> all = end.deviceTraces().get(0);
        int from = Math.max(0, all.size() - ring);
        MemorySnapshot snapshot = RingCut.from(end, from);
        for (int op = 0; op <= count; op++) {
            if (entriesBefore[op] == from && (op == count || entriesBefore[op + 1] > from)) {
                return new Recording(snapshot, before(config, holdEvents, ops, op), 0, "between operations");
            }
            if (op < count && entriesBefore[op] < from && from < entriesBefore[op + 1]) {
                return insideOperation(config, holdEvents, ops, op, kinds[op], all, entriesBefore[op], from, snapshot);
            }
        }
        return new Recording(snapshot, null, 0, "none");
    }

    /**
     * The window {@code snapshot} cut at trace entry {@code from}, inside operation {@code op} (played as {@code kind})
     * whose entries start at {@code first}, with its true start state: the state the allocator held when it was about
     * to record entry {@code from}.
     *
     * <p>Right after a {@code segment_map} or {@code segment_unmap} that state is read off the allocator as it records
     * that entry: it records one once the pages are mapped or unmapped and merged, with every block in its list, and
     * changes no segment or block before the next entry (only the stack a run is reported with; a reservation left
     * wholly unmapped is given back, which no snapshot shows). The other entries are recorded mid-change, so the
     * state at that moment is not the window's: a {@code free_completed} before {@code free_block} merges, its block
     * taken off its event queue and in no free tree yet (a snapshot misses a segment it heads); an {@code alloc} once
     * the block is carved; a {@code segment_alloc} with the new segment in no list. There the truth is the state
     * before the operation with what its earlier entries did: a {@code free_requested} leaves the block live (until
     * {@code free_block} runs), a {@code free_completed} (a free's own, or a completion of {@code process_events} or
     * {@code synchronize_and_free_events}) frees its block and merges it with its free neighbours as {@code free_block}
     * does, a {@code segment_free} gives back a whole segment, and a {@code segment_alloc} makes the segment for the
     * request whose {@code alloc}, the next entry, opens the window.
     */
    private static Recording insideOperation(
            AllocatorConfig config,
            boolean holdEvents,
            List<Op> ops,
            int op,
            int kind,
            List<TraceEntry> all,
            int first,
            int from,
            MemorySnapshot snapshot) {
        TraceAction last = all.get(from - 1).action();
        if (last == TraceAction.SEGMENT_MAP || last == TraceAction.SEGMENT_UNMAP) {
            return new Recording(
                    snapshot, stateAtEntry(config, holdEvents, ops, op, from - 1), 0, "after a map or unmap");
        }
        List<SegmentInfo> state = before(config, holdEvents, ops, op);
        long opening = 0;
        boolean completions = false;
        for (int e = first; e < from; e++) {
            TraceEntry entry = all.get(e);
            switch (entry.action()) {
                case FREE_REQUESTED -> {}
                case FREE_COMPLETED -> {
                    completions |= kind != Op.FREE;
                    state = withBlockFreed(state, entry.addr());
                }
                case SEGMENT_FREE ->
                    state = state.stream()
                            .filter(seg -> seg.address() != entry.addr())
                            .toList();
                case SEGMENT_ALLOC -> opening = entry.addr(); // the request's alloc, which opens the window, follows
                default -> {
                    return new Recording(snapshot, null, 0, "after a " + entry.action() + " inside an operation");
                }
            }
        }
        String where = completions
                ? "after completions"
                : kind == Op.FREE ? "inside a free" : kind == Op.EMPTY_CACHE ? "among releases" : "inside a request";
        return new Recording(snapshot, state, opening, where);
    }

    /**
     * {@code state} after {@code free_block} of the live block at {@code address}: the block freed and merged with
     * the free blocks beside it in its segment (in a snapshot free neighbours are inactive blocks; a block waiting on
     * events is not one), the merged block at the lowest address with the freed block's requested size.
     */
    private static List<SegmentInfo> withBlockFreed(List<SegmentInfo> state, long address) {
        List<SegmentInfo> out = new ArrayList<>();
        boolean found = false;
        for (SegmentInfo seg : state) {
            List<BlockInfo> blocks = new ArrayList<>(seg.blocks());
            int i = 0;
            while (i < blocks.size() && blocks.get(i).address() != address) {
                i++;
            }
            if (i == blocks.size()) {
                out.add(seg);
                continue;
            }
            BlockInfo freed = blocks.get(i);
            assertThat(freed.state())
                    .as("block freed at " + Long.toHexString(address))
                    .isNotEqualTo(BlockState.INACTIVE);
            found = true;
            int low = i;
            int high = i;
            if (low > 0 && blocks.get(low - 1).state() == BlockState.INACTIVE) {
                low--;
            }
            if (high + 1 < blocks.size() && blocks.get(high + 1).state() == BlockState.INACTIVE) {
                high++;
            }
            long start = blocks.get(low).address();
            long end = blocks.get(high).address() + blocks.get(high).size();
            blocks.subList(low, high + 1).clear();
            blocks.add(low, BlockInfo.of(start, end - start, freed.requestedSize(), BlockState.INACTIVE));
            out.add(SegmentInfo.ofBlocks(
                    seg.device(), seg.address(), seg.stream(), seg.pool(), seg.expandable(), blocks));
        }
        assertThat(found).as("a block at " + Long.toHexString(address)).isTrue();
        return out;
    }

    /**
     * The state the allocator holds as it records trace entry {@code entry}, inside operation {@code op}: read from
     * the trace tracker, which the allocator calls as it records each entry, holding its lock (which is reentrant).
     */
    private static List<SegmentInfo> stateAtEntry(
            AllocatorConfig config, boolean holdEvents, List<Op> ops, int op, int entry) {
        record Seen(long address, long stream, Pool pool, boolean expandable, List<BlockInfo> blocks) {}
        List<Seen> seen = new ArrayList<>();
        play(config, holdEvents, ops, op + 1, null, null, (a, index) -> {
            if (index == entry) {
                a.internals().visitSegments(new AllocatorInternals.SegmentVisitor() {
                    @Override
                    public void segment(long address, long stream, Pool pool, boolean expandable) {
                        seen.add(new Seen(address, stream, pool, expandable, new ArrayList<>()));
                    }

                    @Override
                    public void block(long address, long size, long requestedSize, BlockState state) {
                        seen.getLast().blocks().add(BlockInfo.of(address, size, requestedSize, state));
                    }
                });
            }
        });
        assertThat(seen).as("segments seen at entry " + entry).isNotEmpty();
        return seen.stream()
                .map(x -> SegmentInfo.ofBlocks(0, x.address(), x.stream(), x.pool(), x.expandable(), x.blocks()))
                .sorted((x, y) -> Long.compare(x.address(), y.address()))
                .toList();
    }

    /** The segments before operation {@code op}: the run played up to there. */
    private static List<SegmentInfo> before(AllocatorConfig config, boolean holdEvents, List<Op> ops, int op) {
        return play(config, holdEvents, ops, op, null, null, null).segments();
    }

    /**
     * Plays the first {@code upTo} operations on a fresh allocator recording all history, noting in
     * {@code entriesBefore} (when given) how many entries were recorded before each operation and in {@code kinds}
     * (when given) the kind each operation was played as (a malloc where no block was live), and handing
     * {@code onEntry} (when given) the allocator and the index of each trace entry as the entry is recorded; returns
     * the snapshot.
     */
    private static MemorySnapshot play(
            AllocatorConfig config,
            boolean holdEvents,
            List<Op> ops,
            int upTo,
            int @Nullable [] entriesBefore,
            int @Nullable [] kinds,
            @Nullable ObjIntConsumer<CachingAllocator> onEntry) {
        SimulatedDevice device = SimulatedDevice.withCapacity(DEVICE_MEMORY);
        CachingAllocator a = new CachingAllocator(device, config);
        long[] streams = {0, device.createStream(), device.createStream()};
        a.recordHistory(HistoryOptions.all(1 << 20));
        int[] entries = {0};
        a.internals().attachTraceTracker(e -> {
            if (onEntry != null) {
                onEntry.accept(a, entries[0]);
            }
            entries[0]++;
        });
        device.holdEvents(holdEvents);
        List<Long> live = new ArrayList<>();
        for (int i = 0; i < upTo; i++) {
            if (entriesBefore != null) {
                entriesBefore[i] = entries[0];
            }
            Op op = ops.get(i);
            int kind = live.isEmpty() ? Op.MALLOC : op.kind();
            if (kinds != null) {
                kinds[i] = kind;
            }
            switch (kind) {
                case Op.MALLOC -> live.add(a.malloc(op.size(), streams[op.stream()]));
                case Op.FREE -> a.free(live.remove(op.pick() % live.size()));
                case Op.RECORD_STREAM -> a.recordStream(live.get(op.pick() % live.size()), streams[op.stream()]);
                case Op.COMPLETE_EVENTS -> device.completeEvents(streams[op.stream()]);
                default -> a.emptyCache();
            }
        }
        if (entriesBefore != null) {
            entriesBefore[upTo] = entries[0];
        }
        return a.snapshot();
    }
}
