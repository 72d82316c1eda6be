package io.gpumem.engine;

import java.util.ArrayDeque;

/**
 * The worker threads of one {@link ParallelRuns} batch that have no run left to start, lent to the runs still going:
 * a capacity search hands them probes it may ask next ({@link ProbeLookahead}), so that the cores a batch of fewer
 * runs than cores (or its last, longest run) would leave idle work on its probes instead.
 *
 * <p>A run finds the batch's workers through {@link #CURRENT}, bound on every worker thread of a batch of more than
 * one thread; a run outside any batch (a sequential caller) finds none and lends nothing.
 *
 * <p>Invariants: a job is accepted ({@link #lend}) only while a worker is waiting for it, so a lent job starts at
 * once and never queues behind another; a worker runs one job at a time, outside the lock; after {@link #close},
 * nothing more is accepted and every waiting worker returns (a job accepted but not yet taken is simply not run:
 * its lender, whose run has ended, no longer wants it).
 */
final class IdleWorkers {

    /** The workers of the batch whose thread this is; unbound outside a batch. */
    static final ScopedValue<IdleWorkers> CURRENT = ScopedValue.newInstance();

    private final ArrayDeque<Runnable> jobs = new ArrayDeque<>();
    /** Workers waiting in {@link #serve}; guarded by this. */
    private int waiting;

    private boolean closed;

    /** Runs lent jobs on the calling worker thread until {@link #close}; returns at once if already closed. */
    void serve() {
        while (true) {
            Runnable job;
            synchronized (this) {
                waiting++;
                try {
                    while (jobs.isEmpty() && !closed) {
                        wait();
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return;
                } finally {
                    waiting--;
                }
                if (closed) {
                    return;
                }
                job = jobs.removeFirst();
            }
            job.run();
        }
    }

    /** Hands {@code job} to a waiting worker, if one is free now; false (job not taken) otherwise. */
    synchronized boolean lend(Runnable job) {
        if (closed || waiting <= jobs.size()) {
            return false;
        }
        jobs.addLast(job);
        notifyAll();
        return true;
    }

    /** Workers waiting for a job now (for tests and for lenders deciding how far ahead to look). */
    synchronized int free() {
        return Math.max(0, waiting - jobs.size());
    }

    /** Ends the lending: waiting workers return, and later {@link #lend} calls refuse. */
    synchronized void close() {
        closed = true;
        jobs.clear();
        notifyAll();
    }
}
