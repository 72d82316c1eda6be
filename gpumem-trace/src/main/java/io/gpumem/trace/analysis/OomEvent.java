package io.gpumem.trace.analysis;

/**
 * An out-of-memory the trace recorded (an {@code oom} entry) or the simulation hit.
 *
 * @param requestBytes the request that failed, rounded as the allocator rounds it (the {@code size} of an {@code oom} entry)
 * @param deviceFree   free device memory the driver reported at that moment, or −1 when unknown
 * @param stream       the stream the request was on
 * @param entryIndex   index of the trace entry, or −1 when it did not come from a trace
 */
public record OomEvent(long requestBytes, long deviceFree, long stream, long entryIndex) {
    public OomEvent {
        if (requestBytes <= 0) {
            throw new IllegalArgumentException("oom request size must be positive, got " + requestBytes);
        }
    }
}
