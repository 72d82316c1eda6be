package io.gpumem.trace.replay;

import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.TestTraces;
import io.gpumem.trace.io.PytorchSnapshotReader;
import io.gpumem.trace.io.TraceSnapshot;
import java.util.ArrayList;
import java.util.Comparator;
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

    /**
     * A recording of two devices: {@code first}'s device 0 as device 0, {@code second}'s as device 1, with the
     * settings of {@code first}; the segments in that order, or sorted by address across the devices.
     */
    static TraceSnapshot twoDevices(TraceSnapshot first, TraceSnapshot second, boolean segmentsByAddress) {
        List<SegmentInfo> segments = new ArrayList<>(first.segments());
        second.segments().forEach(seg -> segments.add(seg.onDevice(1)));
        if (segmentsByAddress) {
            segments.sort(Comparator.comparingLong(SegmentInfo::address));
        }
        return new TraceSnapshot(
                "two devices",
                first.format(),
                segments,
                List.of(first.traceOf(0), second.traceOf(0)),
                first.allocatorSettings(),
                first.externalAnnotations(),
                first.extra(),
                true);
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
