package io.gpumem.policy;

import io.gpumem.device.Device;
import java.util.Arrays;
import java.util.List;
import java.util.function.Consumer;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;

/**
 * The streams other than its own that used a block ({@code record_stream}), and, once the block is freed, one event
 * recorded on each of them: the block may be reused when every event has completed. It is how the policies keep
 * {@link io.gpumem.alloc.GpuAllocator}'s {@code recordStream} promise ({@code stitch}, {@code planned} through it,
 * {@code rmm-pool}); the exact allocator keeps PyTorch's own structures instead.
 *
 * <p>Invariants: before {@link #recordEvents} the first {@code count} handles are distinct streams; after it they are
 * the events recorded on them, until {@link #completed} sees them all done, destroys them and empties the set. Not
 * thread-safe: its allocator's lock guards it. It allocates only when a block is used on more streams than it has
 * room for.
 */
final class StreamUses {
    private static final long[] NONE = {};

    private long[] handles = NONE;
    private int count;

    /** {@code uses} with {@code stream} added, made on a block's first use by another stream. */
    static StreamUses with(@Nullable StreamUses uses, long stream) {
        StreamUses u = uses != null ? uses : new StreamUses();
        u.add(stream);
        return u;
    }

    /**
     * Hands each block of {@code waiting} whose events have all completed (waiting for them when {@code sync}) to
     * {@code release}, removing it from the list; the others stay, in order.
     */
    static <B> void releaseCompleted(
            List<B> waiting, Function<B, StreamUses> usesOf, Device device, boolean sync, Consumer<B> release) {
        for (int i = 0; i < waiting.size(); i++) {
            B b = waiting.get(i);
            if (usesOf.apply(b).completed(device, sync)) {
                waiting.remove(i--);
                release.accept(b);
            }
        }
    }

    /** Adds {@code stream} unless it is already there. */
    void add(long stream) {
        for (int i = 0; i < count; i++) {
            if (handles[i] == stream) {
                return;
            }
        }
        if (count == handles.length) {
            handles = Arrays.copyOf(handles, Math.max(2, 2 * count));
        }
        handles[count++] = stream;
    }

    boolean isEmpty() {
        return count == 0;
    }

    /**
     * At a block's free: whether it must wait before reuse, that is whether other streams used it ({@code uses} holds
     * any); if so, one event is recorded on each of them.
     */
    static boolean recordEventsIfUsed(@Nullable StreamUses uses, Device device) {
        if (uses == null || uses.isEmpty()) {
            return false;
        }
        uses.recordEvents(device);
        return true;
    }

    /** At the block's free: records one new event on each stream; the handles are the events from now on. */
    private void recordEvents(Device device) {
        for (int i = 0; i < count; i++) {
            long event = device.createEvent();
            device.recordEvent(event, handles[i]);
            handles[i] = event;
        }
    }

    /**
     * Whether every event has completed, asking the device (or waiting for each when {@code sync}); when they have,
     * destroys them and empties the set.
     */
    boolean completed(Device device, boolean sync) {
        for (int i = 0; i < count; i++) {
            if (sync) {
                device.synchronizeEvent(handles[i]);
            } else if (!device.queryEvent(handles[i])) {
                return false;
            }
        }
        for (int i = 0; i < count; i++) {
            device.destroyEvent(handles[i]);
        }
        count = 0;
        return true;
    }

    /** Forgets every stream (a recycled block). */
    void clear() {
        count = 0;
    }
}
