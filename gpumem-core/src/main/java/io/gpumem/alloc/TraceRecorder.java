package io.gpumem.alloc;

import io.gpumem.history.DriverCallListener;
import io.gpumem.history.Frame;
import io.gpumem.history.HistoryOptions;
import io.gpumem.history.HistoryOptions.Context;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.history.TraceEntryRing;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Consumer;
import java.util.function.LongSupplier;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;

/**
 * An allocator's memory history (allocator.md §10.1): a ring buffer of the most recent {@link TraceEntry}s, the
 * context level that decides which stacks are captured, the caller's stack supplier and the clock. The one history
 * model of every allocator family: the exact allocator's, and the policies' in {@code io.gpumem.policy} (which
 * record with the same semantics). Its owner calls {@link #record} and {@link #maybeGatherContext} under its lock.
 *
 * <p>Context levels are {@link Context}, in PyTorch's {@code RecordContext} order: {@code NONE} &lt;
 * {@code STATE} (stacks for live blocks) &lt; {@code ALLOC} (also on trace entries) &lt; {@code ALL} (also captured
 * at free). A stack is gathered for an operation only if the level reaches the operation's level
 * ({@code maybeGatherContext}); trace entries carry it only at {@code ALLOC} or above.
 *
 * <p>Invariant: the ring holds at most {@code max_entries} entries (more only after a shrink while recording, which
 * drops nothing, as in PyTorch: {@link TraceEntryRing}) and is empty while history is off.
 * Nothing is allocated per operation unless history is on or a tracker is attached ({@link DriverCallListener}s
 * get a driver call's fields without an entry being built, and are not called for other entries).
 */
public final class TraceRecorder {
    private boolean recordHistory;
    private Context recordContext = Context.NONE;
    private final TraceEntryRing ring = new TraceEntryRing();
    private final List<Consumer<TraceEntry>> trackers = new CopyOnWriteArrayList<>();
    private static final DriverCallListener[] NO_LISTENERS = {};
    /** Driver-call listeners; replaced, never changed in place, so {@link #record} reads a stable array. */
    private volatile DriverCallListener[] listeners = NO_LISTENERS;
    /**
     * {@code recordHistory || !trackers.isEmpty()}: whether entries are built. Kept in step by every method that
     * changes either, so that {@link #record} of an alloc or free with history off costs one field read, listeners
     * or not (the driver-call test folds away where the action is a constant). Volatile because trackers attach
     * without the lock.
     */
    private volatile boolean active;

    volatile @Nullable Supplier<List<Frame>> contextSupplier;
    volatile LongSupplier clockMicros = TraceRecorder::wallClockMicros;

    static long wallClockMicros() {
        Instant now = Instant.now();
        return now.getEpochSecond() * 1_000_000L + now.getNano() / 1_000;
    }

    /**
     * {@code torch.cuda.memory._record_memory_history(enabled, context, max_entries)} (PyTorch's
     * {@code recordHistory}); turning it off clears the buffer.
     */
    public synchronized void configure(HistoryOptions options) {
        boolean enabled = options.enabled() != HistoryOptions.Enabled.NONE;
        recordHistory = enabled;
        ring.setCapacity(options.enabled() == HistoryOptions.Enabled.ALL ? options.maxEntries() : 1);
        recordContext = enabled ? options.context() : Context.NONE;
        if (!enabled) {
            ring.clear();
        }
        active = isActive();
    }

    /** Whether an allocation or free would be recorded (history on, or a tracker attached). */
    boolean recordsEntries() {
        return active;
    }

    /** Whether nothing is recorded or listened to: no history, trackers or listeners (what a copy requires). */
    synchronized boolean isIdle() {
        return !isActive() && listeners.length == 0 && ring.isEmpty();
    }

    private boolean isActive() {
        return recordHistory || !trackers.isEmpty();
    }

    synchronized void addListener(DriverCallListener listener) {
        DriverCallListener[] now = Arrays.copyOf(listeners, listeners.length + 1);
        now[now.length - 1] = listener;
        listeners = now;
    }

    synchronized boolean removeListener(DriverCallListener listener) {
        List<DriverCallListener> now = new ArrayList<>(List.of(listeners));
        boolean removed = now.remove(listener);
        listeners = now.toArray(NO_LISTENERS);
        return removed;
    }

    synchronized void addTracker(Consumer<TraceEntry> tracker) {
        trackers.add(tracker);
        active = true;
    }

    synchronized boolean removeTracker(Consumer<TraceEntry> tracker) {
        boolean removed = trackers.remove(tracker);
        active = isActive();
        return removed;
    }

    /** Where stacks come from when the context level asks for one; {@code null} records no frames. */
    public void setContextSupplier(@Nullable Supplier<List<Frame>> frames) {
        contextSupplier = frames;
    }

    /** The clock entries are stamped with, in microseconds. */
    public void setClock(LongSupplier timeMicros) {
        clockMicros = Objects.requireNonNull(timeMicros, "timeMicros");
    }

    /** The caller's stack if the context level reaches {@code level}, else null. */
    public @Nullable List<Frame> maybeGatherContext(Context level) {
        if (recordContext.ordinal() < level.ordinal()) { // (Enum.compareTo checks both classes first, per call)
            return null;
        }
        Supplier<List<Frame>> s = contextSupplier;
        return s == null ? null : s.get();
    }

    /** Records an entry; its stack is kept only at context {@code ALLOC} or above. */
    public void record(TraceAction action, long addr, long size, long stream, @Nullable List<Frame> context) {
        record(action, addr, size, stream, context, -1);
    }

    /** As {@link #record(TraceAction, long, long, long, List)}, for an {@code oom} entry with the device's free bytes. */
    public void record(
            TraceAction action, long addr, long size, long stream, @Nullable List<Frame> context, long deviceFree) {
        if (action.isSegmentEvent()) {
            for (DriverCallListener l : listeners) {
                l.onDriverCall(action, addr, size, stream);
            }
        }
        if (!active) {
            return;
        }
        TraceEntry te = new TraceEntry(
                action,
                addr,
                size,
                stream,
                clockMicros.getAsLong(),
                recordContext.compareTo(Context.ALLOC) >= 0 ? context : null,
                deviceFree,
                TraceEntry.recordedKeys(action));
        for (Consumer<TraceEntry> t : trackers) {
            t.accept(te);
        }
        if (recordHistory) {
            ring.add(te);
        }
    }

    /** The buffered entries, oldest first. */
    public List<TraceEntry> entries() {
        return ring.entries();
    }
}
