package io.gpumem.trace.align;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.engine.MinimumCapacity;
import io.gpumem.engine.RequestStream;
import io.gpumem.engine.RunOptions;
import io.gpumem.engine.RunOutcome;
import io.gpumem.engine.StreamRunner;
import io.gpumem.history.Frame;
import io.gpumem.history.MemorySnapshot;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.policy.PolicyRegistry;
import io.gpumem.size.ByteSize;
import io.gpumem.trace.io.AllocatorSnapshots;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.replay.OracleDevice;
import io.gpumem.trace.replay.StartMode;
import io.gpumem.trace.replay.WhatIfReplay;
import io.gpumem.trace.session.TraceSession;
import io.gpumem.trace.window.RecordedConfig;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The recording a program would make at a value never run, written from {@link SizeLaws}: a PyTorch snapshot
 * (segments at the end, one device trace) like the ones the program was recorded in, so that compare, analyze,
 * report and PyTorch's viewer read it like any other.
 *
 * <h2>How it is made</h2>
 * The predicted <em>program</em> is played on the exact allocator under the reference's recorded configuration, by
 * the engine's one runner, with history on: first the blocks live at the reference window's start, allocated in
 * their slot order at their predicted size ({@link StartBlockLaws}: what is constant stays, what scales is scaled),
 * then the reference window's requests and frees, {@value #PASSES} times over, each request at its law's size. The
 * recording is the last pass: its trace is the history of that pass, its segments are the allocator's at the end.
 * The earlier passes are the warm-up a real run has before its recorded window: the cache state the window starts
 * from is what the predicted steps leave behind, not the reference's. Between passes, the blocks the window frees
 * but allocated before it (the previous step's outputs) are the blocks the previous pass left live, paired in
 * order; a block a pass leaves live without such a partner is freed at the pass's end, so nothing accumulates.
 *
 * <p>A request with a law gets the law's size; one without (no law fits, or some recording lacks it) keeps the
 * reference's size and is counted as unpredicted. Release runs the user asked for ({@code empty_cache()}) are
 * replayed; driver calls are the allocator's own. Every entry of the window keeps the reference entry's stack,
 * time and unknown keys, so the predicted file reads like the reference. Addresses are the allocator's decisions,
 * so {@code gpumem replay --check} reproduces the predicted recording exactly: the program is played on the device
 * that replay assumes ({@link OracleDevice#DEFAULT_TOTAL_MEMORY}; the file records no device size, and expandable
 * segments size their reservations from it) whenever it runs there without a failed request or a cache release; a
 * program that needs more is played on a larger device ({@link #deviceBytes()}), which replay must then be given
 * with {@code --capacity}.
 */
public final class PredictedRecording {

    /** Passes of the window played: the last is recorded, the ones before warm the cache. */
    public static final int PASSES = 3;

    /**
     * The largest device the predicted program is played on (32 TiB, hundreds of times any GPU's memory): a value
     * whose requests need more at once is not a program anyone can run.
     */
    public static final long MAX_DEVICE_BYTES = 32L << 40;

    private final TraceSnapshot trace;
    private final long at;
    private final int predicted;
    private final int unpredicted;
    private final int startBlocks;
    private final int startBlocksScaled;
    private final int startBlocksKept;
    private final int warmUpPasses;
    private final long deviceBytes;

    private PredictedRecording(
            TraceSnapshot trace,
            long at,
            int predicted,
            int unpredicted,
            int startBlocks,
            int startBlocksScaled,
            int startBlocksKept,
            int warmUpPasses,
            long deviceBytes) {
        this.trace = trace;
        this.at = at;
        this.predicted = predicted;
        this.unpredicted = unpredicted;
        this.startBlocks = startBlocks;
        this.startBlocksScaled = startBlocksScaled;
        this.startBlocksKept = startBlocksKept;
        this.warmUpPasses = warmUpPasses;
        this.deviceBytes = deviceBytes;
    }

    /** What the recordings asked in a row, label by label: "4194304 bytes at 128, 8388608 bytes at 256". */
    private static String recordedSizes(SizeLaws laws, int row) {
        StringBuilder out = new StringBuilder();
        for (int j = 0; j < laws.recordings().size(); j++) {
            out.append(j == 0 ? "" : ", ")
                    .append(laws.recordings().get(j).sizeOf(laws.requestOf(j, row)))
                    .append(" bytes at ")
                    .append(laws.label(j));
        }
        return out.toString();
    }

    /**
     * Writes the reference recording of {@code laws} (read from {@code referenceTrace}, device {@code device}) at
     * value {@code at}.
     *
     * @throws IllegalArgumentException when a law gives a size of zero or less (or beyond a long) at {@code at},
     *                                  naming the value and the request, or when the predicted program does not
     *                                  run on any device the simulator can model
     */
    public static PredictedRecording of(SizeLaws laws, TraceSnapshot referenceTrace, int device, long at) {
        RequestSequence ref = laws.reference();
        long[] sizeOfRequest = new long[ref.size()];
        for (int r = 0; r < ref.size(); r++) {
            sizeOfRequest[r] = ref.sizeOf(r);
        }
        int predicted = 0;
        for (int row = 0; row < laws.rows(); row++) {
            SizeLaw law = laws.law(row);
            if (law == null) {
                continue;
            }
            long size = law.at(at);
            if (size <= 0) {
                throw new IllegalArgumentException("at " + at + " the size law " + law + " of request "
                        + laws.referenceRequest(row) + " of " + ref.source() + " gives "
                        + (size == Long.MIN_VALUE ? "a size beyond 2^63" : size + " bytes")
                        + ": no program can make that request (recorded: " + recordedSizes(laws, row)
                        + "; recordings of another dtype, batch or model do not follow one law: predict from those"
                        + " that are one program at several sizes)");
            }
            sizeOfRequest[laws.referenceRequest(row)] = size;
            predicted++;
        }
        StartBlockLaws start = StartBlockLaws.predict(laws.recordings(), laws.labels(), at);
        AllocatorConfig config = RecordedConfig.of(referenceTrace);
        // a window recorded from the program's start (nothing reserved) starts cold; a warm one is warmed up
        int passes = ref.startReserved() == 0 && ref.startBlocks() == 0 ? 1 : PASSES;
        Program program = Program.of(ref, referenceTrace.traceOf(device), sizeOfRequest, start, passes);
        Played played = program.play(config, ref.source(), at);
        MemorySnapshot end = played.end();
        List<TraceEntry> window = program.lastPass(end.deviceTraces().getFirst());
        String source = "predicted at " + at + " from " + ref.source();
        TraceSnapshot full = AllocatorSnapshots.toTraceSnapshot(end, source);
        TraceSnapshot predictedTrace = new TraceSnapshot(
                source,
                full.format(),
                full.segments(),
                List.of(window),
                full.allocatorSettings(),
                full.externalAnnotations(),
                full.extra(),
                true);
        return new PredictedRecording(
                predictedTrace,
                at,
                predicted,
                ref.size() - predicted,
                ref.startBlocks(),
                start.scaled(),
                start.kept(),
                passes - 1,
                played.deviceBytes());
    }

    /** The allocator's state after playing a program, and the bytes of the device it was played on. */
    private record Played(MemorySnapshot end, long deviceBytes) {}

    /**
     * The predicted program as one request stream: the start blocks, then {@link #PASSES} passes of the window.
     * Op {@code k}'s time is {@code k} while it plays, so that each history entry names the op that made it.
     */
    private static final class Program {
        final RequestStream stream;
        /** The reference entry op k replays (null for start blocks and the frees between passes). */
        final TraceEntry[] cause;
        /** The first op of the recorded (last) pass. */
        final int lastPassStart;

        private Program(RequestStream stream, TraceEntry[] cause, int lastPassStart) {
            this.stream = stream;
            this.cause = cause;
            this.lastPassStart = lastPassStart;
        }

        static Program of(
                RequestSequence ref, List<TraceEntry> entries, long[] sizeOfRequest, StartBlockLaws start, int passes) {
            RequestStream.Builder b = RequestStream.builder();
            List<TraceEntry> causes = new ArrayList<>();
            Map<List<Frame>, Integer> sites = new HashMap<>();
            Map<Long, Integer> startByAddress = new HashMap<>();
            int[] startSlot = new int[ref.startBlocks()];
            for (int i = 0; i < ref.startBlocks(); i++) {
                startSlot[i] = b.alloc(start.size(i), ref.startBlockStreamOf(i), -1);
                b.at(b.length() - 1L);
                causes.add(null);
                startByAddress.put(ref.startBlockAddressOf(i), i);
            }
            boolean hasCompletions = TraceEntry.recordsFreeCompletions(entries);
            boolean[] userEmptyCache = WhatIfReplay.classifyReleaseRuns(entries);
            // start block i freed inside the window, and the pass's requests live at its end: the previous step's
            // outputs and this step's, paired in order from one pass to the next
            int[] freedStart = new int[ref.startBlocks()];
            int nFreedStart = 0;
            int[] carried = new int[0]; // slot standing for freedStart[t] in the pass being written, −1 when none
            int lastPassStart = 0;
            for (int pass = 0; pass < passes; pass++) {
                if (pass == passes - 1) {
                    lastPassStart = b.length();
                }
                Map<Long, Integer> live = new HashMap<>();
                List<long[]> liveOrder = new ArrayList<>(); // {slot, size} of each request, in order
                int freedThisPass = 0;
                int r = 0;
                for (int i = 0; i < entries.size(); i++) {
                    TraceEntry e = entries.get(i);
                    TraceAction a = e.action();
                    if (a == TraceAction.ALLOC) {
                        long size = sizeOfRequest[r++];
                        int slot = b.alloc(size, e.stream(), i);
                        live.put(e.addr(), slot);
                        liveOrder.add(new long[] {slot, size});
                    } else if (a == TraceAction.FREE_COMPLETED
                            || (a == TraceAction.FREE_REQUESTED && !hasCompletions)) {
                        Integer slot = live.remove(e.addr());
                        if (slot == null) {
                            Integer s = startByAddress.get(e.addr());
                            if (s == null) {
                                continue; // a block the start state does not hold
                            }
                            if (pass == 0) {
                                freedStart[nFreedStart++] = s;
                                slot = startSlot[s];
                            } else {
                                int t = freedThisPass++;
                                slot = carried[t];
                            }
                            if (slot < 0 || !b.isLive(slot)) {
                                continue;
                            }
                        }
                        b.free(slot, i);
                    } else if (userEmptyCache[i]) {
                        b.emptyCache(i);
                    } else {
                        continue;
                    }
                    List<Frame> f = e.frames();
                    if (f != null) {
                        b.atSite(sites.computeIfAbsent(f, b::site));
                    }
                    b.at(b.length() - 1L);
                    causes.add(e);
                }
                if (pass < passes - 1) {
                    carried = carryOver(b, causes, liveOrder, freedStart, nFreedStart, start, ref);
                }
            }
            return new Program(b.build(), causes.toArray(new TraceEntry[0]), lastPassStart);
        }

        /**
         * Ends a pass so that the next starts with the start's live blocks again: each start block the window frees
         * is stood for by a block this pass left live with the same size (the first in allocation order), else by a
         * fresh block allocated now; blocks left live with no such role are freed now. Returns the slot standing
         * for each freed start block, in the order the window frees them.
         */
        private static int[] carryOver(
                RequestStream.Builder b,
                List<TraceEntry> causes,
                List<long[]> leftLive,
                int[] freedStart,
                int nFreedStart,
                StartBlockLaws start,
                RequestSequence ref) {
            Map<Long, ArrayDeque<Integer>> bySize = new HashMap<>();
            for (long[] slotAndSize : leftLive) {
                if (b.isLive((int) slotAndSize[0])) {
                    bySize.computeIfAbsent(slotAndSize[1], k -> new ArrayDeque<>())
                            .add((int) slotAndSize[0]);
                }
            }
            int[] carried = new int[nFreedStart];
            for (int t = 0; t < nFreedStart; t++) {
                ArrayDeque<Integer> same = bySize.get(start.size(freedStart[t]));
                carried[t] = same == null || same.isEmpty() ? -1 : same.poll();
            }
            for (ArrayDeque<Integer> unused : bySize.values()) {
                for (int slot : unused) {
                    b.free(slot, -1);
                    b.at(b.length() - 1L);
                    causes.add(null);
                }
            }
            for (int t = 0; t < nFreedStart; t++) {
                if (carried[t] < 0) {
                    int s = freedStart[t];
                    carried[t] = b.alloc(start.size(s), ref.startBlockStreamOf(s), -1);
                    b.at(b.length() - 1L);
                    causes.add(null);
                }
            }
            return carried;
        }

        /**
         * Plays the program on the exact allocator with history: on the device {@code replay --check} assumes
         * ({@link OracleDevice#DEFAULT_TOTAL_MEMORY}) where it runs there untouched, else on a larger one. Returns the
         * allocator's snapshot at the end and the device's bytes.
         */
        Played play(AllocatorConfig config, String source, long at) {
            long live = stream.peakLiveBytes();
            if (live > MAX_DEVICE_BYTES) {
                throw new IllegalArgumentException("at " + at + " the requests predicted from " + source + " hold "
                        + ByteSize.format(live) + " live at once, more than the " + ByteSize.format(MAX_DEVICE_BYTES)
                        + " a simulated device models");
            }
            StreamRunner runner = new StreamRunner(stream);
            // A snapshot records no device size and replay --check assumes OracleDevice's default, while expandable
            // segments size their virtual reservation from the device's memory: played on any other device, the
            // prediction's segments would not replay exactly. So the default device is tried first, and kept when the
            // program runs there as on an unlimited one (no failed request, no cache released to make room).
            if (live <= OracleDevice.DEFAULT_TOTAL_MEMORY) {
                RunOutcome o = runner.run(
                        PolicyRegistry.exact(config),
                        RunOptions.toFirstFailureKeepingState(OracleDevice.DEFAULT_TOTAL_MEMORY));
                if (o.ooms() == 0 && o.retries() == 0 && o.allocator() != null) {
                    return new Played(o.allocator().snapshot(), OracleDevice.DEFAULT_TOTAL_MEMORY);
                }
            }
            long capacity = Math.min(
                    MAX_DEVICE_BYTES,
                    Math.max(2 * OracleDevice.DEFAULT_TOTAL_MEMORY, MinimumCapacity.roundUp(2 * live)));
            while (true) {
                RunOutcome o =
                        runner.run(PolicyRegistry.exact(config), RunOptions.toFirstFailureKeepingState(capacity));
                if (o.ooms() == 0 && o.allocator() != null) {
                    return new Played(o.allocator().snapshot(), capacity);
                }
                if (capacity == MAX_DEVICE_BYTES) {
                    throw new IllegalArgumentException("at " + at + " the requests predicted from " + source
                            + " do not run on a simulated device of " + ByteSize.format(MAX_DEVICE_BYTES));
                }
                capacity = Math.min(MAX_DEVICE_BYTES, 2 * capacity);
            }
        }

        /** The history entries of the last pass, each with its reference entry's stack, time and unknown keys. */
        List<TraceEntry> lastPass(List<TraceEntry> history) {
            List<TraceEntry> out = new ArrayList<>();
            for (TraceEntry made : history) {
                int op = (int) made.timeUs();
                if (op < lastPassStart) {
                    continue;
                }
                TraceEntry e = cause[op];
                out.add(e == null ? made : AllocatorSnapshots.entry(made, e));
            }
            return out;
        }
    }

    /** The predicted recording: device 0 holds the predicted trace; segments are the state at its end. */
    public TraceSnapshot trace() {
        return trace;
    }

    /**
     * The predicted recording as a trace session whose what-ifs start from its window as predicted: the start state is
     * the cache the predicted warm-up passes left, already a steady state, so no warm-up of its own is run. Every use
     * of a prediction ({@code predict --at}, {@code --fit} and the leave-one-out errors) plays it through here, so a row
     * means the same in each (a {@code --fit} row once came from the steady state while its probes ran the window).
     */
    public TraceSession session() {
        return TraceSession.of(trace).startMode(StartMode.WINDOW);
    }

    /** The value predicted at. */
    public long at() {
        return at;
    }

    /** Requests whose size a law gives. */
    public int predictedRequests() {
        return predicted;
    }

    /** Requests kept at the reference's size (no law, or not aligned in every recording). */
    public int unpredictedRequests() {
        return unpredicted;
    }

    /** Blocks live at the reference window's start: the predicted window starts with them live. */
    public int startBlocks() {
        return startBlocks;
    }

    /** Start blocks whose size a non-constant law gives. */
    public int startBlocksScaled() {
        return startBlocksScaled;
    }

    /**
     * Passes of the window played before the recorded one: {@value #PASSES} − 1 for a window that starts warm, 0 for
     * one recorded from the program's start (nothing reserved, nothing live).
     */
    public int warmUpPasses() {
        return warmUpPasses;
    }

    /**
     * Bytes of the simulated device the program was played on: {@link OracleDevice#DEFAULT_TOTAL_MEMORY}, what
     * {@code replay --check} assumes, unless the program needs more (then replay it with {@code --capacity} this).
     */
    public long deviceBytes() {
        return deviceBytes;
    }

    /** Start blocks that scale in the recordings but fit no law: kept at the reference's size. */
    public int startBlocksKept() {
        return startBlocksKept;
    }
}
