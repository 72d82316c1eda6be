package io.gpumem.trace.analysis;

import io.gpumem.history.TraceEntry;
import io.gpumem.oom.OomReport;

/**
 * An out-of-memory the trace recorded (an {@code oom} entry) or the simulation hit.
 *
 * @param requestBytes the request that failed, rounded as the allocator rounds it (the {@code size} of an {@code oom} entry)
 * @param deviceFree   free device memory the driver reported at that moment, or −1 when unknown
 * @param stream       the stream the request was on
 * @param entryIndex   index of the trace entry, or −1 when it did not come from a trace
 * @param replayed     whether a replay hit it at that entry, rather than the recording (a file of requests only has
 *                     no {@code oom} entry there to name)
 */
public record OomEvent(long requestBytes, long deviceFree, long stream, long entryIndex, boolean replayed) {
    public OomEvent {
        if (requestBytes <= 0) {
            throw new IllegalArgumentException("oom request size must be positive, got " + requestBytes);
        }
    }

    /** An out-of-memory the trace recorded, or one the simulation hit outside any trace ({@code entryIndex} −1). */
    public OomEvent(long requestBytes, long deviceFree, long stream, long entryIndex) {
        this(requestBytes, deviceFree, stream, entryIndex, false);
    }

    /** The out-of-memory an {@code oom} entry recorded, at trace index {@code index}. */
    public static OomEvent recorded(TraceEntry oom, int index) {
        return new OomEvent(
                oom.size(),
                oom.has(TraceEntry.DEVICE_FREE) ? oom.deviceFree() : MemoryState.UNKNOWN,
                oom.stream(),
                index);
    }

    /**
     * The out-of-memory a replay hit, as the allocator reported it, on {@code stream} at trace index {@code index}
     * (−1 for a generated run): the request rounded as the {@code oom} entry would record it, or as asked where it
     * was refused before rounding (1 EB or more).
     */
    public static OomEvent replayed(OomReport report, long stream, long index) {
        return new OomEvent(
                report.roundedSize() > 0 ? report.roundedSize() : report.requestedBytes(),
                report.deviceFree(),
                stream,
                index,
                index >= 0);
    }
}
