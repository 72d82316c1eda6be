package io.gpumem.engine;

import java.util.function.LongPredicate;
import org.jspecify.annotations.Nullable;

/**
 * The one minimum-capacity search of the what-if runs ({@link StreamRunner}, whatever the source of its stream): the smallest
 * device capacity, a multiple of {@link #STEP}, at which a run completes without an out-of-memory error.
 *
 * <p>A climb, then a bisection, between a capacity known (or taken) to fail and one known to run. The probes first
 * climb from the failing bound by a sixteenth of it (at least a step), doubling the climb each time, until one runs
 * or the next would reach the running bound; bisection then closes the bracket the climb left. Why climb first: the
 * callers' running bound (an unlimited run's peak reserved bytes) is often far above the answer, their failing
 * bound (its peak allocated bytes) close below it, and every probe above the answer replays the whole stream. On
 * the 276 MB demo snapshot the recommender's answers lie 0.3-19% above the failing bound, and under
 * {@code max_split_size_mb:128} the running bound is 62 GiB for an answer of 25 GiB (the unlimited run caches
 * oversize blocks it never has to give back); climbing first, its five searches replay 102 M ops instead of
 * 129 M, with the same answers. Where the answer lies near the running bound, the climb costs at most about twice
 * a bisection's probes.
 *
 * <p>Feasibility is usually monotone in capacity, but not always: at a smaller capacity an OOM's cache flush can
 * leave a layout that lets the rest of the run fit where a larger capacity, never flushed, fails (random streams
 * under {@code roundup_power2_divisions:4} show it, StreamRunnerTest). So the answer is a capacity that runs with
 * the one a step below failing, not necessarily the smallest that runs; it is a function of the bracket, and every
 * caller takes its bracket from one place ({@code StreamRunner.searchMinimum}) so that all paths give the same
 * answer. The climb changed one shared recording's answer so: {@code llama-offload-10-streams} under
 * {@code max_split_size_mb:512} fails at 20,010, 20,054 and 20,064 MiB and runs at 19,876, where the descent from
 * the top stopped at 20,066 MiB and the climb at 19,876.
 *
 * <p>Invariant: {@code hi} runs, {@code lo} does not (or is a floor no run can go below); each probe either ends the
 * climb as {@code hi}, or raises {@code lo}, or halves the gap, until they are one step apart.
 */
public final class MinimumCapacity {

    /** Granularity of the search: the device's allocation granularity (2 MiB). */
    public static final long STEP = 2L << 20;

    private MinimumCapacity() {}

    /**
     * The smallest capacity that runs, by a climb and a bisection between one that does not and one that does.
     *
     * @param failing        a multiple of {@link #STEP} that does not run (or a floor below which none can)
     * @param running        a multiple of {@link #STEP} that runs; when not above {@code failing} it is the answer
     *                       (no probe: {@code failing} is taken as one step below it)
     * @param runsWithoutOom whether a run at the given capacity completes
     * @return a multiple of {@link #STEP} in {@code (failing, running]} that runs, one step above one that does not
     *     (the smallest that runs where feasibility is monotone)
     */
    public static long search(long failing, long running, LongPredicate runsWithoutOom) {
        return search(failing, running, runsWithoutOom, null);
    }

    /**
     * {@link #search(long, long, LongPredicate)}, its probes asked through {@code ahead} when given (which may have
     * computed them ahead on idle workers, {@link ProbeLookahead}; the probes asked, and so the answer, are the same).
     */
    static long search(long failing, long running, LongPredicate runsWithoutOom, @Nullable ProbeLookahead ahead) {
        Bracket b = Bracket.of(failing, running);
        while (!b.closed()) {
            boolean runs = ahead != null ? ahead.answer(b) : runsWithoutOom.test(b.probe());
            b = b.after(runs);
        }
        return b.hi();
    }

    /**
     * One state of the search: the bracket {@code (lo, hi)} and, while it climbs, the climb from {@code base}
     * its next probe makes ({@code climb} 0 once it bisects). Its next probe and the states after each outcome are
     * all of the search's logic, so the probes it may ask form a binary tree that {@link ProbeLookahead} can lend
     * ahead without knowing how the search chooses them.
     */
    record Bracket(long base, long climb, long lo, long hi) {

        /** The search's first state over {@code (failing, running]}, climbing from {@code failing}. */
        static Bracket of(long failing, long running) {
            long lo = failing < running ? failing : running - STEP;
            return new Bracket(lo, Math.max(STEP, roundUp(lo / 16)), lo, running);
        }

        /** Whether the bracket is closed: {@code hi} is the answer, no probe left. */
        boolean closed() {
            return hi - lo <= STEP;
        }

        private boolean climbing() {
            return climb > 0 && base + climb < hi;
        }

        /** The capacity this state probes (the bracket must not be closed). */
        long probe() {
            return climbing() ? base + climb : midpoint(lo, hi);
        }

        /** The state after {@link #probe()} ran ({@code runs}) or failed. */
        Bracket after(boolean runs) {
            long p = probe();
            if (runs) {
                return new Bracket(base, 0, lo, p);
            }
            return new Bracket(base, climbing() ? climb << 1 : 0, p, hi);
        }
    }

    /** The probe of the bracket {@code (lo, hi)}, two multiples of {@link #STEP} more than a step apart. */
    static long midpoint(long lo, long hi) {
        return lo + (hi - lo) / STEP / 2 * STEP;
    }

    /** {@code bytes} rounded up to a multiple of {@link #STEP}. */
    public static long roundUp(long bytes) {
        return Math.ceilDiv(bytes, STEP) * STEP;
    }
}
