package io.gpumem.trace.replay;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.engine.MinimumCapacity;
import io.gpumem.engine.NoCapacityRunsException;
import io.gpumem.engine.ParallelRuns;
import io.gpumem.engine.RequestStream;
import io.gpumem.engine.RunOptions;
import io.gpumem.engine.RunOutcome;
import io.gpumem.engine.StreamRunner;
import io.gpumem.history.MemorySnapshot;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.policy.PolicyRegistry;
import io.gpumem.policy.PolicySpec;
import io.gpumem.policy.PreparedPolicy;
import io.gpumem.trace.io.EntryFields;
import io.gpumem.trace.io.OpsScriptReader;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.window.WindowStart;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Function;
import java.util.function.IntConsumer;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;

/**
 * What-if replay of one device's trace window ({@code gpumem compare}): the window compiled once into the engine's
 * {@link RequestStream} ({@link WindowStreams}) and played by its {@link StreamRunner} under another configuration
 * of the exact allocator or another policy, on a simulated device of a given capacity. This is the trace side's
 * whole face onto the engine.
 *
 * <p>Configurations keep the start state's recorded layout (its segments stay cudaMalloc segments unless the
 * configuration uses expandable segments too), so differences are understated for windows that start with much
 * reserved; policies get the start state's live blocks as their first requests (the recorded layout means
 * nothing to them). Recorded release runs are replayed as {@code empty_cache()} when the user called it (the run
 * opens the window, or is not followed by a driver allocation or an oom; or an ops script's {@code empty_cache});
 * runs that are the OOM-retry path are left to the capacity model, which retries on its own. A request that fails
 * is counted as an OOM and its later frees are skipped. The minimum capacity is the engine's one search
 * ({@link StreamRunner#evaluate}).
 *
 * <p>The runs also ask again each request the recording saw fail ({@link #playedStream()}): at the recorded
 * capacity under the recorded configuration it fails again, and a configuration, policy or capacity that serves it
 * is one that would have avoided the OOM. Served, the request is freed at once (what the program would have done with
 * it is unknown) and the window goes on as recorded. What the recording held ({@link #stream()}: the categories, the
 * alignment of recordings) leaves those requests out.
 *
 * <h2>Steady state</h2>
 * A window that starts warm (its start segments hold cached free memory the earlier steps left) hands every
 * configuration the recorded cache, so on such windows every configuration prints about the same figures. When the
 * window is also a loop body (what it leaves live stands, size for size, for the start blocks it frees:
 * {@link RequestStream#loopClosure()} at least {@link #MIN_LOOP_CLOSURE}), {@link StartMode#AUTO} evaluates each
 * configuration and policy from the window's live blocks alone: the engine's
 * {@link RequestStream#iterated iterated} window, the live blocks its first requests, played by the same runner
 * until reserved memory stops changing from one pass to the next ({@link RunOptions.Builder#untilSteady},
 * at most {@link #MAX_PASSES} passes), then evaluated with that many passes. Each configuration and policy finds its
 * own number of passes; a row says how many it used ({@link RunOutcome#warmUpPasses()}). Under the recorded
 * configuration the steady state must land on the recording's own peak reserved: the difference is the method's
 * built-in check, which compare prints.
 */
public final class WhatIfReplay {

    private final TraceSnapshot snapshot;
    private final int device;
    private final WindowStart start;
    private final boolean[] userEmptyCache;
    /** The window's requests as recorded, the failed ones left out. */
    private final RequestStream requests;
    /** Plays {@link #playedStream()}: the window with each failed request asked again. */
    private final StreamRunner runner;
    /** The recorded requests compiled with stacks and times ({@link #history}); null until first asked for. */
    private volatile @Nullable RequestStream requestsWithHistory;
    /** The played stream so compiled, when it differs from the recorded requests; null until first asked for. */
    private volatile @Nullable RequestStream playedWithHistory;

    private final RecordedTotals recorded;
    private final Map<Integer, StreamRunner> iterated = new ConcurrentHashMap<>();
    /** The recorded requests iterated, by pass count, where they differ from the played window (steady probes). */
    private final Map<Integer, StreamRunner> iteratedRequests = new ConcurrentHashMap<>();
    /** The run that found each configuration's (by string) or policy's steady state, with ample memory. */
    private final Map<Object, RunOutcome> steadyProbes = new ConcurrentHashMap<>();

    private volatile StartMode mode = StartMode.WINDOW;

    /** Loop closure a warm window needs for {@link StartMode#AUTO} to choose the steady state. */
    public static final double MIN_LOOP_CLOSURE = 0.9;

    /** Passes the steady state is searched over; a window still growing after them is evaluated with them all. */
    public static final int MAX_PASSES = 8;

    /** Prepares replays of {@code device}'s trace from {@code start} (compiles the request stream once). */
    public WhatIfReplay(TraceSnapshot snapshot, int device, WindowStart start) {
        List<TraceEntry> trace = snapshot.traceOf(device);
        this.snapshot = snapshot;
        this.device = device;
        this.start = start;
        this.recorded = RecordedTotals.of(start.reservedBytes(), trace);
        this.userEmptyCache = classifyReleaseRuns(trace);
        this.requests = WindowStreams.compile(trace, start, userEmptyCache, false, false);
        this.runner = new StreamRunner(
                recorded.oomEntries() == 0
                        ? requests
                        : WindowStreams.compile(trace, start, userEmptyCache, false, true));
    }

    /** Whether the runs play more than the recorded requests: the window recorded a request that failed. */
    private boolean asksFailedRequests() {
        return runner.stream() != requests;
    }

    /** Chooses where the evaluations start (the default is {@link StartMode#WINDOW}, the window as recorded). */
    public WhatIfReplay startMode(StartMode m) {
        mode = m;
        return this;
    }

    /** Whether evaluations run in the steady state under the chosen {@link StartMode}. */
    public boolean steady() {
        return switch (mode) {
            case WINDOW -> false;
            case STEADY -> requests.allocs() > 0;
            case AUTO -> startsWarm() && requests.loopClosure() >= MIN_LOOP_CLOSURE;
        };
    }

    /** Whether the window's start segments hold cached free memory (the program ran before the window). */
    public boolean startsWarm() {
        return start.reservedBytes() > start.allocatedBytes();
    }

    /** The live blocks the steady state starts from. */
    public int liveBlocksAtStart() {
        return requests.startBlocks();
    }

    /** What the recording says: its own peak reserved and the capacity it is taken to have run at. */
    public RecordedTotals recorded() {
        return recorded;
    }

    /** The window's rebuilt start state. */
    public WindowStart start() {
        return start;
    }

    /** The compiled window: its requests as recorded, without the ones that failed. */
    public RequestStream stream() {
        return requests;
    }

    /**
     * The window as the runs play it: {@link #stream()} with each request the recording saw fail asked again, and
     * freed at once when served (the same stream when nothing failed). {@link RunOutcome#failedOp()} indexes its ops.
     */
    public RequestStream playedStream() {
        return runner.stream();
    }

    /**
     * Marks the first entry of each release run the user asked for ({@code empty_cache()}): a run that opens
     * the window (no alloc before it) or is not followed by a driver allocation or an oom.
     */
    public static boolean[] classifyReleaseRuns(List<TraceEntry> trace) {
        boolean[] user = new boolean[trace.size()];
        boolean allocSeen = false;
        EntryFields fields = EntryFields.of(trace);
        for (int i = 0; i < trace.size(); i++) {
            TraceAction a = fields.action(i);
            if (a == TraceAction.ALLOC) {
                allocSeen = true;
            }
            if (a == TraceAction.UNKNOWN
                    && OpsScriptReader.EMPTY_CACHE.equals(trace.get(i).actionName())) {
                user[i] = true;
                continue;
            }
            if (RecordedTotals.isRelease(a) && (i == 0 || !RecordedTotals.isRelease(fields.action(i - 1)))) {
                int j = i;
                while (j < trace.size() && RecordedTotals.isRelease(fields.action(j))) {
                    j++;
                }
                TraceAction next = j < trace.size() ? fields.action(j) : null;
                boolean retry = allocSeen
                        && (next == TraceAction.SEGMENT_ALLOC
                                || next == TraceAction.SEGMENT_MAP
                                || next == TraceAction.OOM);
                user[i] = !retry;
            }
        }
        return user;
    }

    /**
     * The device memory the recorded run is taken to have had: for snapshots, what the recording shows
     * ({@link RecordedTotals#capacity()}); for request-only formats (CSV), which record no driver calls, the peak
     * reserved of the window under the recorded configuration with ample memory.
     */
    public long recordedCapacity(AllocatorConfig recordedConfig) {
        if (steady()) {
            // the steady state under the recorded configuration may reserve a little more than the recording: at
            // less, that configuration's own row would fail requests the recorded run met
            return Math.max(recordedWindowCapacity(recordedConfig), steadyPeakReserved(recordedConfig));
        }
        return recordedWindowCapacity(recordedConfig);
    }

    /**
     * The steady-state peak reserved bytes of {@code config} with ample memory (the figure the built-in check holds
     * against the recording's own peak reserved, {@link RecordedTotals#peakReserved()}).
     */
    public long steadyPeakReserved(AllocatorConfig config) {
        PreparedPolicy exact = PolicyRegistry.exact(config);
        return steadyProbe(config.raw(), r -> exact).peakReserved();
    }

    private long recordedWindowCapacity(AllocatorConfig recordedConfig) {
        if (snapshot.extra().get("gpumem_device_capacity") instanceof Long cap) {
            long held = snapshot.extra().get("gpumem_device_held") instanceof Long h ? h : 0;
            return cap - held;
        }
        if (!start.isEmpty() || recorded.peakReserved() > 0) {
            return recorded.capacity();
        }
        // What the recorded requests reserve: the ones that failed tell that the recorded run lacked memory, not
        // how much it had.
        StreamRunner recordedRequests = asksFailedRequests() ? new StreamRunner(requests) : runner;
        long roomy = StreamRunner.ROOMY;
        PreparedPolicy exact = PolicyRegistry.exact(recordedConfig);
        RunOutcome o = recordedRequests.run(exact, RunOptions.builder(roomy).build());
        for (int tries = 0; o.ooms() > 0 && tries < 10; tries++) {
            roomy *= 2;
            o = recordedRequests.run(exact, RunOptions.builder(roomy).build());
        }
        if (o.ooms() > 0 && o.peakReserved() == 0) {
            // not even the first request fits there: the capacity search says why (NoCapacityRunsException names
            // the largest request and the limits), or finds the capacity that does fit
            return recordedRequests.minimumCapacity(
                    exact, RunOptions.builder(roomy).build(), roomy);
        }
        return MinimumCapacity.roundUp(o.peakReserved());
    }

    /** Runs the window under {@code config} at the recording's capacity and searches its minimum capacity. */
    public RunOutcome evaluate(AllocatorConfig config, boolean isRecorded) {
        return evaluate(config, isRecorded, recorded.capacity());
    }

    /**
     * {@link #evaluate(AllocatorConfig, boolean, long)} for each configuration (the first one is the recorded
     * one), in parallel on up to {@code threads} threads ({@link ParallelRuns}): the replays share only read-only
     * state (the compiled request stream), and each builds its own device and allocator. Results come in the order
     * of {@code configs}; {@code done} is told each time one finishes (from the calling thread). The exception of
     * the first evaluation in order that failed is rethrown as it was.
     */
    public List<RunOutcome> evaluateAll(List<AllocatorConfig> configs, long capacity, int threads, IntConsumer done) {
        List<Supplier<RunOutcome>> runs = new ArrayList<>(configs.size());
        for (int i = 0; i < configs.size(); i++) {
            AllocatorConfig c = configs.get(i);
            boolean isRecorded = i == 0;
            runs.add(() -> evaluate(c, isRecorded, capacity));
        }
        return ParallelRuns.values(runs, threads, done);
    }

    /** "Unlimited" memory: enough for the window under any sensible configuration, yet a finite device. */
    private long roomy() {
        return Math.max(StreamRunner.ROOMY, 2 * recorded.peakReserved());
    }

    /**
     * Runs the window under {@code config} at {@code capacity} and searches its minimum capacity (in the steady state
     * when {@link #steady()}).
     */
    public RunOutcome evaluate(AllocatorConfig config, boolean isRecorded, long capacity) {
        PreparedPolicy exact = PolicyRegistry.exact(config);
        RunOptions options = RunOptions.builder(capacity).build();
        RunOutcome o;
        if (steady()) {
            int passes = passesToSteady(config.raw(), r -> exact);
            o = searched(iterated(passes), exact, options).toBuilder()
                    .warmUpPasses(passes - 1)
                    .build();
        } else {
            o = searched(runner, exact, options);
        }
        return o.toBuilder().label(config.raw()).recorded(isRecorded).build();
    }

    /**
     * {@code r}'s run at {@code options}' capacity with its minimum capacity, or, where a request the recording saw
     * fail puts every capacity the search may try out of reach (a request of an exabyte; more than a policy's capped
     * pool holds), the run alone, its minimum capacity unknown (−1): that no device serves the failed request is the
     * row's finding, not a reason to refuse the comparison.
     */
    private RunOutcome searched(StreamRunner r, PreparedPolicy policy, RunOptions options) {
        try {
            return r.evaluate(policy, options, roomy());
        } catch (NoCapacityRunsException e) {
            if (!asksFailedRequests()) {
                throw e;
            }
            return r.run(policy, options);
        }
    }

    /**
     * Passes of the iterated window after which reserved memory stops changing under a policy (at least 2: one
     * warm-up, one measured; {@link #MAX_PASSES} when it never stops), found by one run with ample memory.
     */
    private int passesToSteady(Object key, Function<StreamRunner, PreparedPolicy> policy) {
        RunOutcome o = steadyProbe(key, policy);
        return o.ooms() == 0 && o.stepsCompleted() < MAX_PASSES ? Math.max(2, o.stepsCompleted()) : MAX_PASSES;
    }

    /**
     * The run of the iterated window, with ample memory, that stops once reserved memory stops changing: the recorded
     * requests' (a failed request asked again in every pass would make the steady state one the program never had).
     */
    private RunOutcome steadyProbe(Object key, Function<StreamRunner, PreparedPolicy> policy) {
        return steadyProbes.computeIfAbsent(key, k -> {
            StreamRunner probe = asksFailedRequests()
                    ? iteratedRequests.computeIfAbsent(MAX_PASSES, n -> new StreamRunner(requests.iterated(n)))
                    : iterated(MAX_PASSES);
            return probe.run(
                    policy.apply(probe),
                    RunOptions.builder(roomy()).untilSteady(true).build());
        });
    }

    /**
     * The runner of the played window iterated {@code passes} times from its live blocks, compiled once per count.
     */
    private StreamRunner iterated(int passes) {
        return iterated.computeIfAbsent(
                passes, n -> new StreamRunner(runner.stream().iterated(n)));
    }

    /**
     * Runs the window under policy {@code spec} at {@code capacity} and searches its minimum capacity; the start
     * state's live blocks are the policy's first requests.
     */
    public RunOutcome evaluate(PolicySpec spec, long capacity) {
        RunOptions options = policyOptions(capacity).build();
        RunOutcome o;
        if (steady()) {
            int passes = passesToSteady(spec, r -> r.prepare(spec));
            StreamRunner r = iterated(passes);
            o = searched(r, r.prepare(spec), options).toBuilder()
                    .warmUpPasses(passes - 1)
                    .build();
        } else {
            o = searched(runner, runner.prepare(spec), options);
        }
        return o.toBuilder().label(spec.options()).policy(spec.name()).build();
    }

    /**
     * The policy allocator's own snapshot after the window ran under {@code spec} at {@code capacity} (requests
     * that fail are skipped, as in {@link #evaluate(PolicySpec, long)}); {@code null} when even the window's start
     * does not fit. History is recorded as {@code _record_memory_history()} does by default (every entry, stacks
     * at alloc and free): each request carries the stack and time of the recorded entry it replays, so live blocks
     * and the trace show the recorded frames; the start state's blocks have none.
     */
    public MemorySnapshot policySnapshot(PolicySpec spec, long capacity) {
        StreamRunner withHistory = new StreamRunner(history(true));
        RunOutcome o = withHistory.run(
                withHistory.prepare(spec),
                policyOptions(capacity).recordHistory(true).keepAllocator(true).build());
        return o.allocator() == null ? null : o.allocator().snapshot();
    }

    /**
     * The window played on the exact allocator under {@code config} on a device of {@code capacity} bytes, stopped at
     * the first request that fails (as the job would stop; a request the recording saw fail is asked again), keeping
     * the allocator and its device in the outcome, with history recorded as {@link #policySnapshot} records it. The
     * outcome's {@link RunOutcome#failedOp} indexes the ops of {@link #playedStream()}: the two differ only in the
     * sites and times the one played here carries.
     */
    public RunOutcome playKeepingState(AllocatorConfig config, long capacity) {
        return keepingState(history(true), config, capacity);
    }

    /**
     * The state the window's requests as recorded ({@link #stream()}, the failed ones left out) leave through trace
     * entry {@code throughEntry} (0-based; later ops are not played), played as
     * {@link #playKeepingState(AllocatorConfig, long)} plays them, or the first failure before it. The outcome's
     * {@link RunOutcome#failedOp} indexes the ops of {@link #stream()}, as the prefix played is one of that stream's.
     */
    public RunOutcome playRequestsThrough(AllocatorConfig config, long capacity, int throughEntry) {
        RequestStream all = history(false);
        int ops = all.opsThroughEntry(throughEntry);
        return keepingState(ops == all.length() ? all : all.prefix(ops), config, capacity);
    }

    private static RunOutcome keepingState(RequestStream ops, AllocatorConfig config, long capacity) {
        return new StreamRunner(ops).run(PolicyRegistry.exact(config), RunOptions.toFirstFailureKeepingState(capacity));
    }

    /**
     * The played window ({@code played}) or the recorded requests, compiled with each request's stack and time (for
     * runs that record history): compiled on first use, as most replays never want them, then kept, since a report
     * of a file of requests only plays them for several states (the analysed one and the peak's, on two threads).
     * Without a failed request the two are one stream.
     */
    private RequestStream history(boolean played) {
        boolean askFailed = played && recorded.oomEntries() > 0;
        RequestStream s = askFailed ? playedWithHistory : requestsWithHistory;
        if (s == null) {
            synchronized (this) {
                s = askFailed ? playedWithHistory : requestsWithHistory;
                if (s == null) {
                    s = WindowStreams.compile(snapshot.traceOf(device), start, userEmptyCache, true, askFailed);
                    if (askFailed) {
                        playedWithHistory = s;
                    } else {
                        requestsWithHistory = s;
                    }
                }
            }
        }
        return s;
    }

    private static RunOptions.Builder policyOptions(long capacity) {
        return RunOptions.builder(capacity).restoreStartLayout(false);
    }

    /**
     * One replay of the window under {@code config} on a device of {@code capacity} bytes, returning its peak
     * reserved bytes, or −1 when a request failed (the unit the minimum-capacity search repeats).
     */
    public long runOnce(AllocatorConfig config, long capacity) {
        RunOutcome o = runner.run(
                PolicyRegistry.exact(config),
                RunOptions.builder(capacity).stopAtFirstOom(true).build());
        return o.ooms() > 0 ? -1 : o.peakReserved();
    }

    /**
     * Whether the window runs to its end under policy {@code spec} on a device of {@code capacity} bytes (the start
     * state's live blocks are the policy's first requests, as in {@link #evaluate(PolicySpec, long)}).
     */
    public boolean runsWithoutOom(PolicySpec spec, long capacity) {
        return runner.runsWithoutOom(
                runner.prepare(spec),
                policyOptions(capacity).stopAtFirstOom(true).build());
    }

    /** Switches prefix reuse in the capacity search (on by default; tests compare both ways). */
    void setPrefixReuse(boolean on) {
        runner.setPrefixReuse(on);
    }

    /** Ops a new checkpoint of the capacity search must save; tests lower it to exercise many checkpoints. */
    void setCheckpointGain(int ops) {
        runner.setCheckpointGain(ops);
    }

    /** Checkpoints one search may add; tests lower it to make probes evict them. */
    void setMaxCheckpoints(int count) {
        runner.setMaxCheckpoints(count);
    }

    /**
     * {@code {replays begun, entries replayed, probes answered by a run already made, probes taken from idle
     * workers}} so far by this object's evaluations (a measurement aid).
     */
    public long[] replayCounts() {
        return runner.replayCounts();
    }

    public int device() {
        return device;
    }

    public TraceSnapshot snapshot() {
        return snapshot;
    }
}
