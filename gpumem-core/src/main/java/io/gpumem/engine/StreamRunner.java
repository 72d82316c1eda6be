package io.gpumem.engine;

import io.gpumem.alloc.AllocatorInternals;
import io.gpumem.alloc.ForkableAllocator;
import io.gpumem.alloc.GpuAllocator;
import io.gpumem.alloc.GpuAllocatorInternals;
import io.gpumem.alloc.SegmentRestorer;
import io.gpumem.alloc.SlotSession;
import io.gpumem.device.DeviceOp;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.engine.MinimumCapacity.Verdict;
import io.gpumem.history.BlockInfo;
import io.gpumem.history.HistoryOptions;
import io.gpumem.history.SegmentInfo;
import io.gpumem.oom.OutOfMemoryException;
import io.gpumem.plan.LifetimeProblem;
import io.gpumem.policy.PolicySpec;
import io.gpumem.policy.PreparedPolicy;
import io.gpumem.policy.StreamFacts;
import io.gpumem.stats.MemoryStats;
import io.gpumem.stats.StatKind;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;
import java.util.function.LongSupplier;
import org.jspecify.annotations.Nullable;

/**
 * The one runner of the what-if layer: plays a {@link RequestStream} on an allocator made by a
 * {@link PreparedPolicy} (a registered policy prepared for this stream, {@link #prepare}, or the exact allocator
 * under a configuration) on a fresh {@link SimulatedDevice} of a capacity (plus bytes held outside the allocator),
 * and measures it in a {@link RunOutcome}. It knows nothing of which policy it runs: every policy is prepared from
 * the same {@link StreamFacts} ({@link #facts}), and what differs between allocators is reached through
 * capabilities ({@link ForkableAllocator} for prefix reuse, a {@link SegmentRestorer} behind
 * {@link GpuAllocator#internals()} for a start state kept in its recorded layout) and the allocator's internals
 * (history, step boundaries).
 *
 * <p>A run either stops at the first failed request, as a training job would ({@link RunOptions#stopAtFirstOom}), or
 * counts failed requests and goes on, as a trace replay does (the later frees of a failed request are skipped).
 * The start state's live blocks are restored in their recorded layout where the allocator can and
 * {@link RunOptions#restoreStartLayout} asks for it, else allocated as requests in slot order; a start state that
 * does not fit makes the run fail as a whole (one OOM, no figures).
 *
 * <p>{@link #evaluate} is a compare row: the run at a capacity plus the minimum capacity
 * ({@link MinimumCapacity#search}), whose probes reuse replayed prefixes ({@link CapacityProbes}) where the
 * allocator is forkable and its decisions do not depend on the capacity. Runs share only read-only state (the
 * stream), so one runner may evaluate on several threads at once.
 */
public final class StreamRunner {

    /** Device memory an "unlimited" run starts from; doubled until the stream fits. */
    public static final long ROOMY = 8L << 30;

    private final RequestStream stream;
    private final StreamFacts facts;
    private final Map<PolicySpec, PreparedPolicy> prepared = new ConcurrentHashMap<>();
    /** Replays begun (from the start or from a fork) and ops replayed, for measurement. */
    final AtomicLong replaysBegun = new AtomicLong();
    /** Capacity-search probes answered by a run already made instead of a replay ({@link CapacityProbes}). */
    final AtomicLong probesAnsweredBySeenRuns = new AtomicLong();
    /** Capacity-search probes the search took already computed, or being computed, by an idle worker. */
    final AtomicLong probesTakenAhead = new AtomicLong();

    final AtomicLong opsReplayed = new AtomicLong();
    /** Mallocs played with the free that follows them as one call ({@link Replay#freedAtOnce}), for measurement. */
    final AtomicLong pairsFreedAtOnce = new AtomicLong();

    private volatile boolean prefixReuse = true;
    private volatile int checkpointGain = CapacityProbes.MIN_CHECKPOINT_GAIN;
    private volatile int maxCheckpoints = CapacityProbes.MAX_CHECKPOINTS;

    public StreamRunner(RequestStream stream) {
        this.stream = stream;
        this.facts = StreamFacts.of(stream.steps() > 0, this::profile);
    }

    public RequestStream stream() {
        return stream;
    }

    /** What a policy may learn about this runner's stream: whether it marks steps, and its lifetime profile. */
    public StreamFacts facts() {
        return facts;
    }

    /** {@code spec} prepared for this runner's stream, once per spec (a planning policy plans once). */
    public PreparedPolicy prepare(PolicySpec spec) {
        return prepared.computeIfAbsent(spec, s -> s.prepare(facts));
    }

    /**
     * The stream as a profile of buffers (request k of a run is buffer k): start blocks live from time 0, each alloc
     * from its op index to the op that frees it, or to the end.
     */
    private LifetimeProblem profile() {
        RequestStream rs = stream;
        int n = rs.slots;
        long[] lower = new long[n];
        long[] upper = new long[n];
        long[] size = new long[n];
        long[] id = new long[n];
        int[] slot = {0};
        RequestStream.forEachLiveBlock(rs.startState(), (seg, b) -> size[slot[0]++] = b.size());
        Arrays.fill(upper, rs.length + 1L);
        for (int k = 0; k < rs.length; k++) {
            if (rs.op[k] == RequestStream.ALLOC) {
                lower[rs.slot[k]] = k + 1L;
                size[rs.slot[k]] = Math.max(1, rs.size[k]);
            } else if (rs.op[k] == RequestStream.FREE) {
                upper[rs.slot[k]] = k + 1L;
            }
        }
        for (int i = 0; i < n; i++) {
            id[i] = i;
        }
        return new LifetimeProblem(id, lower, upper, size, 512);
    }

    /** Switches prefix reuse in the capacity search (on by default; tests compare both ways). */
    public void setPrefixReuse(boolean on) {
        prefixReuse = on;
    }

    /** Ops a new checkpoint of the capacity search must save; tests lower it to exercise many checkpoints. */
    public void setCheckpointGain(int ops) {
        checkpointGain = ops;
    }

    int checkpointGain() {
        return checkpointGain;
    }

    /** Checkpoints one search may add (at least one is kept); tests lower it to make probes evict them. */
    public void setMaxCheckpoints(int count) {
        maxCheckpoints = count;
    }

    int maxCheckpoints() {
        return maxCheckpoints;
    }

    /**
     * {@code {replays begun, ops replayed, capacity probes answered without a replay, capacity probes taken from
     * idle workers that ran them ahead, mallocs played with their free as one call}} so far by this runner (a
     * measurement aid).
     */
    public long[] replayCounts() {
        return new long[] {
            replaysBegun.get(),
            opsReplayed.get(),
            probesAnsweredBySeenRuns.get(),
            probesTakenAhead.get(),
            pairsFreedAtOnce.get()
        };
    }

    /** Counters of one replay. */
    static final class Counters {
        long peakAllocated;
        long peakReserved;
        long deviceAllocs;
        long deviceFrees;
        long retries;
        long ooms;
        long deviceMaps;
        long refusedForMemory;
        long nanos;
        int stepsCompleted;
        int failedOp = -1;

        @Nullable
        OutOfMemoryException firstOom;

        /** A failed request at op {@code k}: counted, and kept if it is the first. */
        void failed(OutOfMemoryException oom, int k) {
            ooms++;
            if (firstOom == null) {
                firstOom = oom;
                failedOp = k;
            }
        }

        RunOutcome.Builder outcome(long capacity, int pairs) {
            return RunOutcome.builder()
                    .capacity(capacity)
                    .peakAllocated(peakAllocated)
                    .peakReserved(peakReserved)
                    .deviceAllocs(deviceAllocs)
                    .deviceFrees(deviceFrees)
                    .retries(retries)
                    .ooms(ooms)
                    .deviceMaps(deviceMaps)
                    .nsPerPair(pairs == 0 ? 0 : (double) nanos / pairs)
                    .stepsCompleted(stepsCompleted)
                    .failedOp(failedOp)
                    .oomReport(firstOom == null ? null : firstOom.report());
        }
    }

    /**
     * A replay in progress: device, allocator, the address of each slot, the next op. A {@link Checkpoint} keeps its
     * state to fork replays from for the capacity search.
     */
    static final class Replay {
        final SimulatedDevice dev;
        final GpuAllocator allocator;
        final long[] devStreams;
        final long[] address;
        int next;
        /** The op being played (−1 before the first): what history's stacks and clock read. */
        int current = -1;
        /** Whether a STEP has opened a step yet. */
        boolean stepOpen;
        /** The session a whole run plays through on the exact allocator; null: the allocator's own malloc and free. */
        @Nullable
        SlotSession session;

        /**
         * Whether a malloc whose block the next op frees is played as one call
         * ({@link ForkableAllocator#tryMallocFreedAtOnce}): set for the capacity search's forks, whose allocators
         * keep no statistics, so that the pair leaves nothing to count.
         */
        boolean freedAtOnce;

        int stepsClosed;
        /** Whether to stop at a step boundary once reserved memory stops changing ({@link RunOptions#untilSteady}). */
        boolean untilSteady;

        private long reservedAtBoundary = -1;
        private long peakReservedAtBoundary = -1;
        /** The most blocks live at once in the stream (what a fork sizes its allocation table for). */
        int liveBlocksAtPeak;

        Replay(SimulatedDevice dev, GpuAllocator allocator, long[] devStreams, long[] address) {
            this.dev = dev;
            this.allocator = allocator;
            this.devStreams = devStreams;
            this.address = address;
        }

        /**
         * A STEP op: closes the open step (telling the allocator) and opens the next; true when the replay is to stop
         * there, reserved memory having stopped changing ({@link RunOptions#untilSteady}).
         */
        boolean step() {
            boolean stop = false;
            if (stepOpen) {
                stepsClosed++;
                allocator.internals().stepBoundary();
                stop = untilSteady && steadySinceLastStep();
            }
            stepOpen = true;
            return stop;
        }

        /** At a step's end: whether reserved memory, now and at its peak, is what it was at the previous step's end. */
        boolean steadySinceLastStep() {
            MemoryStats stats = allocator.stats();
            long now = stats.get(StatKind.RESERVED_BYTES).current();
            long peak = stats.get(StatKind.RESERVED_BYTES).peak();
            boolean same = now == reservedAtBoundary && peak == peakReservedAtBoundary;
            reservedAtBoundary = now;
            peakReservedAtBoundary = peak;
            return same;
        }
    }

    /** Plays the whole stream once. */
    public RunOutcome run(PreparedPolicy policy, RunOptions options) {
        Counters c = new Counters();
        Replay r = begin(policy, options);
        if (r == null) {
            c.ooms = 1;
            return c.outcome(options.capacity(), stream.allocs).build();
        }
        playAll(r, c, options, null);
        RunOutcome.Builder b = c.outcome(options.capacity(), stream.allocs);
        if (options.keepAllocator()) {
            b.kept(r.allocator, r.dev);
        }
        return b.build();
    }

    /** Whether the stream runs without a failed request on a device of {@code capacity} bytes. */
    public boolean runsWithoutOom(PreparedPolicy policy, RunOptions options) {
        Verdict v = probe(policy, options, ProbeLookahead.AbandonableProbe.NEVER);
        return v != null && v.runs();
    }

    /**
     * {@link #runsWithoutOom(PreparedPolicy, RunOptions)} as a search's verdict (a failure's cost: the ops up to it over
     * the stream's), or null once {@code abandoned} says so (a lookahead probe).
     */
    @Nullable
    Verdict probe(PreparedPolicy policy, RunOptions options, BooleanSupplier abandoned) {
        Counters c = new Counters();
        Replay r = begin(policy, options);
        if (r == null) {
            return Verdict.failsAfter(1, stream.length); // the start state does not fit: it failed at once
        }
        if (!playUnlessAbandoned(r, stream.length, c, abandoned)) {
            return null;
        }
        return Verdict.ofRun(c.ooms == 0 ? -1 : c.failedOp, stream.length);
    }

    /** Ops a probe replays between two looks at whether it is abandoned (about a millisecond). */
    static final int CHUNK = 1 << 14;

    /**
     * Plays {@code r} on to {@code end} or its first failure, looking every {@link #CHUNK} ops at whether it is
     * abandoned; false if it was, before getting there.
     */
    boolean playUnlessAbandoned(Replay r, int end, Counters out, BooleanSupplier abandoned) {
        while (r.next < end && out.ooms == 0) {
            if (abandoned.getAsBoolean()) {
                return false;
            }
            int to = Math.min(end, r.next + CHUNK);
            if (r.freedAtOnce) {
                playFork(r, to, out);
            } else {
                play(r, to, out, true);
            }
        }
        return true;
    }

    /** Plays the whole stream on {@code r}, with the rises of its peak demand noted in {@code rises} when given. */
    private void playAll(Replay r, Counters c, RunOptions options, CapacityProbes.@Nullable PeakRises rises) {
        long t0 = System.nanoTime();
        if (rises != null) {
            rises.clear();
            r.dev.reportPeakDemandRises(peak -> rises.add(r.current, peak));
        }
        // The exact allocator plays a whole run through a slot session (one lock, no address table for its own
        // blocks); the start state's blocks, allocated before, are freed by address.
        SlotSession session =
                r.allocator.internals() instanceof AllocatorInternals exact ? exact.openSlots(r.address.length) : null;
        r.session = session;
        try {
            play(r, stream.length, c, options.stopAtFirstOom());
        } finally {
            r.session = null;
            if (session != null) {
                session.close();
            }
            r.dev.reportPeakDemandRises(null);
        }
        c.nanos = System.nanoTime() - t0;
        finish(r, c);
    }

    /**
     * A compare row: the run at {@code options}' capacity (failed requests counted, as a trace replay counts them)
     * and the minimum capacity, searched between the peak allocated bytes of an unlimited run (no run needs less)
     * and its peak reserved bytes (which always suffice). The unlimited run starts at {@code roomy} bytes and
     * doubles until the stream fits.
     */
    public RunOutcome evaluate(PreparedPolicy policy, RunOptions options, long roomy) {
        Search s = unlimited(policy, options.toBuilder().stopAtFirstOom(false), roomy, 8);
        // At a capacity the unlimited run never exceeded, the run is the unlimited one (CapacityProbes says why),
        // unless the options ask what that run did not do: stop once steady, keep its allocator, record a history.
        RunOutcome atCapacity = s.probes != null
                        && !options.untilSteady()
                        && !options.keepAllocator()
                        && !options.recordHistory()
                        && s.probes.sameAsUnlimited(options.capacity())
                ? s.unlimited.outcome(options.capacity(), stream.allocs).build()
                : run(policy, options.toBuilder().stopAtFirstOom(false).build());
        return atCapacity.toBuilder().minCapacity(searchMinimum(s)).build();
    }

    /**
     * The smallest capacity (a multiple of {@link MinimumCapacity#STEP}, with {@code options}' bytes held outside)
     * at which the stream runs to its end without a failed request: searched above the peak of its live request
     * bytes (no allocator needs less) and at most the peak reserved bytes of a run with {@code roomy} bytes,
     * raised by doubling where that does not run. The search plays the whole stream: {@code options}'
     * {@link RunOptions#untilSteady} is for runs, not for it.
     */
    public long minimumCapacity(PreparedPolicy policy, RunOptions options, long roomy) {
        return searchMinimum(unlimited(policy, options.toBuilder().stopAtFirstOom(true), roomy, 0));
    }

    /**
     * The one bracket and search behind {@link #evaluate} and {@link #minimumCapacity}. Feasibility is not
     * always monotone in capacity (an OOM's cache flush can rescue a smaller capacity; seen with
     * {@code roundup_power2_divisions}), so the answer depends on the bracket: both paths must search the same one.
     * Failing: the last multiple of the step below the unlimited run's peak allocated bytes plus the bytes held
     * outside (for a run that fit nowhere, the peak of live request bytes). Running: the unlimited run's peak
     * reserved plus held, doubled while a run there fails.
     *
     * <p>The first floor is not probed, and it is not always a bound: the blocks an allocator hands out can depend
     * on the capacity (under {@code max_split_size_mb} an oversize cached block is given whole, so a smaller device
     * can allocate fewer bytes at its peak than the unlimited run did). So an answer one step above it is checked
     * there, and where the floor runs the search goes on below it, down to the peak of live request bytes (the
     * floor of every allocator). Any other answer already has a probed failure one step below it.
     */
    private long searchMinimum(Search s) {
        long step = MinimumCapacity.STEP;
        long held = s.options.heldOutside();
        if (stream.peakLiveBytes() > MinimumCapacity.LARGEST - held) {
            throw outOfReach(stream.peakLiveBytes() + " bytes live at once");
        }
        // No capacity at or below the bytes held outside runs anything (the device needs room beside them, and a run
        // there is refused): the last multiple of the step not above them is a failing bound the search never probes.
        long heldFloor = held / step * step;
        long liveFloor = Math.max(heldFloor, Math.max(0, (stream.peakLiveBytes() + held) / step - 1) * step);
        long failing = Math.max(
                heldFloor,
                s.unlimited.ooms == 0 ? Math.max(0, (s.unlimited.peakAllocated + held) / step - 1) * step : liveFloor);
        long running = MinimumCapacity.roundUp(s.unlimited.peakReserved + held);
        if (running <= failing) {
            // the run with roomy bytes failed before it had reserved more than the floor (its first requests did not
            // fit): nothing of it bounds the answer, so the doubling starts from the capacity it failed at
            running = MinimumCapacity.roundUp(Math.max(s.options.capacity(), failing + step));
        }
        boolean floorProbed = false;
        for (int tries = 0; !s.probe(running).runs(); tries++) {
            if (tries == 8 || running > MinimumCapacity.LARGEST / 2) {
                throw outOfReach("no capacity up to " + running + " bytes runs them");
            }
            failing = running;
            floorProbed = true;
            running = MinimumCapacity.roundUp(2 * running);
        }
        long floor = failing;
        long answer = searchBracket(s, failing, running);
        if (answer == floor + step
                && !floorProbed
                && floor > liveFloor
                && s.probe(floor).runs()) {
            answer = searchBracket(s, liveFloor, floor);
        }
        return answer;
    }

    /** Why a stream has no minimum capacity: {@code why}, and its largest request. */
    private NoCapacityRunsException outOfReach(String why) {
        long largest = 0;
        for (int k = 0; k < stream.length; k++) {
            largest = stream.op[k] == RequestStream.ALLOC ? Math.max(largest, stream.size[k]) : largest;
        }
        return new NoCapacityRunsException("no device capacity runs these requests (" + why + "; the largest request"
                + " asks for " + largest
                + " bytes; PyTorch's allocator refuses any request of 2^60 bytes (1 EiB) or more, and a policy may cap"
                + " its own pool, as rmm-pool's max does): there is no minimum capacity to search");
    }

    /**
     * {@link MinimumCapacity#search} over {@code (failing, running]}, with its probes run ahead on the idle workers of
     * this thread's batch where there are some and the allocator is the exact one ({@link ProbeLookahead}).
     */
    private long searchBracket(Search s, long failing, long running) {
        if (!s.runsAhead || !IdleWorkers.CURRENT.isBound()) {
            return MinimumCapacity.search(failing, running, s::probe, null);
        }
        ProbeLookahead ahead = new ProbeLookahead(s, IdleWorkers.CURRENT.get(), probesTakenAhead, probesThatFit());
        try {
            return MinimumCapacity.search(failing, running, s::probe, ahead);
        } finally {
            ahead.abandonAll();
        }
    }

    /**
     * How many probes the heap can hold beside what it holds now: a probe's largest part is its per-slot address
     * array (44 MB on a 1 GB snapshot's 5.5 M allocations), taken twice for its allocator's copy, and half of the
     * free heap is left to everything else (a command sized for one probe at a time must not run out of memory
     * because a machine has many cores).
     */
    private int probesThatFit() {
        Runtime rt = Runtime.getRuntime();
        long free = rt.maxMemory() - (rt.totalMemory() - rt.freeMemory());
        long perProbe = 16L * Math.max(1, stream.slots) + (1L << 20);
        return (int) Math.min(ProbeLookahead.MAX_LENT, Math.max(0, free / 2 / perProbe));
    }

    /** The unlimited run of a capacity search and the probes it makes possible. */
    private final class Search implements ProbeLookahead.AbandonableProbe {
        final PreparedPolicy policy;
        final RunOptions options;
        final Counters unlimited;
        final @Nullable CapacityProbes probes;
        /** Whether idle workers may run this search's probes ahead ({@link ProbeLookahead}). */
        final boolean runsAhead;

        Search(
                PreparedPolicy policy,
                RunOptions options,
                Counters unlimited,
                @Nullable CapacityProbes probes,
                boolean runsAhead) {
            this.policy = policy;
            this.options = options;
            this.unlimited = unlimited;
            this.probes = probes;
            this.runsAhead = runsAhead;
        }

        /** The verdict at {@code capacity}, or null once {@code abandoned} says so (a probe run ahead). */
        @Override
        public @Nullable Verdict probe(long capacity, BooleanSupplier abandoned) {
            return probes != null
                    ? probes.probe(capacity, abandoned)
                    : StreamRunner.this.probe(policy, options.forSearch(capacity), abandoned);
        }
    }

    /**
     * Runs the stream with {@code roomy} bytes, doubled up to {@code doublings} times while a request fails; notes
     * the rises of its peak demand for prefix reuse where the allocator is forkable and the capacity does not shape
     * its decisions.
     */
    private Search unlimited(PreparedPolicy policy, RunOptions.Builder options, long roomy, int doublings) {
        RunOptions o = options.capacity(roomy)
                .recordHistory(false)
                .keepAllocator(false)
                .untilSteady(false)
                .build();
        CapacityProbes.@Nullable PeakRises rises = null;
        Counters unlimited = new Counters();
        Replay u = begin(policy, o);
        // the exact allocator's runs share nothing and decide the same on any thread: its probes may run side by
        // side; another policy's may not (planned's online planner stops on a clock, which a busier core moves)
        boolean runsAhead = u != null && u.allocator instanceof ForkableAllocator;
        if (u != null && prefixReuse && u.allocator instanceof ForkableAllocator f && !f.capacityShapesDecisions()) {
            rises = new CapacityProbes.PeakRises();
        }
        if (u == null) {
            unlimited.ooms = 1;
        } else {
            playAll(u, unlimited, o, rises);
        }
        for (int tries = 0; unlimited.ooms > 0 && tries < doublings; tries++) {
            roomy *= 2;
            o = o.withCapacity(roomy);
            unlimited = new Counters();
            u = begin(policy, o);
            if (u == null) {
                unlimited.ooms = 1;
            } else {
                playAll(u, unlimited, o, rises);
            }
        }
        @Nullable
        CapacityProbes probes = rises != null && unlimited.ooms == 0 && unlimited.refusedForMemory == 0
                ? new CapacityProbes(this, policy, o, rises)
                : null;
        return new Search(policy, o, unlimited, probes, runsAhead);
    }

    /** A replay positioned at the stream's first op, or null when the allocator or the start state does not fit. */
    @Nullable
    Replay begin(PreparedPolicy policy, RunOptions options) {
        replaysBegun.incrementAndGet();
        SimulatedDevice dev = SimulatedDevice.builder()
                .capacity(options.capacity())
                .heldOutside(options.heldOutside())
                .build();
        GpuAllocator allocator;
        try {
            allocator = policy.create(dev);
        } catch (OutOfMemoryException e) {
            return null;
        }
        RequestStream rs = stream;
        expectLiveBlocks(allocator, rs.peakLiveBlocks());
        // Recorded stream handles are arbitrary integers; the simulated device only knows streams it created.
        long[] devStreams = new long[rs.streams.length];
        for (int i = 0; i < devStreams.length; i++) {
            devStreams[i] = rs.streams[i] == 0 ? 0 : dev.createStream();
        }
        long[] address = new long[rs.slots]; // address per slot; 0 = not allocated (failed)
        Replay r = new Replay(dev, allocator, devStreams, address);
        r.liveBlocksAtPeak = rs.peakLiveBlocks();
        r.untilSteady = options.untilSteady();
        if (options.recordHistory()) {
            GpuAllocatorInternals internals = allocator.internals();
            internals.setClock(historyClock(r));
            internals.setContextSupplier(() -> r.current < 0 ? rs.defaultFrames() : rs.frames(r.current));
            internals.recordHistory(HistoryOptions.all());
        }
        List<SegmentInfo> start = rs.startState();
        if (start.isEmpty()) {
            return r;
        }
        @Nullable
        SegmentRestorer restorer =
                options.restoreStartLayout() && allocator.internals() instanceof SegmentRestorer sr ? sr : null;
        if (restorer != null) {
            long[] shifts;
            try {
                shifts = StartStateLoader.load(
                        restorer,
                        dev,
                        start,
                        null,
                        !restorer.expandableSegments(),
                        h -> devStreams[rs.streamIndexOf(h)]);
            } catch (IllegalStateException noRoom) {
                return null;
            }
            int slot = 0;
            for (int si = 0; si < start.size(); si++) {
                for (BlockInfo b : start.get(si).blocks()) {
                    if (RequestStream.isLive(b)) {
                        address[slot++] = b.address() + shifts[si];
                    }
                }
            }
            return r;
        }
        // The recorded layout means nothing to this allocator: the live blocks are its first requests.
        int slot = 0;
        for (SegmentInfo seg : start) {
            long s = devStreams[rs.streamIndexOf(seg.stream())];
            for (BlockInfo b : seg.blocks()) {
                if (RequestStream.isLive(b)) {
                    try {
                        address[slot++] = allocator.malloc(b.size(), s);
                    } catch (OutOfMemoryException e) {
                        return null;
                    }
                }
            }
        }
        return r;
    }

    /**
     * Sizes the exact allocator's table of live allocations for the stream's peak at once, so that a replay does not
     * rehash it again and again as it fills (3-4% of a what-if run); other allocators keep their own tables.
     */
    static void expectLiveBlocks(GpuAllocator allocator, int blocks) {
        if (allocator.internals() instanceof AllocatorInternals exact) {
            exact.expectLiveBlocks(blocks);
        }
    }

    /** The recorded time of the op being played, else a clock that ticks once per reading. */
    private LongSupplier historyClock(Replay r) {
        if (stream.time != null) {
            long[] time = stream.time;
            return () -> r.current < 0 ? 0 : time[r.current];
        }
        long[] clock = {1_700_000_000_000_000L};
        return () -> clock[0]++;
    }

    /**
     * Plays ops {@code r.next} up to (not including) {@code end}, counting failed requests in {@code out.ooms};
     * with {@code stopAtOom} returns at the first.
     */
    void play(Replay r, int end, Counters out, boolean stopAtOom) {
        RequestStream rs = stream;
        GpuAllocator allocator = r.allocator;
        long[] address = r.address;
        long[] devStreams = r.devStreams;
        byte[] op = rs.op;
        int[] slots = rs.slot;
        long[] size = rs.size;
        int[] streamIndex = rs.streamIndex;
        SlotSession session = r.session;
        int k = r.next;
        try {
            for (; k < end; k++) {
                r.current = k;
                switch (op[k]) {
                    case RequestStream.ALLOC -> {
                        int s = slots[k];
                        long st = devStreams[streamIndex[k]];
                        try {
                            address[s] =
                                    session != null ? session.malloc(s, size[k], st) : allocator.malloc(size[k], st);
                        } catch (OutOfMemoryException oom) {
                            out.failed(oom, k);
                            if (stopAtOom) {
                                k++;
                                return;
                            }
                        }
                    }
                    case RequestStream.FREE -> {
                        int s = slots[k];
                        long a = address[s];
                        if (a != 0) {
                            if (session != null) {
                                session.free(s, a);
                            } else {
                                allocator.free(a);
                            }
                            address[s] = 0;
                        }
                    }
                    case RequestStream.STEP -> {
                        if (r.step()) {
                            k++;
                            return;
                        }
                    }
                    default -> {
                        if (session != null) {
                            session.emptyCache();
                        } else {
                            allocator.emptyCache();
                        }
                    }
                }
            }
        } finally {
            ended(r, k, out);
        }
    }

    /**
     * {@link #play} for a capacity search's fork ({@link Replay#freedAtOnce}): returns at the first failed request,
     * and takes a malloc whose block the next op frees as one call
     * ({@link ForkableAllocator#tryMallocFreedAtOnce}). A loop of its own, so that the counted runs' loop and this one
     * are each compiled for the ops they see.
     */
    private void playFork(Replay r, int end, Counters out) {
        RequestStream rs = stream;
        ForkableAllocator allocator = (ForkableAllocator) r.allocator;
        long[] address = r.address;
        long[] devStreams = r.devStreams;
        byte[] op = rs.op;
        int[] slots = rs.slot;
        long[] size = rs.size;
        int[] streamIndex = rs.streamIndex;
        int pairs = 0;
        int k = r.next;
        try {
            while (k < end) {
                r.current = k;
                byte o = op[k];
                if (o == RequestStream.ALLOC) {
                    int slot = slots[k];
                    long stream = devStreams[streamIndex[k]];
                    if (k + 1 < end
                            && op[k + 1] == RequestStream.FREE
                            && slots[k + 1] == slot
                            && allocator.tryMallocFreedAtOnce(size[k], stream)) {
                        pairs++;
                        k += 2; // the free too: the block is free again, its slot stays empty
                        continue;
                    }
                    try {
                        address[slot] = allocator.malloc(size[k], stream);
                    } catch (OutOfMemoryException oom) {
                        out.failed(oom, k);
                        k++;
                        return;
                    }
                } else if (o == RequestStream.FREE) {
                    long a = address[slots[k]];
                    if (a != 0) {
                        allocator.free(a);
                        address[slots[k]] = 0;
                    }
                } else if (o == RequestStream.STEP) {
                    r.step();
                } else {
                    allocator.emptyCache();
                }
                k++;
            }
        } finally {
            pairsFreedAtOnce.addAndGet(pairs);
            ended(r, k, out);
        }
    }

    /** A play's end: {@code r} stopped before op {@code k}. */
    private void ended(Replay r, int k, Counters out) {
        opsReplayed.addAndGet(k - r.next);
        r.next = k;
        out.stepsCompleted = r.stepsClosed + (r.stepOpen && k == stream.length && out.ooms == 0 ? 1 : 0);
    }

    /** Fills in what a replay measured: the device's map calls and the allocator's statistics. */
    private static void finish(Replay r, Counters c) {
        c.deviceMaps = r.dev.callCount(DeviceOp.MAP) + r.dev.callCount(DeviceOp.UNMAP);
        c.refusedForMemory = r.dev.refusedForMemory();
        MemoryStats stats = r.allocator.stats();
        c.peakAllocated = stats.get(StatKind.ALLOCATED_BYTES).peak();
        c.peakReserved = stats.get(StatKind.RESERVED_BYTES).peak();
        c.deviceAllocs = stats.numDeviceAlloc();
        c.deviceFrees = stats.numDeviceFree();
        c.retries = stats.numAllocRetries();
    }
}
