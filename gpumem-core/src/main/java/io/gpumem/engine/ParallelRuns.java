package io.gpumem.engine;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletionService;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorCompletionService;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.function.IntConsumer;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;

/**
 * Independent what-if runs (the rows of a compare table, the recommender's candidates) spread over the cores: a
 * {@link StreamRunner} shares only read-only state between its runs, and a run is single-threaded, so rows of one
 * stream computed on separate threads are the rows computed one after the other.
 *
 * <p>Invariants: results come in the order the runs were given, whatever order they finish in; a run that throws
 * a {@link RuntimeException} gives a {@link Attempt} holding it, so that the caller sees the failure where a
 * sequential loop would have (the first failing run in order), not whichever failed first on the clock; an
 * {@link Error} (out of memory) is rethrown as it was once the other runs are stopped. The threads are daemons,
 * one per run up to {@code threads}, and gone when {@link #all} returns.
 */
public final class ParallelRuns {

    private ParallelRuns() {}

    /** The outcome of one run: its value, or the exception it threw. */
    public record Attempt<T>(@Nullable T value, @Nullable RuntimeException failure) {

        /** The value, or the run's exception rethrown as it was. */
        public T get() {
            if (failure != null) {
                throw failure;
            }
            if (value == null) {
                throw new IllegalStateException("a run gave no value");
            }
            return value;
        }
    }

    /** One thread per available processor: what a command uses. */
    public static int threads() {
        return Runtime.getRuntime().availableProcessors();
    }

    /**
     * Runs {@code runs} on up to {@code threads} threads (on the calling thread alone when one suffices) and
     * returns their results in the order given; {@code done} is told, on the calling thread, how many have finished
     * each time one does.
     */
    public static <T> List<Attempt<T>> all(List<? extends Supplier<? extends T>> runs, int threads, IntConsumer done) {
        int n = runs.size();
        List<Attempt<T>> results = new ArrayList<>(n);
        if (threads <= 1 || n <= 1) {
            for (int i = 0; i < n; i++) {
                results.add(attempt(runs.get(i)));
                done.accept(i + 1);
            }
            return results;
        }
        ExecutorService pool = Executors.newFixedThreadPool(Math.min(threads, n), r -> {
            Thread t = new Thread(r, "gpumem-whatif");
            t.setDaemon(true);
            return t;
        });
        try {
            AtomicReferenceArray<Attempt<T>> slots = new AtomicReferenceArray<>(n); // each run fills its own slot
            CompletionService<Integer> cs = new ExecutorCompletionService<>(pool);
            for (int i = 0; i < n; i++) {
                Supplier<? extends T> run = runs.get(i);
                int slot = i;
                cs.submit(() -> {
                    slots.set(slot, attempt(run));
                    return slot;
                });
            }
            for (int finished = 1; finished <= n; finished++) {
                try {
                    cs.take().get();
                } catch (ExecutionException e) {
                    if (e.getCause() instanceof Error err) {
                        throw err;
                    }
                    throw new IllegalStateException(e.getCause());
                }
                done.accept(finished);
            }
            for (int i = 0; i < n; i++) {
                results.add(slots.get(i));
            }
            return results;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while running what-ifs", e);
        } finally {
            pool.shutdownNow();
        }
    }

    /** {@link #all} with the values, the first failure in order rethrown as it was. */
    public static <T> List<T> values(List<? extends Supplier<? extends T>> runs, int threads, IntConsumer done) {
        List<T> values = new ArrayList<>(runs.size());
        for (Attempt<T> r : all(runs, threads, done)) {
            values.add(r.get());
        }
        return values;
    }

    private static <T> Attempt<T> attempt(Supplier<? extends T> run) {
        try {
            return new Attempt<>(run.get(), null);
        } catch (RuntimeException e) {
            return new Attempt<>(null, e);
        }
    }
}
