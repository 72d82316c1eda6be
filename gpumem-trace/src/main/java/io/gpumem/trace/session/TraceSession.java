package io.gpumem.trace.session;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.config.ConfigException;
import io.gpumem.engine.RunOutcome;
import io.gpumem.history.MemorySnapshot;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.policy.PolicySpec;
import io.gpumem.trace.analysis.DeviceAnalysis;
import io.gpumem.trace.analysis.MemoryState;
import io.gpumem.trace.analysis.SnapshotStates;
import io.gpumem.trace.analysis.TraceWhatIf;
import io.gpumem.trace.analysis.WhatIf;
import io.gpumem.trace.category.ByteCategories;
import io.gpumem.trace.category.PeakCategories;
import io.gpumem.trace.io.EntryFields;
import io.gpumem.trace.io.InconsistentSnapshotException;
import io.gpumem.trace.io.ReadLimits;
import io.gpumem.trace.io.TraceFormatException;
import io.gpumem.trace.io.TraceReaders;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.replay.ProgressListener;
import io.gpumem.trace.replay.StartMode;
import io.gpumem.trace.replay.WhatIfReplay;
import io.gpumem.trace.window.RecordedConfig;
import io.gpumem.trace.window.WindowRebuilder;
import io.gpumem.trace.window.WindowStart;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * One trace as every trace command sees it ({@code replay}, {@code compare}, {@code analyze}, {@code report}, and
 * {@code demo} over the trace of its own run): the file read once, under the limits the caller gives (the same
 * {@link ReadLimits} for every command), and for each device the window's start rebuilt once and its request
 * stream compiled once ({@link DeviceWindow}), shared by the compare rows, the recommender's compare runs, a
 * policy's snapshot and the HTML report's timeline. A command is then a mapping of its options onto these methods.
 *
 * <p>It lives in gpumem-trace, beside the readers, the window rebuild and the replays it ties together, because
 * what it does is trace logic: which file contents mean what, what is rebuilt from what, what is shared. The CLI
 * keeps only the option parsing and the printing, so the same session serves a library user (and the engine that
 * replaces the replays underneath swaps in here, not under each command).
 *
 * <p>Invariants: the file is read at most once (in {@link #open}); each device's window is rebuilt and its stream
 * compiled at most once, a failure included (the same exception is thrown again rather than the rebuild retried);
 * the recorded configuration is derived once. {@link #fileReads()}, {@link #windowRebuilds()} and
 * {@link #streamCompiles()} count the work actually done, so tests can hold the session to this. A session is
 * confined to the thread that uses it; the replays it starts may run configurations in parallel over its
 * read-only windows, and a device's classification of its bytes ({@link #classifyAhead}) beside them, over the same
 * window (the categories reuse it rather than rebuilding their own).
 *
 * <p>Errors are typed: a file that cannot be read is a {@link TraceFormatException} (naming the file and the
 * entry or field), including recorded allocator settings that do not parse; a window that cannot be rebuilt or
 * replayed is an {@link InconsistentSnapshotException} naming the file.
 */
public final class TraceSession {

    private final TraceSnapshot trace;
    private final Map<Integer, DeviceWindow> windows = new HashMap<>();
    private final Map<Integer, RuntimeException> failedWindows = new HashMap<>();
    private AllocatorConfig recordedConfig;
    private RuntimeException recordedConfigFailure;
    private final int fileReads;
    private StartMode startMode = StartMode.AUTO;
    private int windowRebuilds;
    private int streamCompiles;
    private ProgressListener whatIfProgress = ProgressListener.NONE;
    /** Each device's classification of its bytes, begun once ({@link #classifyAhead}) and taken once. */
    private final Map<Integer, Beside<ByteCategories>> classifications = new HashMap<>();

    private TraceSession(TraceSnapshot trace, int fileReads) {
        this.trace = trace;
        this.fileReads = fileReads;
    }

    /**
     * Reads a trace file of any supported format (detected from its content) under {@code limits}.
     *
     * @throws TraceFormatException naming the file (and the entry or line) when it is missing, unreadable,
     *                              malformed or over a limit
     */
    public static TraceSession open(Path file, ReadLimits limits) {
        return open(file, limits, ProgressListener.NONE);
    }

    /**
     * As {@link #open(Path, ReadLimits)}, telling {@code reading} the bytes read out of the file's as it reads a
     * snapshot pickle (a gigabyte takes tens of seconds), and that it is done.
     */
    public static TraceSession open(Path file, ReadLimits limits, ProgressListener reading) {
        long total = file.toFile().length(); // 0 when missing: the reader then says why
        TraceSession session =
                new TraceSession(TraceReaders.read(file, limits, bytes -> reading.progress(bytes, total)), 1);
        reading.progress(total, total);
        return session;
    }

    /** A session over a trace already in memory (the demo's own run, a test's trace); no file is read. */
    public static TraceSession of(TraceSnapshot trace) {
        return new TraceSession(trace, 0);
    }

    public TraceSnapshot trace() {
        return trace;
    }

    /**
     * Where every what-if replay of this session starts ({@link StartMode}; default {@link StartMode#AUTO}: the
     * steady state where the window starts warm and repeats, else the window as recorded).
     */
    public TraceSession startMode(StartMode mode) {
        startMode = mode;
        for (DeviceWindow w : windows.values()) {
            w.replay().startMode(mode);
        }
        return this;
    }

    /** The file (or other source) the trace came from, as messages name it. */
    public String source() {
        return trace.source();
    }

    /** The devices with segments or trace entries, in order. */
    public List<Integer> devices() {
        return SnapshotStates.devices(trace);
    }

    /** The device whose trace has the most {@code alloc} entries (0 when none has any): what compare replays by default. */
    public int busiestDevice() {
        return busiestDevice(trace);
    }

    /** {@link #busiestDevice()} of any trace. */
    public static int busiestDevice(TraceSnapshot trace) {
        int best = 0;
        long most = -1;
        for (int d = 0; d < trace.deviceTraces().size(); d++) {
            long n = 0;
            List<TraceEntry> entries = trace.traceOf(d);
            EntryFields fields = EntryFields.of(entries);
            for (int i = 0; i < entries.size(); i++) {
                n += fields.action(i) == TraceAction.ALLOC ? 1 : 0;
            }
            if (n > most) {
                most = n;
                best = d;
            }
        }
        return best;
    }

    /** Whether {@code device} has a trace with at least one {@code alloc} entry to replay. */
    public boolean hasRequests(int device) {
        return DeviceAnalysis.hasRequests(trace.traceOf(device));
    }

    /**
     * The configuration the trace was recorded under ({@link RecordedConfig}), derived once.
     *
     * @throws TraceFormatException naming the file and its recorded allocator settings when they do not parse
     */
    public AllocatorConfig recordedConfig() {
        if (recordedConfig == null && recordedConfigFailure == null) {
            try {
                recordedConfig = RecordedConfig.of(trace);
            } catch (ConfigException e) {
                recordedConfigFailure =
                        new TraceFormatException(source(), "", "recorded allocator settings: " + e.getMessage(), e);
            }
        }
        if (recordedConfigFailure != null) {
            throw recordedConfigFailure;
        }
        return recordedConfig;
    }

    /** The recorded {@code PYTORCH_CUDA_ALLOC_CONF} string, "" when the trace records none. */
    public String recordedConfString() {
        return trace.recordedConfString() == null ? "" : trace.recordedConfString();
    }

    /**
     * The device's window: its start rebuilt under the recorded configuration and its request stream compiled,
     * both once per session.
     *
     * @throws InconsistentSnapshotException when the start state cannot be rebuilt
     * @throws TraceFormatException          when the recorded settings do not parse
     */
    public DeviceWindow window(int device) {
        DeviceWindow w = windows.get(device);
        if (w != null) {
            return w;
        }
        RuntimeException failed = failedWindows.get(device);
        if (failed != null) {
            throw failed;
        }
        try {
            AllocatorConfig config = recordedConfig();
            windowRebuilds++;
            WindowStart start;
            try {
                start = new WindowRebuilder(config).rebuild(trace, device);
            } catch (IllegalArgumentException | IllegalStateException e) {
                throw new InconsistentSnapshotException(source(), e);
            }
            streamCompiles++;
            w = new DeviceWindow(device, start, new WhatIfReplay(trace, device, start).startMode(startMode));
        } catch (RuntimeException e) {
            failedWindows.put(device, e);
            throw e;
        }
        windows.put(device, w);
        return w;
    }

    /** The capacity the recording of {@code device} is taken to have run at (compare's default capacity). */
    public long recordedCapacity(int device) {
        return window(device).replay().recordedCapacity(recordedConfig());
    }

    /**
     * Compare's rows for one device: {@code configs} replayed (in order, in parallel), then {@code policies}, at
     * {@code capacity}, or at the recorded capacity when it is {@code null}.
     *
     * @throws InconsistentSnapshotException when the window cannot be rebuilt or a replay meets a state it refuses
     */
    public CompareRuns compare(
            int device,
            List<AllocatorConfig> configs,
            List<PolicySpec> policies,
            Long capacity,
            ProgressListener progress) {
        DeviceWindow w = window(device);
        try {
            long at = capacity != null ? capacity : w.replay().recordedCapacity(recordedConfig());
            return CompareRuns.run(w, at, configs, policies, progress);
        } catch (IllegalArgumentException | IllegalStateException e) {
            throw new InconsistentSnapshotException(source(), e);
        }
    }

    /**
     * The compare runs behind the recommender for one device: its window replayed under each configuration asked
     * for (memoised per configuration string), at {@code usableCapacity} (capacity less memory held outside the
     * allocator) or, when that is not positive, at the recorded capacity.
     */
    public WhatIf whatIf(int device, long usableCapacity) {
        return new TraceWhatIf(window(device).replay(), recordedConfig(), usableCapacity, whatIfProgress);
    }

    /**
     * Where the what-ifs made from now on ({@link #whatIf}, and through it {@link #analyze} and {@link #configRows})
     * report how many of their runs are done (a command's progress bar); none by default.
     */
    public void whatIfProgress(ProgressListener progress) {
        this.whatIfProgress = progress;
    }

    /**
     * What {@code gpumem analyze} concludes for one device ({@link DeviceAnalysis}), its compare runs replaying
     * this session's window of the device.
     *
     * @param at       analyse the state after this entry (0-based), or {@code null} for the default moment
     * @param capacity device capacity, or {@code MemoryState.UNKNOWN}
     * @param top      how many wasteful segments to keep
     * @param compare  whether to run the compare runs (when the analysis wants them)
     */
    public DeviceAnalysis analyze(int device, Integer at, long capacity, int top, boolean compare) {
        return analyze(device, at, capacity, top, compare, List.of());
    }

    /** As {@link #analyze(int, Integer, long, int, boolean)}, the recommender also trying {@code policies}. */
    public DeviceAnalysis analyze(
            int device, Integer at, long capacity, int top, boolean compare, List<PolicySpec> policies) {
        return DeviceAnalysis.of(
                trace,
                device,
                at,
                capacity,
                top,
                compare,
                () -> window(device).replay(),
                usable -> whatIf(device, usable),
                policies);
    }

    /**
     * The what-if rows a report adds for the user's configurations on the analysed device: the recorded
     * configuration first (the baseline), then each of {@code confs}, replayed by the analysis' own compare runs
     * when it ran them, else by this session's window at the usable capacity ({@code capacity} less the memory the
     * analysis found held outside the allocator, or the recorded capacity when {@code capacity} is unknown). Empty
     * when there is nothing to add or the device has no requests.
     *
     * @throws RuntimeException when a replay fails (the window cannot be rebuilt, a configuration does not parse)
     */
    public List<RunOutcome> configRows(DeviceAnalysis analysis, long capacity, List<String> confs) {
        if (confs.isEmpty() || !hasRequests(analysis.device())) {
            return List.of();
        }
        WhatIf whatIf = analysis.whatIf();
        if (whatIf == null) {
            long outside = analysis.analysis().diagnosis().outside();
            whatIf = whatIf(analysis.device(), capacity > 0 ? capacity - Math.max(0, outside) : MemoryState.UNKNOWN);
        }
        List<String> all = new ArrayList<>();
        all.add(recordedConfString());
        all.addAll(confs);
        whatIf.prefetch(all, List.of());
        List<RunOutcome> rows = new ArrayList<>();
        rows.add(whatIf.run(recordedConfString()));
        for (String c : confs) {
            rows.add(whatIf.run(c));
        }
        return rows;
    }

    /**
     * The what-if rows a report adds for policies on the analysed device: compare's rows ({@link #compare}) at
     * compare's capacity, labelled as compare labels them, with compare's recorded-configuration row first when the
     * table would otherwise have no baseline (no other extra row and no baseline among the recommender's runs).
     * Empty when there are no policies or the device has no requests.
     *
     * @param capacity     the capacity, or {@code null} for compare's default (the recorded capacity)
     * @param haveBaseline whether other extra rows already include the recorded configuration
     * @throws RuntimeException when a replay fails
     */
    public List<RunOutcome> policyRows(
            DeviceAnalysis analysis, Long capacity, List<PolicySpec> policies, boolean haveBaseline) {
        if (policies.isEmpty() || !hasRequests(analysis.device())) {
            return List.of();
        }
        boolean baseline = !haveBaseline && analysis.recommendations().baseline() == null;
        List<AllocatorConfig> configs = baseline ? List.of(recordedConfig()) : List.of();
        return compare(analysis.device(), configs, policies, capacity, whatIfProgress)
                .reportRows();
    }

    /**
     * The end state of {@code device}'s window replayed under {@code policy} on a device of {@code capacity}, as
     * the policy allocator's own snapshot; {@code null} when the window's live blocks at its start do not fit.
     *
     * @throws InconsistentSnapshotException when the window cannot be rebuilt or replayed
     */
    public MemorySnapshot policySnapshot(int device, PolicySpec policy, long capacity) {
        DeviceWindow w = window(device);
        try {
            return w.replay().policySnapshot(policy, capacity);
        } catch (IllegalArgumentException | IllegalStateException e) {
            throw new InconsistentSnapshotException(source(), e);
        }
    }

    /**
     * {@code device}'s window played on the exact allocator under {@code config} on a device of {@code capacity},
     * stopped at its first failed request, with the allocator kept ({@link WhatIfReplay#playKeepingState}): the
     * layout the caching allocator gives a file of requests only.
     *
     * @throws InconsistentSnapshotException when the window cannot be rebuilt or replayed
     */
    public RunOutcome playKeepingState(int device, AllocatorConfig config, long capacity) {
        DeviceWindow w = window(device);
        try {
            return w.replay().playKeepingState(config, capacity);
        } catch (IllegalArgumentException | IllegalStateException e) {
            throw new InconsistentSnapshotException(source(), e);
        }
    }

    /**
     * Starts classifying {@code device}'s bytes ({@link ByteCategories}, over this session's window) on a thread of
     * its own, so that it runs beside the what-if runs {@link #analyze} starts next rather than after them;
     * {@link #peakCategories} takes the result. Does nothing for a device without requests (nothing to classify)
     * or one already begun. The classification only reads the trace and the window, as the what-if runs do.
     */
    public void classifyAhead(int device) {
        if (!classifications.containsKey(device) && hasRequests(device)) {
            classification(device).start("gpumem-categories");
        }
    }

    /**
     * What the live bytes of the analysed device are for ({@link PeakCategories#of}), classified over this session's
     * window (rebuilt and compiled once, shared with the what-if runs), or taken from {@link #classifyAhead}.
     */
    public PeakCategories peakCategories(DeviceAnalysis analysis, int checkpointBlocks) {
        int d = analysis.device();
        return PeakCategories.of(trace, d, analysis, checkpointBlocks, () -> classified(d));
    }

    private ByteCategories classified(int device) {
        return classification(device).take();
    }

    /**
     * The classification task of {@code device}, made once. Its window is made here, on the session's thread; a
     * window that cannot be rebuilt leaves the classification to rebuild its own, which fails as it always did.
     */
    private Beside<ByteCategories> classification(int device) {
        Beside<ByteCategories> task = classifications.get(device);
        if (task == null) {
            DeviceWindow w;
            AllocatorConfig config;
            try {
                w = window(device);
                config = recordedConfig();
            } catch (RuntimeException e) {
                w = null;
                config = null;
            }
            DeviceWindow shared = w;
            AllocatorConfig recorded = config;
            task = new Beside<>(() -> shared == null
                    ? ByteCategories.of(trace, device)
                    : ByteCategories.of(trace, device, recorded, shared.start(), shared.replay().stream()));
            classifications.put(device, task);
        }
        return task;
    }

    /** How many times a file was read (1 for a session opened on a file, 0 for one over a trace in memory). */
    public int fileReads() {
        return fileReads;
    }

    /** How many window start states were rebuilt (at most one per device). */
    public int windowRebuilds() {
        return windowRebuilds;
    }

    /**
     * How many windows were compiled into request streams (at most one per device; a window with a failed request
     * is compiled as recorded and as its runs play it, {@link WhatIfReplay#playedStream()}, within that one).
     */
    public int streamCompiles() {
        return streamCompiles;
    }
}
