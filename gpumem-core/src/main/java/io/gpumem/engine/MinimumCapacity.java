package io.gpumem.engine;

import java.util.function.LongPredicate;
import org.jspecify.annotations.Nullable;

/**
 * The one minimum-capacity search of the what-if runs ({@link StreamRunner}, whatever the source of its stream): the smallest
 * device capacity, a multiple of {@link #STEP}, at which a run completes without an out-of-memory error.
 *
 * <p>Binary search between a capacity known (or taken) to fail and one known to run. Feasibility is usually
 * monotone in capacity, but not always: at a smaller capacity an OOM's cache flush can leave a layout that lets the
 * rest of the run fit where a larger capacity, never flushed, fails (random streams under
 * {@code roundup_power2_divisions:4} show it, StreamRunnerTest). So the answer is a capacity that runs with the one a
 * step below failing, not necessarily the smallest that runs; it is a function of the bracket, and every caller takes
 * its bracket from one place ({@code StreamRunner.searchMinimum}) so that all paths give the same answer.
 * Invariant: {@code hi} runs, {@code lo} does not (or is a floor no run can go below); each probe halves the gap
 * until they are one step apart.
 */
public final class MinimumCapacity {

    /** Granularity of the search: the device's allocation granularity (2 MiB). */
    public static final long STEP = 2L << 20;

    private MinimumCapacity() {}

    /**
     * The smallest capacity that runs, by bisection between one that does not and one that does.
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
        long lo = failing;
        long hi = running;
        if (lo >= hi) {
            lo = hi - STEP;
        }
        while (hi - lo > STEP) {
            long mid = midpoint(lo, hi);
            if (ahead != null ? ahead.answer(lo, mid, hi) : runsWithoutOom.test(mid)) {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        return hi;
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
