package io.gpumem.device;

import java.util.HashMap;
import java.util.Map;

/**
 * The simulated device's streams and events. Each stream counts the work recorded on it and the work completed;
 * an event remembers the stream and the ticket (the recorded count) of its last record and is complete once the
 * stream's completed count reaches the ticket. By default work completes as it is recorded; with events held,
 * it completes only when a test says so or something synchronises.
 *
 * <p>Invariants: {@code 0 <= completed <= recorded} per stream; the default stream always exists; an event
 * never recorded (ticket 0) is complete. Not thread-safe: used under the device's monitor.
 */
final class EventClock {
    /** Work recorded on one stream and how much of it has completed. */
    private static final class StreamWork {
        long recorded;
        long completed;

        void catchUp() {
            completed = recorded;
        }
    }

    /** An event's last record: the stream and the ticket it waits for (0: never recorded). */
    private static final class EventTicket {
        long stream = Device.DEFAULT_STREAM;
        long ticket;
    }

    private final Map<Long, StreamWork> streams = new HashMap<>();
    private final Map<Long, EventTicket> events = new HashMap<>();
    private long nextStream = 1;
    private long nextEvent = 1;
    private boolean holdEvents;

    EventClock(boolean holdEvents) {
        this.holdEvents = holdEvents;
        streams.put(Device.DEFAULT_STREAM, new StreamWork());
    }

    /** An independent copy: same streams, events and tickets. */
    EventClock copy() {
        EventClock c = new EventClock(holdEvents);
        c.streams.clear();
        streams.forEach((id, w) -> {
            StreamWork x = new StreamWork();
            x.recorded = w.recorded;
            x.completed = w.completed;
            c.streams.put(id, x);
        });
        events.forEach((id, e) -> {
            EventTicket x = new EventTicket();
            x.stream = e.stream;
            x.ticket = e.ticket;
            c.events.put(id, x);
        });
        c.nextStream = nextStream;
        c.nextEvent = nextEvent;
        return c;
    }

    void holdEvents(boolean hold) {
        this.holdEvents = hold;
    }

    long createStream() {
        long s = nextStream++;
        streams.put(s, new StreamWork());
        return s;
    }

    void destroyStream(long stream) {
        if (stream == Device.DEFAULT_STREAM || streams.remove(stream) == null) {
            throw new DeviceException(
                    DeviceOp.DESTROY_STREAM, DeviceError.CUDA_ERROR_INVALID_HANDLE, "stream " + stream);
        }
    }

    /** Completes the stream's work; accepts handles it never created (replays name streams by the trace's handles). */
    void synchronizeStream(long stream) {
        StreamWork s = streams.get(stream);
        if (s != null) {
            s.catchUp();
        }
    }

    void completeAll() {
        for (StreamWork s : streams.values()) {
            s.catchUp();
        }
    }

    long createEvent() {
        long e = nextEvent++;
        events.put(e, new EventTicket());
        return e;
    }

    /** Checks that {@code event} exists (before a fault may be injected), throwing as the driver would. */
    void requireEvent(DeviceOp op, long event) {
        event(op, event);
    }

    void recordEvent(long event, long stream) {
        EventTicket e = event(DeviceOp.RECORD_EVENT, event);
        StreamWork s = streams.computeIfAbsent(stream, k -> new StreamWork()); // trace streams need no creation
        s.recorded++;
        e.stream = stream;
        e.ticket = s.recorded;
        if (!holdEvents) {
            s.catchUp();
        }
    }

    boolean queryEvent(long event) {
        return completed(event(DeviceOp.QUERY_EVENT, event));
    }

    void synchronizeEvent(long event) {
        EventTicket e = event(DeviceOp.SYNCHRONIZE_EVENT, event);
        StreamWork s = streams.get(e.stream);
        if (s != null && s.completed < e.ticket) {
            s.completed = e.ticket;
        }
    }

    void destroyEvent(long event) {
        event(DeviceOp.DESTROY_EVENT, event);
        events.remove(event);
    }

    boolean completeNext(long stream) {
        StreamWork s = streams.get(stream);
        if (s == null || s.completed >= s.recorded) {
            return false;
        }
        s.completed++;
        return true;
    }

    int pendingEventCount() {
        int n = 0;
        for (EventTicket e : events.values()) {
            if (e.ticket != 0 && !completed(e)) {
                n++;
            }
        }
        return n;
    }

    private boolean completed(EventTicket e) {
        if (e.ticket == 0) {
            return true; // never recorded: CUDA reports success
        }
        StreamWork s = streams.get(e.stream);
        return s == null || s.completed >= e.ticket;
    }

    private EventTicket event(DeviceOp op, long event) {
        EventTicket e = events.get(event);
        if (e == null) {
            throw new DeviceException(op, DeviceError.CUDA_ERROR_INVALID_HANDLE, "event " + event);
        }
        return e;
    }
}
