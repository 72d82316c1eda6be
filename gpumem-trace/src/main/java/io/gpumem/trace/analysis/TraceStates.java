package io.gpumem.trace.analysis;

import io.gpumem.alloc.GpuAllocator;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.engine.RunOutcome;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.oom.OomReport;
import io.gpumem.size.ByteSize;
import io.gpumem.trace.align.FrameSignatures;
import io.gpumem.trace.align.PredictedRecording;
import io.gpumem.trace.align.RequestSequence;
import io.gpumem.trace.io.EntryFields;
import io.gpumem.trace.io.TraceFormatException;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.replay.WhatIfReplay;
import io.gpumem.trace.window.RecordedConfig;
import io.gpumem.trace.window.WindowRebuilder;
import io.gpumem.trace.window.WindowStart;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.function.Supplier;

/**
 * The state of one device after a given trace entry, for {@code analyze --at N} and for analysing the
 * state an {@code oom} entry failed in.
 *
 * <p>Method: the entries after N form a window whose end state is the snapshot's; the window-start rebuild
 * ({@link WindowRebuilder}: walk back from the end state, undo segment events, re-add blocks freed in the
 * window with the gap and slack rules for their sizes) gives the state at that window's first entry, which
 * is the state after entry N. Blocks waiting on stream events are not distinguished (none of the public
 * traces records a deferred free).
 *
 * <p>Limit: a block allocated at or before N and freed after it has its size inferred from its request (the
 * gap and slack rules); where the allocator had handed out a whole free block with a remainder too small to
 * split (≤ 1 MiB in the large pool), the rebuilt block can be short by that remainder, which then shows as
 * free. Segments, live block addresses and requests are exact.
 *
 * <p>A file that records requests but no allocator state (an RMM log, a tensor-lifetime CSV, an ops script) has no
 * end state to walk back from: its states are those a replay of its requests reaches instead (see
 * {@link #afterEntry}).
 */
public final class TraceStates {
    /**
     * The device a replay of a requests-only file runs on when nothing sizes it: the largest device gpumem plays a
     * program on ({@link PredictedRecording#MAX_DEVICE_BYTES}, hundreds of times any GPU's memory).
     */
    public static final long UNLIMITED = PredictedRecording.MAX_DEVICE_BYTES;

    private TraceStates() {}

    /** Index of the last {@code oom} entry of a device trace, or −1. */
    public static int lastOom(List<TraceEntry> trace) {
        EntryFields fields = EntryFields.of(trace);
        for (int i = trace.size() - 1; i >= 0; i--) {
            if (fields.action(i) == TraceAction.OOM) {
                return i;
            }
        }
        return -1;
    }

    /**
     * The state of {@code device} after entry {@code n} (0-based) of its trace: rebuilt from the file's end state, or,
     * for a file that records requests only, the state a replay of them reaches ({@link #replayedAfterEntry}).
     *
     * @param capacity the device capacity, or {@link MemoryState#UNKNOWN}
     * @throws IllegalArgumentException when n is outside the trace
     * @throws TraceFormatException     when the trace and the end state contradict each other
     */
    public static MemoryState afterEntry(TraceSnapshot snapshot, int device, int n, long capacity) {
        return afterEntry(snapshot, device, n, capacity, () -> window(snapshot, device));
    }

    /**
     * {@link #afterEntry(TraceSnapshot, int, int, long)}, a file of requests only replaying {@code window}: the
     * device's window as the caller prepared it once (a session's, rebuilt under the recorded configuration and
     * compiled), asked for only by such a file.
     */
    public static MemoryState afterEntry(
            TraceSnapshot snapshot, int device, int n, long capacity, Supplier<WhatIfReplay> window) {
        List<TraceEntry> trace = snapshot.traceOf(device);
        if (n < 0 || n >= trace.size()) {
            throw new IllegalArgumentException(
                    "entry " + n + " is outside device " + device + "'s trace (" + trace.size() + " entries)");
        }
        if (!snapshot.addressesRecorded()) {
            return replayedAfterEntry(snapshot, device, n, capacity, window.get());
        }
        TraceSnapshot suffix = withTrace(snapshot, device, trace.subList(n + 1, trace.size()));
        WindowStart start;
        try {
            start = new WindowRebuilder(RecordedConfig.of(snapshot)).rebuild(suffix, device);
        } catch (IllegalArgumentException | IllegalStateException e) {
            throw new TraceFormatException(
                    snapshot.source(),
                    "device_traces[" + device + "]",
                    "cannot rebuild the state after entry " + n + ": " + e.getMessage(),
                    e);
        }
        MemoryState.Builder b = MemoryState.builder()
                .label(snapshot.source() + ", after entry #" + n + " ("
                        + trace.get(n).actionName() + ")")
                .device(device)
                .capacity(capacity);
        String conf = snapshot.recordedConfString();
        if (conf != null) {
            b.allocatorConf(conf);
        }
        b.segments(start.segments());
        int oom = oomInForce(trace, n);
        if (oom >= 0) {
            b.oom(OomEvent.recorded(trace.get(oom), oom));
        }
        try {
            return b.build();
        } catch (IllegalArgumentException e) {
            throw new TraceFormatException(
                    snapshot.source(),
                    "device_traces[" + device + "]",
                    "the rebuilt state after entry " + n + " is inconsistent: " + e.getMessage(),
                    e);
        }
    }

    /**
     * For a file that records requests but no allocator state ({@link TraceSnapshot#addressesRecorded}): the state
     * the exact allocator reaches under the recorded configuration (the defaults, or an ops script's {@code config}
     * line) after entry {@code n}, replaying the device's requests from an empty device of {@code capacity} bytes
     * (when it is unknown, the device an ops script declares, else an unlimited one: {@link #replayCapacity}): the
     * ops of {@code replay}, the device's window compiled once, through entry {@code n}. A
     * request that fails stops the replay, as it would stop the job: the state is then the one it failed in, with
     * its OOM, at an entry at or before {@code n}. Otherwise an {@code oom} entry the file recorded at {@code n} (an
     * RMM log's {@code allocate failure}) is the state's OOM.
     */
    private static MemoryState replayedAfterEntry(
            TraceSnapshot snapshot, int device, int n, long capacity, WhatIfReplay replay) {
        AllocatorConfig config = RecordedConfig.of(snapshot);
        long runCapacity = replayCapacity(snapshot, capacity);
        RunOutcome run = replay.playRequestsThrough(config, runCapacity, n);
        GpuAllocator allocator = Objects.requireNonNull(run.allocator(), "a kept allocator");
        List<TraceEntry> trace = snapshot.traceOf(device);
        String conf = snapshot.recordedConfString();
        String under = AllocatorConfig.inWords(conf);
        MemoryState.Builder b = MemoryState.builder().device(device).capacity(capacity);
        if (conf != null) {
            b.allocatorConf(conf);
        }
        OomReport failure = run.oomReport();
        if (run.failedOp() >= 0 && failure != null) {
            int entry = replay.stream().entry(run.failedOp());
            b.label(snapshot.source() + ", replayed under " + under + " on " + ByteSize.format(runCapacity)
                    + ": the request of entry #" + entry + " fails");
            b.oom(OomEvent.replayed(failure, replay.stream().stream(run.failedOp()), entry));
        } else {
            b.label(snapshot.source() + ", replayed under " + under + " to entry #" + n + " ("
                    + trace.get(n).actionName() + ")");
            int oom = oomInForce(trace, n);
            if (oom >= 0) {
                b.oom(OomEvent.recorded(trace.get(oom), oom));
            }
        }
        for (SegmentInfo s : allocator.snapshot().segments()) {
            b.segment(s.device() == device ? s : s.onDevice(device));
        }
        return b.build();
    }

    /**
     * The moment to analyse in a file that records requests only, when none is asked for: the entry after which the
     * most bytes are allocated ({@link RequestSequence#peakAllocatedEntry}, requests at their rounded size), or the
     * last entry when nothing is allocated. Such a file most often ends with the run, everything freed: its end
     * would show only a cache of free segments, where the peak shows the state that decided what the job needs.
     * The requests are read from {@code window}, the device's window as the caller prepared it.
     */
    public static int peakAllocatedEntry(TraceSnapshot snapshot, int device, Supplier<WhatIfReplay> window) {
        List<TraceEntry> trace = snapshot.traceOf(device);
        if (!DeviceAnalysis.hasRequests(trace)) {
            return trace.size() - 1;
        }
        WhatIfReplay w = window.get();
        int peak = RequestSequence.of(snapshot, device, w.start(), w.stream(), new FrameSignatures())
                .peakAllocatedEntry();
        return peak >= 0 ? peak : trace.size() - 1;
    }

    /**
     * The device's window rebuilt under the recorded configuration and compiled, for a caller that has none prepared
     * (without a session): the replay a file of requests only is analysed with.
     *
     * @throws TraceFormatException when the window cannot be rebuilt
     */
    public static WhatIfReplay window(TraceSnapshot snapshot, int device) {
        try {
            return new WhatIfReplay(
                    snapshot, device, new WindowRebuilder(RecordedConfig.of(snapshot)).rebuild(snapshot, device));
        } catch (IllegalArgumentException | IllegalStateException e) {
            throw new TraceFormatException(
                    snapshot.source(),
                    "device_traces[" + device + "]",
                    "cannot replay the requests: " + e.getMessage(),
                    e);
        }
    }

    /**
     * The device a file of requests only is replayed on: {@code capacity} when given, else the device an ops script
     * declares (its capacity less the bytes it says are held), else {@link #UNLIMITED}.
     */
    public static long replayCapacity(TraceSnapshot snapshot, long capacity) {
        if (capacity > 0) {
            return capacity;
        }
        if (snapshot.extra().get("gpumem_device_capacity") instanceof Long declared) {
            long held = snapshot.extra().get("gpumem_device_held") instanceof Long h ? h : 0;
            return declared - held;
        }
        return UNLIMITED;
    }

    /** {@code snapshot} with {@code entries} as the trace of {@code device}. */
    private static TraceSnapshot withTrace(TraceSnapshot snapshot, int device, List<TraceEntry> entries) {
        List<List<TraceEntry>> traces = new ArrayList<>(snapshot.deviceTraces());
        traces.set(device, entries);
        return new TraceSnapshot(
                snapshot.source(),
                snapshot.format(),
                snapshot.segments(),
                traces,
                snapshot.allocatorSettings(),
                snapshot.externalAnnotations(),
                snapshot.extra(),
                snapshot.addressesRecorded());
    }

    /**
     * The {@code oom} entry at or before {@code n} with no state-changing entry between it and {@code n}
     * (so the state after n is the one the request failed in), or −1.
     */
    static int oomInForce(List<TraceEntry> trace, int n) {
        for (int i = n; i >= 0; i--) {
            TraceAction a = trace.get(i).action();
            if (a == TraceAction.OOM) {
                return trace.get(i).size() > 0 ? i : -1;
            }
            if (a != TraceAction.SNAPSHOT && a != TraceAction.ANNOTATE && a != TraceAction.UNKNOWN) {
                return -1;
            }
        }
        return -1;
    }
}
