package io.gpumem.engine;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
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
 * {@link Error} (out of memory) is rethrown as it was, as soon as it happens (the runs under way are left to end on
 * their own; no other run starts, as none would after it in a sequential loop). The threads are daemons: one per run up to {@code threads}, and while fewer runs than threads remain, the
 * others serve the running ones' capacity searches as {@link IdleWorkers} (a search asks them to probe ahead of its
 * search, {@link ProbeLookahead}; its answer is the one it gives alone). A worker leaves when no run is left and
 * {@link #all} has returned.
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
     * Runs {@code runs} on up to {@code threads} threads (on the calling thread when {@code threads} is 1) and
     * returns their results in the order given; {@code done} is told, on the calling thread, how many have finished
     * each time one does.
     */
    public static <T> List<Attempt<T>> all(List<? extends Supplier<? extends T>> runs, int threads, IntConsumer done) {
        int n = runs.size();
        List<Attempt<T>> results = new ArrayList<>(n);
        if (threads <= 1 || n == 0) {
            for (int i = 0; i < n; i++) {
                results.add(attempt(runs.get(i)));
                done.accept(i + 1);
            }
            return results;
        }
        // one worker per run up to the thread count, and as many more (up to what a search's lookahead can use) to
        // serve the runs' capacity searches once no run is left to start
        int workers = Math.min(threads, n + ProbeLookahead.MAX_LENT);
        AtomicReferenceArray<Attempt<T>> slots = new AtomicReferenceArray<>(n); // each run fills its own slot
        AtomicInteger nextRun = new AtomicInteger();
        BlockingQueue<Integer> finished = new LinkedBlockingQueue<>(); // run index, or -1 after an Error
        AtomicReference<@Nullable Error> error = new AtomicReference<>();
        IdleWorkers idle = new IdleWorkers();
        Runnable worker = () -> ScopedValue.where(IdleWorkers.CURRENT, idle).run(() -> {
            for (int i = nextRun.getAndIncrement(); i < n; i = nextRun.getAndIncrement()) {
                try {
                    slots.set(i, attempt(runs.get(i)));
                    finished.add(i);
                } catch (Error e) {
                    error.compareAndSet(null, e);
                    finished.add(-1);
                    return;
                }
            }
            idle.serve();
        });
        try {
            for (int w = 0; w < workers; w++) {
                Thread t = new Thread(worker, "gpumem-whatif-" + w);
                t.setDaemon(true);
                t.start();
            }
            for (int count = 1; count <= n; count++) {
                if (finished.take() < 0) {
                    throw Objects.requireNonNull(error.get());
                }
                done.accept(count);
            }
            for (int i = 0; i < n; i++) {
                results.add(slots.get(i));
            }
            return results;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while running what-ifs", e);
        } finally {
            // no run starts once the caller has left, with its results or an exception (an Error in a run, an
            // interrupt, a progress callback that threw): the workers would otherwise start every run left, on
            // threads nobody waits for, as a sequential loop never would
            nextRun.set(n);
            idle.close();
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
