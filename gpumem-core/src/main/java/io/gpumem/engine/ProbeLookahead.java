package io.gpumem.engine;

import io.gpumem.engine.MinimumCapacity.Bracket;
import io.gpumem.engine.MinimumCapacity.Verdict;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;
import org.jspecify.annotations.Nullable;

/**
 * One search of {@link MinimumCapacity#search} with the probes it may ask next run ahead, on the
 * {@link IdleWorkers} of its batch: the speed-up of a capacity search on cores its batch leaves idle (fewer runs
 * than cores, or the last, longest run of a batch). The answer is the search's own; only who computes a probe,
 * and when, changes.
 *
 * <h2>Algorithm</h2>
 * The probes a search can ask form a binary tree ({@link MinimumCapacity.Bracket}): below the probe of a state lie
 * the probe of the state after it runs and that of the state after it fails (where the search weighs what failures
 * cost, the lookahead guesses that the next one costs what the last did: {@link Bracket#after(boolean)}; a wrong
 * guess lends a probe the search never asks, which is abandoned like any other). Before the searching thread computes
 * a state's probe, it lends the tree below it, level by level (the outcome "runs" first: where the search splits
 * low for cheap failures it is the less likely child, but the dearer one, since a probe that runs replays the whole
 * stream, so computing it ahead saves the most; lending the likelier child first measured slower),
 * {@link #DEPTH} levels deep, for as long as a worker is free. When the bracket narrows, every probe lent outside
 * it can no longer be asked and is abandoned: its replay stops at its next chunk ({@link AbandonableProbe}), which
 * frees its worker for the new subtree. A probe already done, or running, is taken when asked (waiting for it if
 * it is still running); one lent but not yet started is taken back and computed by the searching thread.
 *
 * <h2>Why the answer does not change</h2>
 * A probe's outcome depends on its capacity alone (a replay is deterministic, and {@link CapacityProbes} answers a
 * capacity the same whichever checkpoint or earlier run it uses), so a probe computed ahead on another thread is
 * the probe the search would have computed; the search itself, {@link MinimumCapacity#search}, decides which
 * probes it asks in which order, and reads only their outcomes.
 *
 * <p>Invariants: a capacity is lent at most once while it stays inside the bracket; a lent probe is in
 * {@link #lent} from its lending until it is taken, abandoned, or {@link #abandonAll} ends the search; a probe that
 * throws is rethrown, as it was, by the thread that asks for it, and by nobody if nobody does.
 */
final class ProbeLookahead {

    /** Levels of the probe tree below the current probe that may be lent. */
    static final int DEPTH = 3;

    /** The most probes one search can have lent at once: the tree below a probe, {@link #DEPTH} levels deep. */
    static final int MAX_LENT = (1 << (DEPTH + 1)) - 2;

    /** A capacity probe whose replay can be abandoned between chunks. */
    interface AbandonableProbe {
        /** What a probe nobody abandons is given. */
        BooleanSupplier NEVER = () -> false;

        /**
         * Whether the stream runs without an out-of-memory error at {@code capacity}, and what a failure cost; null
         * when {@code abandoned} turned true before the answer was known.
         */
        @Nullable
        Verdict probe(long capacity, BooleanSupplier abandoned);

        /** {@link #probe(long, BooleanSupplier)} computed to the end. */
        default Verdict probe(long capacity) {
            Verdict v = probe(capacity, NEVER);
            if (v == null) {
                throw new IllegalStateException("a probe never abandoned gave no answer at " + capacity);
            }
            return v;
        }
    }

    private enum State {
        QUEUED,
        RUNNING,
        DONE
    }

    /** A probe lent to a worker. */
    private static final class Lent {
        final long capacity;
        /** Guarded by the lookahead. */
        State state = State.QUEUED;

        volatile boolean abandoned;
        Verdict verdict = Verdict.FAILS;

        @Nullable
        Throwable failure;

        Lent(long capacity) {
            this.capacity = capacity;
        }
    }

    private final AbandonableProbe probe;
    private final IdleWorkers workers;
    /** The probes lent and not yet taken or abandoned, by capacity; guarded by this. */
    private final Map<Long, Lent> lent = new HashMap<>();

    /** Counts the probes the search took from a worker instead of computing them itself. */
    private final AtomicLong takenAhead;

    /** The most probes lent at once (each holds its own copies of the device and allocator while it runs). */
    private final int maxLent;

    /**
     * @param maxLent the most probes lent at once, at most {@link #MAX_LENT}; 0 lends none (the search computes
     *     every probe itself)
     */
    ProbeLookahead(AbandonableProbe probe, IdleWorkers workers, AtomicLong takenAhead, int maxLent) {
        this.probe = probe;
        this.workers = workers;
        this.takenAhead = takenAhead;
        this.maxLent = Math.clamp(maxLent, 0, MAX_LENT);
    }

    /**
     * The verdict of the probe of {@code state}, after lending the probes below it and abandoning those its bracket
     * has left behind.
     */
    Verdict answer(Bracket state) {
        long mid = state.probe();
        Lent mine;
        synchronized (this) {
            abandonOutside(state.lo(), state.hi());
            mine = lent.remove(mid);
            if (mine != null && mine.state == State.QUEUED) {
                mine.abandoned = true; // its worker, when it gets to it, skips it: computed here instead
                mine = null;
            }
        }
        lendBelow(state);
        if (mine == null) {
            return probe.probe(mid);
        }
        takenAhead.incrementAndGet();
        synchronized (this) {
            while (mine.state != State.DONE) {
                try {
                    wait();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new IllegalStateException("interrupted while waiting for a probe", e);
                }
            }
        }
        Throwable failure = mine.failure;
        if (failure instanceof RuntimeException re) {
            throw re;
        }
        if (failure instanceof Error err) {
            throw err;
        }
        return mine.verdict;
    }

    /** Abandons every probe still lent: the search has its answer. */
    synchronized void abandonAll() {
        for (Lent l : lent.values()) {
            l.abandoned = true;
        }
        lent.clear();
    }

    /** Probes lent now (for tests). */
    synchronized int lentCount() {
        return lent.size();
    }

    private void abandonOutside(long lo, long hi) {
        for (Iterator<Lent> it = lent.values().iterator(); it.hasNext(); ) {
            Lent l = it.next();
            if (l.capacity <= lo || l.capacity >= hi) {
                l.abandoned = true;
                it.remove();
            }
        }
    }

    /** Lends the probes below {@code state}'s, breadth first and the outcome "runs" first, while a worker is free. */
    private void lendBelow(Bracket state) {
        List<Bracket> level = List.of(state);
        for (int depth = 0; depth < DEPTH && !level.isEmpty(); depth++) {
            List<Bracket> below = new ArrayList<>();
            for (Bracket node : level) {
                for (Bracket child : List.of(node.after(true), node.after(false))) {
                    if (child.closed()) {
                        continue; // no probe: the search stops there
                    }
                    if (!lend(child.probe())) {
                        return;
                    }
                    below.add(child);
                }
            }
            level = below;
        }
    }

    /** Lends the probe at {@code capacity} unless it already is; false when no worker is free. */
    private boolean lend(long capacity) {
        Lent l;
        synchronized (this) {
            if (lent.containsKey(capacity)) {
                return true;
            }
            if (lent.size() >= maxLent) {
                return false;
            }
            l = new Lent(capacity);
            if (!workers.lend(() -> run(l))) {
                return false;
            }
            lent.put(capacity, l);
        }
        return true;
    }

    /** A worker's side of a lent probe. */
    private void run(Lent l) {
        synchronized (this) {
            if (l.state != State.QUEUED || l.abandoned) {
                return;
            }
            l.state = State.RUNNING;
        }
        Verdict verdict = null;
        Throwable failure = null;
        try {
            verdict = probe.probe(l.capacity, () -> l.abandoned);
        } catch (RuntimeException | Error e) {
            failure = e;
        }
        synchronized (this) {
            if (verdict != null) {
                l.verdict = verdict;
            }
            l.failure = failure;
            l.state = State.DONE;
            notifyAll();
        }
    }
}
