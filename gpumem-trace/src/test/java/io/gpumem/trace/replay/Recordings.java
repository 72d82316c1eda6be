package io.gpumem.trace.replay;

import io.gpumem.history.TraceEntry;
import io.gpumem.trace.TestTraces;
import io.gpumem.trace.io.PytorchSnapshotReader;
import io.gpumem.trace.io.TraceSnapshot;
import java.util.ArrayList;
import java.util.List;

/** The shared real recordings, read and altered for the replay tests (a device trace replaced, tampered with). */
final class Recordings {

    private Recordings() {}

    static TraceSnapshot read(String name) {
        return new PytorchSnapshotReader().read(TestTraces.file(name));
    }

    /** {@code s} with the trace of {@code device} replaced by {@code trace}. */
    static TraceSnapshot withTrace(TraceSnapshot s, int device, List<TraceEntry> trace) {
        List<List<TraceEntry>> traces = new ArrayList<>(s.deviceTraces());
        traces.set(device, trace);
        return new TraceSnapshot(
                s.source(),
                s.format(),
                s.segments(),
                traces,
                s.allocatorSettings(),
                s.externalAnnotations(),
                s.extra(),
                s.addressesRecorded());
    }

    /** A copy of the trace of {@code device} of {@code s}, to alter. */
    static List<TraceEntry> traceCopy(TraceSnapshot s, int device) {
        return new ArrayList<>(s.traceOf(device));
    }

    /** Entry {@code i} of {@code trace} set at {@code delta} bytes above its recorded address. */
    static void shift(List<TraceEntry> trace, int i, long delta) {
        trace.set(i, trace.get(i).withAddr(trace.get(i).addr() + delta));
    }
}
