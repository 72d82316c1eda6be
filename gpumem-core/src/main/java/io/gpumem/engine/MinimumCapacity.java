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
 * <p>The bisection weighs what its probes cost. A probe that runs replays the stream to its end; one that fails
 * stops at its first failure, which on a training recording whose peak comes in its first step is often within the
 * first few percent of the stream (the demo snapshot's failures under {@code max_split_size_mb:256} cost 0.4-4% of a
 * run). Each probe reports that share ({@link Verdict}: the ops up to its first failure over the stream's), and the
 * next probe is put where the expected cost per bit learnt is least: at {@code q = 1/d} of the gap above {@code lo}
 * ({@link #DIVISORS}), running with chance q (cost 1) and failing otherwise (cost: the share the last failure cost),
 * learning the entropy of that outcome. Failures as dear as
 * runs give the midpoint, the plain bisection; cheap ones split low, trading a few cheap failures for the runs a
 * midpoint would have made. The demo snapshot's five searches replay 87 M ops instead of 102 M. The share is a
 * function of the capacity alone (replays are deterministic, and it is counted from the stream's start, not from
 * whichever checkpoint a probe happened to be forked from), so the probes asked, and the answer, depend neither on
 * threads and timing nor on whether prefixes are reused; every shared trace's answers are the same as the
 * bisection's.
 *
 * <p>Feasibility is usually monotone in capacity, but not always: at a smaller capacity an OOM's cache flush can
 * leave a layout that lets the rest of the run fit where a larger capacity, never flushed, fails (random streams
 * show it under the default configuration as under {@code roundup_power2_divisions:4}, StreamRunnerTest). So the answer is a capacity that runs with
 * the one a step below failing, not necessarily the smallest that runs; it is a function of the bracket, and every
 * caller takes its bracket from one place ({@code StreamRunner.searchMinimum}) so that all paths give the same
 * answer. The climb changed one shared recording's answer so: {@code llama-offload-10-streams} under
 * {@code max_split_size_mb:512} fails at 20,010, 20,054 and 20,064 MiB and runs at 19,876, where the descent from
 * the top stopped at 20,066 MiB and the climb at 19,876.
 *
 * <p>Invariant: {@code hi} runs, {@code lo} does not (or is a floor no run can go below); each probe either ends the
 * climb as {@code hi}, or raises {@code lo}, or narrows the gap by at least an eighth of it and a step, until they are
 * one step apart.
 */
public final class MinimumCapacity {

    /** Granularity of the search: the device's allocation granularity (2 MiB). */
    public static final long STEP = 2L << 20;

    /**
     * The largest capacity a search tries (1 EiB): PyTorch refuses any single request of 1 EB or more on every device,
     * no device comes near it, and doubling a capacity past it would overflow.
     */
    public static final long LARGEST = 1L << 60;

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
        return search(failing, running, c -> Verdict.of(runsWithoutOom.test(c)), null);
    }

    /**
     * {@link #search(long, long, LongPredicate)} with probes that say what a failure cost ({@link Verdict}), which
     * the bisection weighs (see the class comment), asked through {@code ahead} when given (which may have computed
     * them ahead on idle workers, {@link ProbeLookahead}; the probes asked, and so the answer, are the same).
     */
    static long search(long failing, long running, Prober probe, @Nullable ProbeLookahead ahead) {
        Bracket b = Bracket.of(failing, running);
        while (!b.closed()) {
            Verdict v = ahead != null ? ahead.answer(b) : probe.probe(b.probe());
            b = b.after(v);
        }
        return b.hi();
    }

    /** A probe of the search: what a run at a capacity found. */
    @FunctionalInterface
    interface Prober {
        Verdict probe(long capacity);
    }

    /**
     * What one probe found: whether the run completed and, where it failed, what the failure cost against a run that
     * completes ({@code share}: the ops up to the first failure over the stream's, in (0, 1]; 1 for a run that
     * completes, and for a failure whose cost is not known). A function of the capacity alone, like the outcome:
     * replays are deterministic, and the share is counted from the stream's start, not from wherever a probe happened
     * to be forked from.
     */
    record Verdict(boolean runs, double share) {
        static final Verdict RUNS = new Verdict(true, 1);
        /** A failure whose cost is not known: taken as a full run's, which leaves the search a bisection. */
        static final Verdict FAILS = new Verdict(false, 1);

        Verdict {
            if (!(share > 0 && share <= 1)) {
                throw new IllegalArgumentException("a probe's share is in (0, 1], not " + share);
            }
        }

        static Verdict of(boolean runs) {
            return runs ? RUNS : FAILS;
        }

        /**
         * The verdict of a run of a stream of {@code ops} ops that first failed at op {@code failedOp}, −1 where it
         * ran; its cost counted from the stream's start, as a full replay's would be.
         */
        static Verdict ofRun(int failedOp, long ops) {
            return failedOp < 0 ? RUNS : failsAfter(failedOp + 1L, ops);
        }

        /** A failure after {@code replayed} of the {@code full} ops a completing run replays (both counted alike). */
        static Verdict failsAfter(long replayed, long full) {
            return new Verdict(false, Math.clamp((double) Math.max(1, replayed) / Math.max(1, full), 0x1p-20, 1));
        }
    }

    /**
     * One state of the search: the bracket {@code (lo, hi)}; while it climbs, the climb from {@code base} its next
     * probe makes ({@code climb} 0 once it bisects); and the share of a full run that the last failing probe cost
     * ({@code failShare}, 1 until one reports less). Its next probe and the states after each verdict are all of the
     * search's logic, so the probes it may ask form a tree that {@link ProbeLookahead} can lend ahead without knowing
     * how the search chooses them ({@link #after(boolean)}: its guess of the state after each outcome).
     */
    record Bracket(long base, long climb, long lo, long hi, double failShare) {

        /** The search's first state over {@code (failing, running]}, climbing from {@code failing}. */
        static Bracket of(long failing, long running) {
            long lo = failing < running ? failing : running - STEP;
            return new Bracket(lo, Math.max(STEP, roundUp(lo / 16)), lo, running, 1);
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
            return climbing() ? base + climb : split(lo, hi, failShare);
        }

        /** The state after {@link #probe()} gave {@code verdict}. */
        Bracket after(Verdict verdict) {
            long p = probe();
            if (verdict.runs()) {
                return new Bracket(base, 0, lo, p, failShare);
            }
            return new Bracket(base, climbing() ? climb << 1 : 0, p, hi, verdict.share());
        }

        /**
         * The state after {@link #probe()} ran or failed, a failure taken to cost what the last one did: exactly
         * {@link #after(Verdict)} for a run, a guess for a failure (for lending probes ahead; a wrong guess costs a
         * probe lent in vain, never a different answer).
         */
        Bracket after(boolean runs) {
            return after(runs ? Verdict.RUNS : new Verdict(false, failShare));
        }
    }

    /**
     * The probe of the bracket {@code (lo, hi)}, two multiples of {@link #STEP} more than a step apart, when a failing
     * probe costs {@code failShare} of a running one: the point a {@link #DIVISORS divisor} of the gap above
     * {@code lo}, the one with the least expected cost per bit of the answer learnt (see the class comment); the
     * midpoint when failures cost as much as runs.
     */
    static long split(long lo, long hi, double failShare) {
        return lo + Math.max(1, (hi - lo) / STEP / divisorFor(failShare)) * STEP;
    }

    /**
     * Where the bisection may split its gap: a {@code 1/d} of it above the failing bound. Finer splits saved nothing
     * more on the demo snapshot (down to a sixteenth: 87.2 M ops against 86.7 M).
     */
    static final int[] DIVISORS = {2, 3, 4, 6, 8};

    /**
     * Per divisor, the information (in nats) a probe at {@code 1/d} of the gap yields on an answer spread evenly over
     * it: the entropy of its outcome. Computed with {@link StrictMath} so that every JVM picks the same divisors.
     */
    private static final double[] INFORMATION = new double[DIVISORS.length];

    static {
        for (int i = 0; i < DIVISORS.length; i++) {
            double q = 1.0 / DIVISORS[i];
            INFORMATION[i] = -(q * StrictMath.log(q) + (1 - q) * StrictMath.log(1 - q));
        }
    }

    /**
     * The divisor whose probe costs least per nat learnt, a probe at {@code q = 1/d} running with chance q (cost 1)
     * and failing otherwise (cost {@code failShare}); the larger share on a tie, so a failure that costs as much as a
     * run gives the midpoint.
     */
    static int divisorFor(double failShare) {
        int best = 0;
        double bestCost = Double.MAX_VALUE;
        for (int i = 0; i < DIVISORS.length; i++) {
            double q = 1.0 / DIVISORS[i];
            double cost = (q + (1 - q) * failShare) / INFORMATION[i];
            if (cost < bestCost) {
                bestCost = cost;
                best = i;
            }
        }
        return DIVISORS[best];
    }

    /** {@code bytes} rounded up to a multiple of {@link #STEP}. */
    public static long roundUp(long bytes) {
        return Math.ceilDiv(bytes, STEP) * STEP;
    }
}
