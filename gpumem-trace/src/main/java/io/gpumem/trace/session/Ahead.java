package io.gpumem.trace.session;

import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.FutureTask;

/**
 * Work a command begins on a thread of its own, so that it runs beside the what-if runs it starts next rather than
 * after them (a device's byte categories, a report's timeline), and takes once it needs the result.
 *
 * <p>Invariants: the work runs at most once, on its own thread when {@link #start} began it, else on the thread that
 * takes it; {@link #take} gives its result or throws what it threw, as though it had run on the taker's thread. The
 * work must read only what no other thread writes meanwhile (the trace, a session's windows).
 *
 * @param <T> the result
 */
public final class Ahead<T> {
    private final FutureTask<T> task;

    public Ahead(Callable<T> work) {
        this.task = new FutureTask<>(work);
    }

    /** Begins the work on a daemon thread named {@code thread}. */
    public Ahead<T> start(String thread) {
        Thread t = new Thread(task, thread);
        t.setDaemon(true);
        t.start();
        return this;
    }

    /**
     * The work's result, waiting for it (running it here when it has not begun); {@code what} names the work in the
     * message of an interruption.
     */
    public T take(String what) {
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
            throw new IllegalStateException("interrupted while " + what, e);
        }
    }
}
