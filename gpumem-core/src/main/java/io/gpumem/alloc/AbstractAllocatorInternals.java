package io.gpumem.alloc;

import io.gpumem.history.Frame;
import io.gpumem.history.HistoryOptions;
import java.util.List;
import java.util.Objects;
import java.util.function.LongSupplier;
import java.util.function.Supplier;

/**
 * The part of {@link GpuAllocatorInternals} that every allocator family shares: the memory-history controls over
 * the allocator's {@link TraceRecorder}, and its lock. The exact allocator's {@link AllocatorInternals} and the
 * policies' internals extend it with their own invariant check (and whatever else their family offers), so that
 * history is configured one way for every allocator.
 *
 * <p>Configuring history takes the allocator's lock (the owner records under it); the stack supplier and the clock
 * are volatile in the recorder and are set without it.
 */
public abstract class AbstractAllocatorInternals implements GpuAllocatorInternals {
    /** The allocator's lock, which every operation of the allocator takes. */
    protected final AllocatorLock lock;

    private final TraceRecorder history;

    protected AbstractAllocatorInternals(AllocatorLock lock, TraceRecorder history) {
        this.lock = Objects.requireNonNull(lock, "lock");
        this.history = Objects.requireNonNull(history, "history");
    }

    /** {@code torch.cuda.memory._record_memory_history(enabled, context, max_entries)}. */
    @Override
    public final void recordHistory(HistoryOptions options) {
        Objects.requireNonNull(options, "options");
        underLock(() -> history.configure(options));
    }

    @Override
    public final void setContextSupplier(Supplier<List<Frame>> frames) {
        history.setContextSupplier(frames);
    }

    /** Sets the clock for {@code time_us} of trace entries (microseconds); tests inject a deterministic one. */
    @Override
    public final void setClock(LongSupplier timeMicros) {
        history.setClock(timeMicros);
    }

    /** Runs {@code action} holding the allocator's lock. */
    protected final void underLock(Runnable action) {
        lock.lock();
        try {
            action.run();
        } finally {
            lock.unlock();
        }
    }
}
