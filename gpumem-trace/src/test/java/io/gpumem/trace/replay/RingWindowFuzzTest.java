package io.gpumem.trace.replay;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.alloc.CachingAllocator;
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
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.SplittableRandom;
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
 * true state at the window's start. Three windows that open inside an operation have one
 * too, the state before that operation less what its entries before the window did:
 * <ul>
 *   <li>between a request's {@code segment_alloc} and its {@code alloc}: the state before the request, whose first
 *       segment was made for it ({@link WindowStart#segmentAllocBeforeWindow});</li>
 *   <li>between a free's {@code free_requested} and its {@code free_completed}: the state before the free (the block
 *       is still allocated until {@code free_block} runs);</li>
 *   <li>among the {@code segment_free} entries of one {@code empty_cache()}: the state before it without the segments
 *       those entries gave back (each release is whole: the segments still cached are untouched).</li>
 * </ul>
 * Seeded, the seed printed ({@code -Dgpumem.seed=N} replays a run).
 *
 * <p>Claims, for each window with a true start state:
 * <ol>
 *   <li>Played from the true start state, the oracle replay is exact (every alloc, every driver call, the end
 *       state): the allocator and the replay engine, with nothing inferred.</li>
 *   <li>The rebuilt start state equals the true one, except in what the window cannot show: the size of a block
 *       allocated before the window and freed in it is not recorded (docs/replay-method.md §2), and where neither
 *       the gap rule nor the slack rule settles it the rebuild takes {@code round_size}, so such a block (and with it
 *       the free block after it) may differ.</li>
 *   <li>Where the rebuilt state equals the true one, the replay from it is exact too.</li>
 * </ol>
 * A window that opens elsewhere inside an operation (among the completions a malloc or an {@code empty_cache()}
 * processes first, or between them and its driver calls) has no true state to compare with; its replay must still
 * run to the end. How many windows of each kind were exact is printed.
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
     * One device's recording: the snapshot holding the window's trace, and the true state at the window's start
     * (null when the window opens inside an operation whose state is not known). When the window opens between a
     * request's {@code segment_alloc} and its {@code alloc}, the truth is the state before that request and
     * {@code openingSegment} the segment made for it (else 0).
     */
    private record Recording(MemorySnapshot snapshot, List<SegmentInfo> truth, long openingSegment) {}

    @ParameterizedTest
    @ValueSource(strings = {"", "max_split_size_mb:40", "roundup_power2_divisions:4", "expandable_segments:True"})
    void ringWindowsReplayFromTheTrueStartAndRebuildItWhereTheWindowShowsIt(String conf) {
        long seed = Long.getLong("gpumem.seed", System.nanoTime()); // -Dgpumem.seed=N replays a run
        System.out.println("conf '" + conf + "' seed=" + seed);
        SplittableRandom rnd = new SplittableRandom(seed);
        AllocatorConfig config = AllocatorConfig.parse(conf);
        int atBoundary = 0;
        int sameStart = 0;
        int exactFromRebuilt = 0;
        int insideOp = 0;
        int exactInsideOp = 0;
        for (int round = 0; round < 30; round++) {
            List<Recording> recordings = new ArrayList<>();
            int n = 1 + rnd.nextInt(2);
            for (int d = 0; d < n; d++) {
                recordings.add(record(config, rnd));
            }
            TraceSnapshot s = AllocatorSnapshots.toTraceSnapshot(
                    recordings.stream().map(Recording::snapshot).toList(), "fuzz");
            for (int d = 0; d < n; d++) {
                String where = "conf '" + conf + "' seed " + seed + " round " + round + " device " + d;
                WindowStart rebuilt = new WindowRebuilder(config).rebuild(s, d);
                DeviceFidelity fromRebuilt = replay(s, d, rebuilt, config);
                assertThat(fromRebuilt.notes()).as(where).noneMatch(note -> note.contains("stopped"));
                List<SegmentInfo> truthSegments = recordings.get(d).truth();
                if (truthSegments == null) {
                    insideOp++;
                    exactInsideOp += isExact(fromRebuilt) ? 1 : 0;
                    continue;
                }
                atBoundary++;
                WindowStart truth = new WindowStart(
                        d,
                        asStart(d, truthSegments),
                        rebuilt.preWindowFreed(),
                        rebuilt.inferredSizes(),
                        rebuilt.frees(),
                        recordings.get(d).openingSegment(),
                        rebuilt.reservationsMadeInWindow());
                DeviceFidelity fromTruth = replay(s, d, truth, config);
                assertThat(isExact(fromTruth))
                        .as(where + " from the true start: " + fromTruth)
                        .isTrue();

                String difference = difference(rebuilt, truth, config);
                if (difference == null) {
                    sameStart++;
                    assertThat(isExact(fromRebuilt))
                            .as(where + " from the rebuilt start, equal to the true one: " + fromRebuilt)
                            .isTrue();
                } else {
                    assertThat(difference).as(where).startsWith("unknowable");
                }
                exactFromRebuilt += isExact(fromRebuilt) ? 1 : 0;
            }
        }
        System.out.println("conf '" + conf + "': " + atBoundary + " windows with a true start: " + sameStart
                + " rebuilt equal to the true start, " + exactFromRebuilt + " exact from the rebuilt start; "
                + insideOp + " open elsewhere inside an operation: " + exactInsideOp + " exact");
        assertThat(atBoundary).as("windows with a true start").isPositive();
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

    private static DeviceFidelity replay(TraceSnapshot s, int device, WindowStart start, AllocatorConfig config) {
        OracleWindow window = OracleWindow.prepare(s, device, start);
        DeviceReplay replay = new DeviceReplay(window, config, DEVICE_MEMORY, false);
        DeviceFidelity f = replay.run(ProgressListener.NONE, 0, window.trace().size());
        return OracleReplay.withEndState(f, OracleReplay.EndState.compare(s.segmentsOf(device), replay.model()));
    }

    private static boolean isExact(DeviceFidelity f) {
        return f.firstMismatch() == null
                && f.exact() == f.allocs()
                && f.segmentMatched() == f.segmentEvents()
                && f.endSegmentsSame() == f.endSegments();
    }

    /**
     * Null when the rebuilt start equals the true one (segments, and blocks by address, size and state);
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
     * and, when the window opens between two operations or inside one whose state the class comment names, plays the
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
        boolean[] malloc = new boolean[count];
        MemorySnapshot end = play(config, holdEvents, ops, count, entriesBefore, malloc);
        List<TraceEntry> all = end.deviceTraces().get(0);
        int from = Math.max(0, all.size() - ring);
        MemorySnapshot snapshot = RingCut.from(end, from);
        for (int op = 0; op <= count; op++) {
            if (entriesBefore[op] == from && (op == count || entriesBefore[op + 1] > from)) {
                return new Recording(
                        snapshot, play(config, holdEvents, ops, op, null, null).segments(), 0);
            }
            if (op < count
                    && malloc[op]
                    && entriesBefore[op] == from - 1
                    && all.get(from - 1).action() == TraceAction.SEGMENT_ALLOC
                    && all.get(from).action() == TraceAction.ALLOC) {
                List<SegmentInfo> before =
                        play(config, holdEvents, ops, op, null, null).segments();
                return new Recording(snapshot, before, all.get(from - 1).addr());
            }
            if (op < count && !malloc[op] && entriesBefore[op] < from && from < entriesBefore[op + 1]) {
                List<SegmentInfo> truth = insideOperation(config, holdEvents, ops, op, all, entriesBefore[op], from);
                return new Recording(snapshot, truth, 0);
            }
        }
        return new Recording(snapshot, null, 0);
    }

    /**
     * The true state at trace entry {@code from}, inside operation {@code op} whose entries start at {@code first}: the
     * state before the operation, for a free cut between its request and its completion, or without the segments
     * already given back, for an {@code empty_cache()} cut among its {@code segment_free} entries; else null.
     */
    private static @Nullable List<SegmentInfo> insideOperation(
            AllocatorConfig config,
            boolean holdEvents,
            List<Op> ops,
            int op,
            List<TraceEntry> all,
            int first,
            int from) {
        int kind = ops.get(op).kind();
        boolean insideFree = kind == Op.FREE
                && from == first + 1
                && all.get(first).action() == TraceAction.FREE_REQUESTED
                && all.get(from).action() == TraceAction.FREE_COMPLETED;
        Set<Long> givenBack = new HashSet<>();
        boolean insideRelease = kind == Op.EMPTY_CACHE;
        for (int e = first; insideRelease && e < from; e++) {
            insideRelease = all.get(e).action() == TraceAction.SEGMENT_FREE;
            givenBack.add(all.get(e).addr());
        }
        if (!insideFree && !insideRelease) {
            return null;
        }
        return play(config, holdEvents, ops, op, null, null).segments().stream()
                .filter(seg -> !givenBack.contains(seg.address()))
                .toList();
    }

    /**
     * Plays the first {@code upTo} operations on a fresh allocator recording all history, noting in
     * {@code entriesBefore} (when given) how many entries were recorded before each operation and in {@code malloc}
     * (when given) which operations were mallocs; returns the snapshot.
     */
    private static MemorySnapshot play(
            AllocatorConfig config,
            boolean holdEvents,
            List<Op> ops,
            int upTo,
            int @Nullable [] entriesBefore,
            boolean @Nullable [] malloc) {
        SimulatedDevice device = SimulatedDevice.withCapacity(DEVICE_MEMORY);
        CachingAllocator a = new CachingAllocator(device, config);
        long[] streams = {0, device.createStream(), device.createStream()};
        a.recordHistory(HistoryOptions.all(1 << 20));
        int[] entries = {0};
        a.internals().attachTraceTracker(e -> entries[0]++);
        device.holdEvents(holdEvents);
        List<Long> live = new ArrayList<>();
        for (int i = 0; i < upTo; i++) {
            if (entriesBefore != null) {
                entriesBefore[i] = entries[0];
            }
            Op op = ops.get(i);
            int kind = live.isEmpty() ? Op.MALLOC : op.kind();
            if (malloc != null) {
                malloc[i] = kind == Op.MALLOC;
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
