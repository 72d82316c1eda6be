package io.gpumem.policy;

import io.gpumem.history.Frame;
import io.gpumem.history.HistoryOptions;
import io.gpumem.history.HistoryOptions.Context;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import java.util.ArrayList;
import java.util.List;
import java.util.function.LongSupplier;
import java.util.function.Supplier;

/**
 * Memory history for the policies beside the PyTorch-exact one, with the exact allocator's semantics
 * ({@code _record_memory_history}): a ring buffer of the most recent {@link TraceEntry}s, and a context level
 * deciding whose stacks are captured: {@code STATE} for live blocks (kept on the block, shown in snapshots),
 * {@code ALLOC} also on trace entries, {@code ALL} also at free. Stacks come from the caller's supplier, times
 * from its clock (default: wall-clock microseconds).
 *
 * <p>Invariant: {@code buffer.size() <= maxEntries}; once full, {@code next} is the slot of the oldest entry.
 * With recording off {@link #gather} and {@link #record} cost one field read and allocate nothing.
 */
final class PolicyHistory {
    private boolean recording;
    private Context context = Context.NONE;
    private int maxEntries = 1;
    private final ArrayList<TraceEntry> buffer = new ArrayList<>();
    private int next;
    private Supplier<List<Frame>> frames;
    private LongSupplier clockMicros = PolicyHistory::wallClockMicros;

    private static long wallClockMicros() {
        java.time.Instant now = java.time.Instant.now();
        return now.getEpochSecond() * 1_000_000L + now.getNano() / 1_000;
    }

    /** {@code _record_memory_history(enabled, context, max_entries)}; turning it off clears the buffer. */
    void configure(HistoryOptions options) {
        recording = options.enabled() != HistoryOptions.Enabled.NONE;
        long max = options.enabled() == HistoryOptions.Enabled.ALL ? options.maxEntries() : 1;
        int keep = (int) Math.max(1, Math.min(Integer.MAX_VALUE - 8, max));
        if (keep != maxEntries && !buffer.isEmpty()) {
            List<TraceEntry> kept = entries();
            buffer.clear();
            next = 0;
            buffer.addAll(kept.subList(Math.max(0, kept.size() - keep), kept.size()));
        }
        maxEntries = keep;
        context = recording ? options.context() : Context.NONE;
        if (!recording) {
            buffer.clear();
            next = 0;
        }
    }

    void setFrames(Supplier<List<Frame>> frames) {
        this.frames = frames;
    }

    void setClock(LongSupplier clockMicros) {
        this.clockMicros = clockMicros == null ? PolicyHistory::wallClockMicros : clockMicros;
    }

    /** The caller's stack when the context level reaches {@code level}, else null. */
    List<Frame> gather(Context level) {
        if (context.compareTo(level) < 0) {
            return null;
        }
        Supplier<List<Frame>> s = frames;
        return s == null ? null : s.get();
    }

    /** Records an entry; its stack is kept only at context {@code ALLOC} or above. */
    void record(TraceAction action, long addr, long size, long stream, List<Frame> stack, long deviceFree) {
        if (!recording) {
            return;
        }
        TraceEntry e = new TraceEntry(action, addr, size, stream, clockMicros.getAsLong(),
                context.compareTo(Context.ALLOC) >= 0 ? stack : null, deviceFree);
        if (buffer.size() < maxEntries) {
            buffer.add(e);
        } else {
            buffer.set(next++, e);
            if (next == maxEntries) {
                next = 0;
            }
        }
    }

    /** The buffered entries, oldest first. */
    List<TraceEntry> entries() {
        List<TraceEntry> out = new ArrayList<>(buffer.size());
        out.addAll(buffer.subList(next, buffer.size()));
        out.addAll(buffer.subList(0, next));
        return out;
    }
}
