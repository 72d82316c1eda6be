package io.gpumem.trace.replay;

import io.gpumem.alloc.CachingAllocator;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.device.DeviceOp;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.history.BlockInfo;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.oom.OutOfMemoryException;
import io.gpumem.policy.PolicyRegistry;
import io.gpumem.stats.MemoryStats;
import io.gpumem.stats.StatKind;
import io.gpumem.trace.io.OpsScriptReader;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.whatif.MinimumCapacity;
import io.gpumem.trace.whatif.WhatIfOutcome;
import io.gpumem.trace.window.WindowStart;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletionService;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorCompletionService;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.function.IntConsumer;

/**
 * What-if replay ({@code gpumem compare}): the request stream of one device trace (sizes, streams, frees)
 * replayed from the rebuilt start state under another allocator configuration, on a {@link SimulatedDevice}
 * of a given capacity.
 *
 * <p>The start state keeps its recorded layout (its segments stay cudaMalloc segments unless the configuration
 * uses expandable segments too), so differences are understated for windows that start with much reserved.
 * Addresses are the simulated device's (most recently freed range of the same size, else fresh space).
 * Recorded release runs are replayed as {@code empty_cache()} when the user called it (the run opens the
 * window, or is not followed by a driver allocation or an oom; or an ops script's {@code empty_cache}); runs
 * that are the OOM-retry path are left to the capacity model, which retries on its own. A request that fails is counted as an OOM and its later frees
 * are skipped. The minimum capacity is {@link MinimumCapacity#search} between the peak allocated bytes (no run
 * can need less) and the peak reserved bytes with unlimited memory (which always suffices). Its probes, and the
 * run at the recorded capacity, reuse the unlimited run and forks of replayed prefixes ({@link CapacityProbes})
 * for configurations without expandable segments, with results identical to full replays; with expandable
 * segments (whose reservation is sized from the capacity) every probe is a full replay.
 */
public final class WhatIfReplay {

    private final TraceSnapshot snapshot;
    private final int device;
    private final WindowStart start;
    private final RequestStream requests;
    private final RecordedTotals recorded;

    /** Prepares replays of {@code device}'s trace from {@code start} (compiles the request stream once). */
    public WhatIfReplay(TraceSnapshot snapshot, int device, WindowStart start) {
        List<TraceEntry> trace = snapshot.traceOf(device);
        this.snapshot = snapshot;
        this.device = device;
        this.start = start;
        this.recorded = RecordedTotals.of(start.reservedBytes(), trace);
        this.requests = new RequestStream(trace, start, classifyReleaseRuns(trace));
    }

    /** What the recording says: its own peak reserved and the capacity it is taken to have run at. */
    public RecordedTotals recorded() {
        return recorded;
    }

    /**
     * Marks the first entry of each release run the user asked for ({@code empty_cache()}): a run that opens
     * the window (no alloc before it) or is not followed by a driver allocation or an oom.
     */
    static boolean[] classifyReleaseRuns(List<TraceEntry> trace) {
        boolean[] user = new boolean[trace.size()];
        boolean allocSeen = false;
        for (int i = 0; i < trace.size(); i++) {
            TraceAction a = trace.get(i).action();
            if (a == TraceAction.ALLOC) {
                allocSeen = true;
            }
            if (a == TraceAction.UNKNOWN && OpsScriptReader.EMPTY_CACHE.equals(trace.get(i).actionName())) {
                user[i] = true;
                continue;
            }
            if (RecordedTotals.isRelease(a) && (i == 0 || !RecordedTotals.isRelease(trace.get(i - 1).action()))) {
                int j = i;
                while (j < trace.size() && RecordedTotals.isRelease(trace.get(j).action())) {
                    j++;
                }
                TraceAction next = j < trace.size() ? trace.get(j).action() : null;
                boolean retry = allocSeen && (next == TraceAction.SEGMENT_ALLOC || next == TraceAction.SEGMENT_MAP
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
        if (snapshot.extra().get("gpumem_device_capacity") instanceof Long cap) {
            long held = snapshot.extra().get("gpumem_device_held") instanceof Long h ? h : 0;
            return cap - held;
        }
        if (!start.isEmpty() || recorded.peakReserved() > 0) {
            return recorded.capacity();
        }
        long roomy = 8L << 30;
        Outcome o = run(recordedConfig, roomy, false);
        for (int tries = 0; o.ooms > 0 && tries < 10; tries++) {
            roomy *= 2;
            o = run(recordedConfig, roomy, false);
        }
        return MinimumCapacity.roundUp(o.peakReserved);
    }

    /** Runs the window under {@code config} at the recording's capacity and searches its minimum capacity. */
    public WhatIfOutcome evaluate(AllocatorConfig config, boolean isRecorded) {
        return evaluate(config, isRecorded, recorded.capacity());
    }

    /**
     * {@link #evaluate(AllocatorConfig, boolean, long)} for each configuration (the first one is the recorded
     * one), in parallel on up to {@code threads} threads: the replays share only read-only state (the compiled
     * request stream and the start state), and each builds its own device and allocator. Results come in the
     * order of {@code configs}; {@code done} is told each time one finishes (from the calling thread). An
     * exception of one evaluation is rethrown as it was.
     */
    public List<WhatIfOutcome> evaluateAll(List<AllocatorConfig> configs, long capacity, int threads,
            IntConsumer done) {
        int n = configs.size();
        if (threads <= 1 || n <= 1) {
            List<WhatIfOutcome> rows = new ArrayList<>(n);
            for (int i = 0; i < n; i++) {
                rows.add(evaluate(configs.get(i), i == 0, capacity));
                done.accept(i + 1);
            }
            return rows;
        }
        ExecutorService pool = Executors.newFixedThreadPool(Math.min(threads, n), r -> {
            Thread t = new Thread(r, "gpumem-whatif");
            t.setDaemon(true);
            return t;
        });
        try {
            CompletionService<WhatIfOutcome> cs = new ExecutorCompletionService<>(pool);
            Map<Future<WhatIfOutcome>, Integer> index = new HashMap<>();
            for (int i = 0; i < n; i++) {
                AllocatorConfig c = configs.get(i);
                boolean isRecorded = i == 0;
                index.put(cs.submit(() -> evaluate(c, isRecorded, capacity)), i);
            }
            WhatIfOutcome[] rows = new WhatIfOutcome[n];
            for (int finished = 1; finished <= n; finished++) {
                Future<WhatIfOutcome> f = cs.take();
                try {
                    rows[index.get(f)] = f.get();
                } catch (ExecutionException e) {
                    if (e.getCause() instanceof RuntimeException re) {
                        throw re;
                    }
                    if (e.getCause() instanceof Error err) {
                        throw err;
                    }
                    throw new IllegalStateException(e.getCause());
                }
                done.accept(finished);
            }
            return List.of(rows);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while comparing configurations", e);
        } finally {
            pool.shutdownNow();
        }
    }

    /** Runs the window under {@code config} at {@code capacity} and searches its minimum capacity. */
    public WhatIfOutcome evaluate(AllocatorConfig config, boolean isRecorded, long capacity) {
        // "Unlimited" memory: enough for the window under any sensible configuration, yet a finite device (the
        // expandable reservation is sized from it). Doubled until the window fits.
        long roomy = Math.max(8L << 30, 2 * recorded.peakReserved());
        // the consumed-bytes trajectory the capacity search reuses, only where it can (CapacityProbes.applies)
        long[] consumedAfter = prefixReuse && !config.expandableSegments() ? new long[requests.length] : null;
        Outcome unlimited = run(config, roomy, false, consumedAfter);
        for (int tries = 0; unlimited.ooms > 0 && tries < 8; tries++) {
            roomy *= 2;
            unlimited = run(config, roomy, false, consumedAfter);
        }
        CapacityProbes probes = consumedAfter != null && CapacityProbes.applies(config, unlimited)
                ? new CapacityProbes(this, config, roomy, consumedAfter) : null;
        // At a capacity the unlimited run never exceeded, the run is the unlimited one (CapacityProbes says why).
        Outcome atCapacity = probes != null && probes.sameAsUnlimited(capacity) ? unlimited
                : run(config, capacity, false);
        long minCapacity = minimumCapacity(config, unlimited, probes);
        return new WhatIfOutcome(config.raw(), isRecorded, capacity, atCapacity.peakAllocated, atCapacity.peakReserved,
                atCapacity.deviceAllocs, atCapacity.deviceFrees, atCapacity.retries, atCapacity.ooms, minCapacity,
                PolicyRegistry.EXACT, atCapacity.deviceMaps, atCapacity.nsPerPair());
    }

    /** Whether the capacity search reuses replayed prefixes ({@link CapacityProbes}); off only to test that it changes nothing. */
    private volatile boolean prefixReuse = true;

    /** Entries a new checkpoint of the capacity search must save; tests lower it to exercise many checkpoints. */
    volatile int checkpointGain = CapacityProbes.MIN_CHECKPOINT_GAIN;

    /** Switches prefix reuse in the capacity search (on by default; tests compare both ways). */
    void setPrefixReuse(boolean on) {
        this.prefixReuse = on;
    }

    /** Replays begun (from the start state or from a fork) and request entries replayed, for measurement. */
    final java.util.concurrent.atomic.AtomicLong replaysBegun = new java.util.concurrent.atomic.AtomicLong();
    final java.util.concurrent.atomic.AtomicLong entriesReplayed = new java.util.concurrent.atomic.AtomicLong();

    /** {@code {replays begun, entries replayed}} so far by this object's evaluations (a measurement aid). */
    public long[] replayCounts() {
        return new long[] {replaysBegun.get(), entriesReplayed.get()};
    }

    private long minimumCapacity(AllocatorConfig config, Outcome unlimited, CapacityProbes probes) {
        long step = MinimumCapacity.STEP;
        long failing = Math.max(0, unlimited.peakAllocated / step - 1) * step;  // or the bound below
        long running = MinimumCapacity.roundUp(unlimited.peakReserved);
        if (probes != null) {
            return MinimumCapacity.search(failing, running, probes::runsWithoutOom);
        }
        return MinimumCapacity.search(failing, running, capacity -> run(config, capacity, true).ooms == 0);
    }

    /**
     * One replay of the window under {@code config} on a device of {@code capacity} bytes, returning its peak
     * reserved bytes, or −1 when a request failed (the unit the minimum-capacity search repeats).
     */
    public long runOnce(AllocatorConfig config, long capacity) {
        Outcome o = run(config, capacity, true);
        return o.ooms > 0 ? -1 : o.peakReserved;
    }

    /** Counters of one replay. */
    static final class Outcome {
        long peakAllocated;
        long peakReserved;
        long deviceAllocs;
        long deviceFrees;
        long retries;
        long ooms;
        long deviceMaps;
        /** Device allocation calls refused for want of memory (start state included); 0 when none was. */
        long refusedForMemory;
        long nanos;
        long pairs;

        double nsPerPair() {
            return pairs == 0 ? 0 : (double) nanos / pairs;
        }

        /** Fills in what a completed replay measured: its time, the device's map calls and the allocator's stats. */
        Outcome finish(long elapsedNanos, int mallocs, SimulatedDevice dev, MemoryStats stats) {
            nanos = elapsedNanos;
            pairs = mallocs;
            deviceMaps = dev.callCount(DeviceOp.MAP) + dev.callCount(DeviceOp.UNMAP);
            refusedForMemory = dev.refusedForMemory();
            peakAllocated = stats.get(StatKind.ALLOCATED_BYTES).peak();
            peakReserved = stats.get(StatKind.RESERVED_BYTES).peak();
            deviceAllocs = stats.numDeviceAlloc();
            deviceFrees = stats.numDeviceFree();
            retries = stats.numAllocRetries();
            return this;
        }
    }

    /**
     * A replay in progress: the device, the allocator, the address of each block slot, and the next entry of the
     * request stream. {@link #copy} forks it (deep copies of device and allocator) for the capacity search.
     */
    static final class Replay {
        final SimulatedDevice dev;
        final CachingAllocator allocator;
        final long[] devStreams;
        final long[] address;
        int next;

        Replay(SimulatedDevice dev, CachingAllocator allocator, long[] devStreams, long[] address, int next) {
            this.dev = dev;
            this.allocator = allocator;
            this.devStreams = devStreams;
            this.address = address;
            this.next = next;
        }

        /** An independent copy of this replay on a device of {@code capacity} bytes. */
        Replay copy(long capacity) {
            SimulatedDevice d = dev.copyWithCapacity(capacity);
            return new Replay(d, allocator.copyOnto(d), devStreams, address.clone(), next);
        }
    }

    /** A replay of the window positioned at its first request, or null when the start state does not fit. */
    Replay begin(AllocatorConfig config, long capacity) {
        replaysBegun.incrementAndGet();
        SimulatedDevice dev = SimulatedDevice.builder().capacity(capacity).build();
        CachingAllocator allocator = new CachingAllocator(dev, config);
        RequestStream rs = requests;
        // Recorded stream handles are arbitrary integers; the simulated device only knows streams it created.
        long[] devStreams = new long[rs.streams.length];
        for (int i = 0; i < devStreams.length; i++) {
            devStreams[i] = rs.streams[i] == 0 ? 0 : dev.createStream();
        }
        long[] shifts;
        try {
            shifts = StartStateLoader.load(allocator, start, null, !config.expandableSegments(),
                    h -> devStreams[rs.streamIndexOf(h)]);
        } catch (IllegalStateException noRoom) {
            return null;
        }
        long[] address = new long[rs.slots];      // model address per block slot; 0 = not allocated (failed)
        int slot = 0;
        List<SegmentInfo> segments = start.segments();
        for (int si = 0; si < segments.size(); si++) {
            long shift = shifts[si];
            for (BlockInfo b : segments.get(si).blocks()) {
                if (b.isAllocated()) {
                    address[slot++] = b.address() + shift;
                }
            }
        }
        return new Replay(dev, allocator, devStreams, address, 0);
    }

    /**
     * Replays entries {@code r.next} up to (not including) {@code end}, counting failed requests in
     * {@code out.ooms}; with {@code stopAtOom} returns at the first. With {@code consumedAfter} non-null, stores
     * the device's consumed bytes after each entry in it (the trajectory the capacity search reuses).
     */
    void play(Replay r, int end, Outcome out, boolean stopAtOom, long[] consumedAfter) {
        RequestStream rs = requests;
        CachingAllocator allocator = r.allocator;
        long[] address = r.address;
        long[] devStreams = r.devStreams;
        byte[] op = rs.op;
        int[] slots = rs.slot;
        long[] size = rs.size;
        int[] streamIndex = rs.streamIndex;
        int k = r.next;
        // The consumed bytes change only through device calls: a malloc (counted, read cheaply) or an empty_cache;
        // the device's synchronised counter is read only then. A free entry that released device memory (none does
        // without a memory fraction) would leave the figure high, which only makes the capacity search fork earlier.
        long mallocs = consumedAfter == null ? 0 : r.dev.callCount(DeviceOp.MALLOC);
        long consumed = consumedAfter == null ? 0 : r.dev.consumedBytes();
        try {
            for (; k < end; k++) {
                switch (op[k]) {
                    case RequestStream.ALLOC -> {
                        try {
                            address[slots[k]] = allocator.malloc(size[k], devStreams[streamIndex[k]]);
                        } catch (OutOfMemoryException oom) {
                            out.ooms++;
                            if (stopAtOom) {
                                k++;
                                return;
                            }
                        }
                    }
                    case RequestStream.FREE -> {
                        long a = address[slots[k]];
                        if (a != 0) {
                            allocator.free(a);
                        }
                    }
                    default -> allocator.emptyCache();
                }
                if (consumedAfter != null) {
                    long m = r.dev.callCount(DeviceOp.MALLOC);
                    if (m != mallocs || op[k] != RequestStream.ALLOC && op[k] != RequestStream.FREE) {
                        mallocs = m;
                        consumed = r.dev.consumedBytes();
                    }
                    consumedAfter[k] = consumed;
                }
            }
        } finally {
            entriesReplayed.addAndGet(k - r.next);
            r.next = k;
        }
    }

    /** Replays the window; with {@code stopAtOom} returns at the first failed request. */
    Outcome run(AllocatorConfig config, long capacity, boolean stopAtOom) {
        return run(config, capacity, stopAtOom, null);
    }

    private Outcome run(AllocatorConfig config, long capacity, boolean stopAtOom, long[] consumedAfter) {
        Outcome out = new Outcome();
        Replay r = begin(config, capacity);
        if (r == null) {
            out.ooms = 1;
            return out;
        }
        long t0 = System.nanoTime();
        play(r, requests.length, out, stopAtOom, consumedAfter);
        if (stopAtOom && out.ooms > 0) {
            return out;
        }
        return out.finish(System.nanoTime() - t0, requests.allocs, r.dev, r.allocator.stats());
    }

    public int device() {
        return device;
    }

    RequestStream requests() {
        return requests;
    }

    WindowStart start() {
        return start;
    }

    public TraceSnapshot snapshot() {
        return snapshot;
    }
}
