package io.gpumem.alloc;

import java.util.ArrayDeque;
import java.util.Arrays;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * PyTorch's {@code cuda_events}: one FIFO of (event, block) per stream on which a freed block was used
 * ({@code record_stream}). A block becomes free when the events of all its recorded streams have completed.
 *
 * <p>Streams are kept in first-use order (PyTorch's hash map order is unspecified; the order only affects the
 * order of {@code free_completed} entries, never the resulting state). A stream whose queue empties is dropped.
 * Event handles are pooled like PyTorch's {@code EventPool}, so steady record_stream traffic creates no events.
 */
final class StreamEvents {
    record Pending(long event, Block block) {}

    final Map<Long, ArrayDeque<Pending>> queues = new LinkedHashMap<>();
    private long[] spareEvents = new long[8];
    private int spareCount;
    private int pending;

    /** Takes {@code from}'s pooled event handles (the handles exist on the copied device too). */
    void copySparesFrom(StreamEvents from) {
        spareEvents = from.spareEvents.clone();
        spareCount = from.spareCount;
    }

    boolean isEmpty() {
        return pending == 0;
    }

    int pendingCount() {
        return pending;
    }

    void add(long stream, long event, Block block) {
        queues.computeIfAbsent(stream, s -> new ArrayDeque<>()).addLast(new Pending(event, block));
        pending++;
    }

    Iterator<Map.Entry<Long, ArrayDeque<Pending>>> streams() {
        return queues.entrySet().iterator();
    }

    void removed(int n) {
        pending -= n;
    }

    /** A pooled event handle, or 0 when the pool is empty. */
    long takeSpare() {
        return spareCount == 0 ? 0 : spareEvents[--spareCount];
    }

    void giveBack(long event) {
        if (spareCount == spareEvents.length) {
            spareEvents = Arrays.copyOf(spareEvents, spareCount * 2);
        }
        spareEvents[spareCount++] = event;
    }
}
