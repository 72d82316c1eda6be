package io.gpumem.trace.replay;

import io.gpumem.alloc.CachingAllocator;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.history.HistoryOptions;
import io.gpumem.history.MemorySnapshot;
import io.gpumem.history.TraceAction;
import io.gpumem.oom.OutOfMemoryException;
import io.gpumem.trace.io.BlockInfo;
import io.gpumem.trace.io.SegmentInfo;
import io.gpumem.trace.io.TraceEntry;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.window.RecordedConfig;
import io.gpumem.trace.window.WindowRebuilder;
import io.gpumem.trace.window.WindowStart;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;

/**
 * Oracle replay ({@code gpumem replay --check}): replays each device trace of a snapshot through gpumem's
 * {@link CachingAllocator} on an {@link OracleDevice}, and measures how many of the recorded decisions the
 * allocator reproduces.
 *
 * <p>Per device: the window's start state is rebuilt ({@link WindowRebuilder}) and loaded; then, in trace order,
 * <ul>
 *   <li>{@code segment_alloc} / {@code segment_map} entries only queue their address on the device (the model
 *       decides whether it needs a segment; the trace supplies only what the driver returned);</li>
 *   <li>{@code alloc} runs {@code malloc(size, stream)} and compares the address with the recorded one; the
 *       segment events the model emitted meanwhile (seen through a trace tracker) are compared with the recorded
 *       ones in order, by action, address and size;</li>
 *   <li>{@code free_completed} runs {@code free} (a trace without completions frees at {@code free_requested});
 *       addresses of blocks the model placed elsewhere are translated;</li>
 *   <li>a run of {@code segment_free} / {@code segment_unmap} entries is replayed as {@code empty_cache()} (the
 *       OOM-retry path releases exactly what {@code empty_cache()} does) and the model's releases are compared
 *       with the run;</li>
 *   <li>{@code oom}, {@code snapshot} and unknown actions change nothing (a failed request allocates nothing).</li>
 * </ul>
 * At the end the model's segments are compared block by block with the snapshot's end state. The replay never
 * forces a recorded decision on the model: after a mismatch later placements may drift, which the counts show.
 *
 * <p>Not thread-safe; one replay per instance at a time.
 */
public final class OracleReplay {

    private final long totalMemory;
    private ProgressListener progress = ProgressListener.NONE;
    private boolean recordHistory;
    private final List<MemorySnapshot> modelSnapshots = new ArrayList<>();

    public OracleReplay() {
        this(OracleDevice.DEFAULT_TOTAL_MEMORY);
    }

    /** @param totalMemory device memory assumed for sizing expandable reservations */
    public OracleReplay(long totalMemory) {
        this.totalMemory = totalMemory;
    }

    public OracleReplay progress(ProgressListener listener) {
        this.progress = listener;
        return this;
    }

    /** Also records the model's own history, so that {@link #modelSnapshots()} can be written out. */
    public OracleReplay recordHistory(boolean on) {
        this.recordHistory = on;
        return this;
    }

    /**
     * The model's snapshot per device after {@link #check} with history recording on: index = device index,
     * {@code null} for devices without a trace.
     */
    public List<MemorySnapshot> modelSnapshots() {
        return modelSnapshots;
    }

    /** Replays every device trace of {@code snapshot} under its recorded configuration. */
    public FidelityReport check(TraceSnapshot snapshot) {
        return check(snapshot, RecordedConfig.of(snapshot));
    }

    public FidelityReport check(TraceSnapshot snapshot, AllocatorConfig config) {
        modelSnapshots.clear();
        List<String> notes = new ArrayList<>();
        if (!snapshot.addressesRecorded()) {
            notes.add("the file records no addresses (" + snapshot.format() + "): placement cannot be checked");
            return new FidelityReport(snapshot.source(), List.of(), notes);
        }
        long total = snapshot.entryCount();
        long done = 0;
        List<DeviceFidelity> devices = new ArrayList<>();
        for (int d = 0; d < snapshot.deviceTraces().size(); d++) {
            List<TraceEntry> trace = snapshot.traceOf(d);
            if (trace.isEmpty()) {
                if (recordHistory) {
                    modelSnapshots.add(null);
                }
                continue;
            }
            devices.add(checkDevice(snapshot, d, config, done, total));
            done += trace.size();
        }
        if (devices.stream().allMatch(f -> f.allocs() == 0)) {
            notes.add("no alloc entries: the file holds state only (a snapshot without history), nothing to replay");
        }
        progress.progress(total, total);
        return new FidelityReport(snapshot.source(), devices, notes);
    }

    private DeviceFidelity checkDevice(TraceSnapshot snapshot, int d, AllocatorConfig config, long doneBefore,
                                       long total) {
        List<TraceEntry> trace = snapshot.traceOf(d);
        List<String> notes = new ArrayList<>();
        WindowStart start = new WindowRebuilder(config).rebuild(snapshot, d);
        OracleDevice device = new OracleDevice(totalMemory);
        CachingAllocator allocator = new CachingAllocator(device, config);
        Map<Long, Long> moved = new HashMap<>();
        StartStateLoader.load(allocator, start, device, false);
        if (recordHistory) {
            allocator.recordHistory(HistoryOptions.all());
        }

        Run run = new Run(d, trace);
        Consumer<io.gpumem.history.TraceEntry> tracker = te -> {
            TraceAction a = te.action();
            if (a.isSegmentEvent()) {
                run.observed.add(new long[] {a.ordinal(), te.addr(), te.size()});
            }
        };
        allocator.internals().attachTraceTracker(tracker);
        // The model's history is stamped with the recorded times (no wall-clock read per entry).
        long[] now = {0};
        allocator.internals().setClock(() -> now[0]);

        boolean hasCompletions = false;
        for (TraceEntry e : trace) {
            if (e.action() == TraceAction.FREE_COMPLETED) {
                hasCompletions = true;
                break;
            }
        }
        boolean inRelease = false;
        long unknownFrees = 0;
        long oomEntries = 0;
        entries:
        for (int i = 0; i < trace.size(); i++) {
            if ((i & 0x3fff) == 0 && i > 0) {
                progress.progress(doneBefore + i, total);
            }
            TraceEntry e = trace.get(i);
            now[0] = e.timeUs();
            TraceAction action = e.action();
            boolean release = action == TraceAction.SEGMENT_FREE || action == TraceAction.SEGMENT_UNMAP;
            if (release && !inRelease) {
                run.compareSegments(i);
                allocator.emptyCache();
                run.releaseRuns++;
                inRelease = true;
            } else if (!release && inRelease) {
                run.compareSegments(i);
                inRelease = false;
            }
            switch (action) {
                case SEGMENT_ALLOC -> {
                    run.expect(i);
                    device.offerMalloc(e.addr());
                }
                case SEGMENT_MAP -> {
                    run.expect(i);
                    device.offerMap(e.addr());
                }
                case SEGMENT_FREE, SEGMENT_UNMAP -> run.expect(i);
                case ALLOC -> {
                    run.allocs++;
                    long got;
                    try {
                        got = allocator.malloc(e.size(), e.stream());
                    } catch (OutOfMemoryException ex) {
                        run.mismatch(i, "alloc", "0x" + Long.toHexString(e.addr()), "out of memory");
                        device.clearOffers();
                        run.compareSegments(i);
                        continue;
                    } catch (IllegalStateException ex) {
                        run.mismatch(i, "alloc", "0x" + Long.toHexString(e.addr()), "error: " + ex.getMessage());
                        notes.add("replay of this device stopped at entry " + i + ": " + ex.getMessage());
                        break entries;
                    }
                    device.clearOffers();
                    if (got == e.addr()) {
                        run.exact++;
                        if (!moved.isEmpty()) {
                            moved.remove(e.addr());
                        }
                    } else {
                        moved.put(e.addr(), got);
                        run.mismatch(i, "alloc", "0x" + Long.toHexString(e.addr()), "0x" + Long.toHexString(got));
                    }
                    run.compareSegments(i);
                }
                case FREE_REQUESTED, FREE_COMPLETED -> {
                    if (action == TraceAction.FREE_COMPLETED || !hasCompletions) {
                        Long m = moved.isEmpty() ? null : moved.remove(e.addr());
                        try {
                            allocator.free(m != null ? m : e.addr());
                        } catch (IllegalArgumentException ex) {
                            if (unknownFrees++ == 0) {
                                notes.add("entry " + i + ": free of 0x" + Long.toHexString(e.addr())
                                        + " that the model does not hold (" + ex.getMessage() + ")");
                            }
                        }
                    }
                }
                case OOM -> oomEntries++;
                default -> { }
            }
        }
        run.compareSegments(trace.size());
        allocator.internals().detachTraceTracker(tracker);
        if (unknownFrees > 1) {
            notes.add(unknownFrees + " frees in all hit blocks the model does not hold");
        }
        if (oomEntries > 0) {
            notes.add(oomEntries + " oom entr" + (oomEntries == 1 ? "y" : "ies")
                    + ": the request failed in the recording and allocates nothing in the replay");
        }
        if (device.syntheticAddresses() > 0) {
            notes.add(device.syntheticAddresses() + " driver allocations the recording does not have");
        }
        MemorySnapshot model = allocator.snapshot();
        if (recordHistory) {
            modelSnapshots.add(model);
        }
        long[] end = compareEndState(snapshot.segmentsOf(d), model);
        return new DeviceFidelity(d, trace.size(), run.allocs, run.exact, run.segmentEvents, run.segmentMatched,
                run.releaseRuns, end[0], end[1], run.firstMismatch, List.copyOf(notes));
    }

    /** {segments in the snapshot, segments identical in the model} for one device. */
    private static long[] compareEndState(List<SegmentInfo> recorded, MemorySnapshot model) {
        Map<Long, io.gpumem.history.SegmentInfo> byAddress = new HashMap<>();
        for (io.gpumem.history.SegmentInfo s : model.segments()) {
            byAddress.put(s.address(), s);
        }
        long same = 0;
        for (SegmentInfo r : recorded) {
            io.gpumem.history.SegmentInfo m = byAddress.get(r.address());
            if (m == null || m.totalSize() != r.totalSize() || m.blocks().size() != r.blocks().size()) {
                continue;
            }
            boolean equal = true;
            for (int i = 0; i < r.blocks().size() && equal; i++) {
                BlockInfo rb = r.blocks().get(i);
                io.gpumem.history.BlockInfo mb = m.blocks().get(i);
                equal = rb.address() == mb.address() && rb.size() == mb.size()
                        && rb.state() == mb.state();
            }
            if (equal) {
                same++;
            }
        }
        return new long[] {recorded.size(), same};
    }

    /** Counters and the pending segment-event comparison of one device replay. */
    private static final class Run {
        final int device;
        final List<TraceEntry> trace;
        final List<Integer> expected = new ArrayList<>();
        final List<long[]> observed = new ArrayList<>();
        long allocs;
        long exact;
        long segmentEvents;
        long segmentMatched;
        long releaseRuns;
        Mismatch firstMismatch;

        Run(int device, List<TraceEntry> trace) {
            this.device = device;
            this.trace = trace;
        }

        void expect(int index) {
            expected.add(index);
            segmentEvents++;
        }

        void compareSegments(int at) {
            if (expected.isEmpty() && observed.isEmpty()) {
                return;
            }
            int n = Math.max(expected.size(), observed.size());
            for (int k = 0; k < n; k++) {
                TraceEntry exp = k < expected.size() ? trace.get(expected.get(k)) : null;
                long[] obs = k < observed.size() ? observed.get(k) : null;
                if (exp != null && obs != null && exp.action().ordinal() == obs[0] && exp.addr() == obs[1]
                        && exp.size() == obs[2]) {
                    segmentMatched++;
                } else {
                    mismatch(exp != null ? expected.get(k) : at, "segment",
                            exp == null ? "no driver call" : describe(exp.action(), exp.addr(), exp.size()),
                            obs == null ? "no driver call"
                                    : describe(TraceAction.values()[(int) obs[0]], obs[1], obs[2]));
                }
            }
            expected.clear();
            observed.clear();
        }

        void mismatch(int entry, String kind, String expected, String got) {
            if (firstMismatch != null) {
                return;
            }
            StringBuilder ctx = new StringBuilder();
            for (int j = Math.max(0, entry - 4); j <= Math.min(entry, trace.size() - 1); j++) {
                if (ctx.length() > 0) {
                    ctx.append("; ");
                }
                ctx.append('#').append(j).append(' ').append(trace.get(j));
            }
            firstMismatch = new Mismatch(device, entry, kind, expected, got, ctx.toString());
        }

        private static String describe(TraceAction a, long addr, long size) {
            return a.wireName() + " 0x" + Long.toHexString(addr) + " size " + size;
        }
    }
}
