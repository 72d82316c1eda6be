package io.gpumem.trace.session;

import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.FutureTask;

/**
 * Work a command starts on a daemon thread of its own, beside what it computes next, and takes where it needs the
 * result: the classification of a device's bytes beside the what-if runs ({@link TraceSession#classifyAhead}), a
 * report's state at peak allocated beside its timeline.
 *
 * <p>{@link #take} runs the work on the taking thread when it has not begun (never started, or started on a thread
 * that has not yet got to it), waits for it when it runs elsewhere, and rethrows what it threw, as it was thrown (a
 * checked exception wrapped in an {@link IllegalStateException}). The work runs once; every take gets its one
 * result.
 *
 * @param <T> the result
 */
public final class Beside<T> {
    private final FutureTask<T> task;

    /** Work not yet started. */
    public Beside(Callable<T> work) {
        this.task = new FutureTask<>(work);
    }

    /** Starts the work on a new daemon thread named {@code name}; returns this. */
    public Beside<T> start(String name) {
        Thread t = new Thread(task, name);
        t.setDaemon(true);
        t.start();
        return this;
    }

    /** The result, computed here when the work was not started; what the work threw, rethrown. */
    public T take() {
        task.run(); // nothing when it already ran or runs on its own thread
        try {
            return task.get();
        } catch (ExecutionException e) {
            if (e.getCause() instanceof RuntimeException r) {
                throw r;
            }
            if (e.getCause() instanceof Error err) {
                throw err;
            }
            throw new IllegalStateException(e.getCause());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while waiting for work started beside", e);
        }
    }
}
