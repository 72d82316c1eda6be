package io.gpumem.policy;

import io.gpumem.history.Frame;
import io.gpumem.history.HistoryOptions;
import io.gpumem.history.HistoryOptions.Context;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.history.TraceEntryRing;
import java.time.Instant;
import java.util.List;
import java.util.function.LongSupplier;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;

/**
 * Memory history for the policies beside the PyTorch-exact one, with the exact allocator's semantics
 * ({@code _record_memory_history}): a ring buffer of the most recent {@link TraceEntry}s, and a context level
 * deciding whose stacks are captured: {@code STATE} for live blocks (kept on the block, shown in snapshots),
 * {@code ALLOC} also on trace entries, {@code ALL} also at free. Stacks come from the caller's supplier, times
 * from its clock (default: wall-clock microseconds).
 *
 * <p>Invariant: the ring holds at most {@code max_entries} entries and is empty while recording is off.
 * With recording off {@link #gather} and {@link #record} cost one field read and allocate nothing.
 */
final class PolicyHistory {
    private boolean recording;
    private Context context = Context.NONE;
    private final TraceEntryRing ring = new TraceEntryRing();
    private @Nullable Supplier<List<Frame>> frames;
    private LongSupplier clockMicros = PolicyHistory::wallClockMicros;

    private static long wallClockMicros() {
        Instant now = Instant.now();
        return now.getEpochSecond() * 1_000_000L + now.getNano() / 1_000;
    }

    /** {@code _record_memory_history(enabled, context, max_entries)}; turning it off clears the buffer. */
    void configure(HistoryOptions options) {
        recording = options.enabled() != HistoryOptions.Enabled.NONE;
        ring.setCapacity(options.enabled() == HistoryOptions.Enabled.ALL ? options.maxEntries() : 1);
        context = recording ? options.context() : Context.NONE;
        if (!recording) {
            ring.clear();
        }
    }

    void setFrames(@Nullable Supplier<List<Frame>> frames) {
        this.frames = frames;
    }

    void setClock(@Nullable LongSupplier clockMicros) {
        this.clockMicros = clockMicros == null ? PolicyHistory::wallClockMicros : clockMicros;
    }

    /** The caller's stack when the context level reaches {@code level}, else null. */
    @Nullable
    List<Frame> gather(Context level) {
        if (context.compareTo(level) < 0) {
            return null;
        }
        Supplier<List<Frame>> s = frames;
        return s == null ? null : s.get();
    }

    /** Records an entry; its stack is kept only at context {@code ALLOC} or above. */
    void record(TraceAction action, long addr, long size, long stream, @Nullable List<Frame> stack, long deviceFree) {
        if (!recording) {
            return;
        }
        TraceEntry e = new TraceEntry(
                action,
                addr,
                size,
                stream,
                clockMicros.getAsLong(),
                context.compareTo(Context.ALLOC) >= 0 ? stack : null,
                deviceFree);
        ring.add(e);
    }

    /** The buffered entries, oldest first. */
    List<TraceEntry> entries() {
        return ring.entries();
    }
}
