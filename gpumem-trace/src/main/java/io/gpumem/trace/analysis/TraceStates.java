package io.gpumem.trace.analysis;

import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.io.EntryFields;
import io.gpumem.trace.io.TraceFormatException;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.window.RecordedConfig;
import io.gpumem.trace.window.WindowRebuilder;
import io.gpumem.trace.window.WindowStart;
import java.util.ArrayList;
import java.util.List;

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
 */
public final class TraceStates {
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
     * The state of {@code device} after entry {@code n} (0-based) of its trace.
     *
     * @param capacity the device capacity, or {@link MemoryState#UNKNOWN}
     * @throws IllegalArgumentException when n is outside the trace
     * @throws TraceFormatException     when the trace and the end state contradict each other
     */
    public static MemoryState afterEntry(TraceSnapshot snapshot, int device, int n, long capacity) {
        List<TraceEntry> trace = snapshot.traceOf(device);
        if (n < 0 || n >= trace.size()) {
            throw new IllegalArgumentException(
                    "entry " + n + " is outside device " + device + "'s trace (" + trace.size() + " entries)");
        }
        List<List<TraceEntry>> traces = new ArrayList<>(snapshot.deviceTraces());
        traces.set(device, trace.subList(n + 1, trace.size()));
        TraceSnapshot suffix = new TraceSnapshot(
                snapshot.source(),
                snapshot.format(),
                snapshot.segments(),
                traces,
                snapshot.allocatorSettings(),
                snapshot.externalAnnotations(),
                snapshot.extra(),
                snapshot.addressesRecorded());
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
            TraceEntry e = trace.get(oom);
            b.oom(new OomEvent(
                    e.size(), e.has(TraceEntry.DEVICE_FREE) ? e.deviceFree() : MemoryState.UNKNOWN, e.stream(), oom));
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
