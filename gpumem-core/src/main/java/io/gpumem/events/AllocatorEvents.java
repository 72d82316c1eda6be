package io.gpumem.events;

import jdk.jfr.EventType;
import jdk.jfr.FlightRecorder;

/**
 * The allocator's Java Flight Recorder events, emitted where {@code memory_stats()} counts the same thing:
 * {@link SegmentAllocEvent} (cudaMalloc or an expandable segment's map), {@link SegmentFreeEvent} (cudaFree or
 * unmap), {@link AllocRetryEvent} (a malloc that freed the cache and retried) and {@link OutOfMemoryEvent}.
 *
 * <p>Cost when no recording is on: one read of the event type's enabled flag per call, no allocation (the
 * event object is built only after {@link EventType#isEnabled()} said yes, and only committed when
 * {@code shouldCommit()} agrees with the recording's thresholds). The event types are looked up only once Flight
 * Recorder is initialized (any recording, from {@code -XX:StartFlightRecording}, {@code jcmd JFR.start} or the API,
 * initializes it first): looking one up starts JFR's event machinery, which was about 0.17 s of CPU time, a fifth
 * of a short {@code gpumem replay}, for events nobody records. Enable them with
 * {@code -XX:StartFlightRecording} and a settings file naming {@code gpumem.*}, or a {@code jdk.jfr.Recording}
 * that enables them by name.
 */
public final class AllocatorEvents {
    private AllocatorEvents() {}

    /** The event types, initialized on first use, which {@link FlightRecorder#isInitialized()} defers. */
    private static final class Types {
        static final EventType SEGMENT_ALLOC = EventType.getEventType(SegmentAllocEvent.class);
        static final EventType SEGMENT_FREE = EventType.getEventType(SegmentFreeEvent.class);
        static final EventType RETRY = EventType.getEventType(AllocRetryEvent.class);
        static final EventType OOM = EventType.getEventType(OutOfMemoryEvent.class);
    }

    /** A segment was allocated ({@code mapped}: pages mapped into an expandable segment). */
    public static void segmentAlloc(int device, long address, long size, long stream, boolean mapped) {
        if (FlightRecorder.isInitialized() && Types.SEGMENT_ALLOC.isEnabled()) {
            SegmentAllocEvent e = new SegmentAllocEvent();
            if (e.shouldCommit()) {
                e.segment(device, address, size, stream);
                e.mapped = mapped;
                e.commit();
            }
        }
    }

    /** A segment was released ({@code unmapped}: pages unmapped from an expandable segment). */
    public static void segmentFree(int device, long address, long size, long stream, boolean unmapped) {
        if (FlightRecorder.isInitialized() && Types.SEGMENT_FREE.isEnabled()) {
            SegmentFreeEvent e = new SegmentFreeEvent();
            if (e.shouldCommit()) {
                e.segment(device, address, size, stream);
                e.unmapped = unmapped;
                e.commit();
            }
        }
    }

    /** A request freed the cache and retried the device allocation. */
    public static void retry(int device, long size, long allocSize, long stream) {
        if (FlightRecorder.isInitialized() && Types.RETRY.isEnabled()) {
            AllocRetryEvent e = new AllocRetryEvent();
            if (e.shouldCommit()) {
                e.device = device;
                e.size = size;
                e.allocSize = allocSize;
                e.stream = stream;
                e.commit();
            }
        }
    }

    /** A request failed with out-of-memory. */
    public static void outOfMemory(
            int device, long requested, long size, long stream, long deviceFree, long allocated, long reserved) {
        if (FlightRecorder.isInitialized() && Types.OOM.isEnabled()) {
            OutOfMemoryEvent e = new OutOfMemoryEvent();
            if (e.shouldCommit()) {
                e.device = device;
                e.requested = requested;
                e.size = size;
                e.stream = stream;
                e.deviceFree = deviceFree;
                e.allocated = allocated;
                e.reserved = reserved;
                e.commit();
            }
        }
    }
}
