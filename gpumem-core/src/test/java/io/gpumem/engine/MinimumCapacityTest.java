package io.gpumem.engine;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.engine.MinimumCapacity.Verdict;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The one minimum-capacity search: a climb from the failing bound, then a bisection that weighs what failures cost,
 * probing only inside the gap.
 */
class MinimumCapacityTest {
    private static final long STEP = MinimumCapacity.STEP;

    @Test
    void findsEveryThresholdBetweenTheBoundsWithLogarithmicallyManyProbes() {
        long failing = 3 * STEP;
        long running = 40 * STEP;
        for (long threshold = failing + STEP; threshold <= running; threshold += STEP) {
            long t = threshold;
            List<Long> probes = new ArrayList<>();
            long found = MinimumCapacity.search(failing, running, c -> {
                probes.add(c);
                return c >= t;
            });
            assertThat(found).as("threshold %d", t).isEqualTo(t);
            // an exponential search: climbing to the first probe at or above the threshold takes k + 1 probes,
            // where 2^k steps reach it, and the bisection below it k - 1 more; never more than twice the
            // ceil(log2(37)) = 6 probes a bisection of the whole gap takes
            int k = 64 - Long.numberOfLeadingZeros((t - failing) / STEP - 1);
            assertThat(probes).as("probes for threshold %d", t).hasSizeLessThanOrEqualTo(Math.max(1, 2 * k));
            assertThat(probes).as("probes for threshold %d", t).hasSizeLessThanOrEqualTo(12);
            assertThat(probes).allSatisfy(c -> {
                assertThat(c % STEP).isZero();
                assertThat(c).isGreaterThan(failing).isLessThan(running);
            });
            assertThat(probes).doesNotHaveDuplicates();
        }
    }

    /**
     * The climb starts a sixteenth of the failing bound above it: an answer there, far below a running bound 2.5
     * times as high (a search under {@code max_split_size_mb}), costs one probe to bracket instead of a bisection's
     * descent from the top.
     */
    @Test
    void climbsFromTheFailingBoundInSixteenthsOfItDoublingEachTime() {
        long failing = 1600 * STEP;
        long running = 4000 * STEP;
        List<Long> probes = new ArrayList<>();
        long found = MinimumCapacity.search(failing, running, c -> {
            probes.add(c);
            return c >= 1750 * STEP;
        });
        assertThat(found).isEqualTo(1750 * STEP);
        // 1700 fails, 1800 runs, then a bisection of (1700, 1800]: 7 probes
        assertThat(probes.subList(0, 2)).containsExactly(1700 * STEP, 1800 * STEP);
        assertThat(probes).hasSize(2 + 7);
        List<Long> plain = new ArrayList<>();
        found = MinimumCapacity.search(failing, running, c -> {
            plain.add(c);
            return c >= 3900 * STEP;
        });
        assertThat(found).isEqualTo(3900 * STEP);
        // climbs of 100, 200, 400, 800, 1600 steps fail; 3200 would pass the running bound: bisect (3200, 4000]
        assertThat(plain.subList(0, 5))
                .containsExactly(1700 * STEP, 1800 * STEP, 2000 * STEP, 2400 * STEP, 3200 * STEP);
        assertThat(plain.get(5)).isEqualTo(3600 * STEP);
    }

    @Test
    void boundsOneStepApartNeedNoProbe() {
        assertThat(MinimumCapacity.search(4 * STEP, 5 * STEP, c -> {
                    throw new AssertionError("probed " + c);
                }))
                .isEqualTo(5 * STEP);
    }

    @Test
    void aRunningBoundNotAboveTheFailingOneIsTheAnswer() {
        assertThat(MinimumCapacity.search(9 * STEP, 9 * STEP, c -> {
                    throw new AssertionError("probed " + c);
                }))
                .isEqualTo(9 * STEP);
        assertThat(MinimumCapacity.search(9 * STEP, 4 * STEP, c -> {
                    throw new AssertionError("probed " + c);
                }))
                .isEqualTo(4 * STEP);
    }

    @Test
    void roundsUpToWholeSteps() {
        assertThat(MinimumCapacity.roundUp(0)).isZero();
        assertThat(MinimumCapacity.roundUp(1)).isEqualTo(STEP);
        assertThat(MinimumCapacity.roundUp(STEP)).isEqualTo(STEP);
        assertThat(MinimumCapacity.roundUp(STEP + 1)).isEqualTo(2 * STEP);
        assertThat(MinimumCapacity.roundUp(7 * STEP - 1)).isEqualTo(7 * STEP);
    }

    /**
     * Cheap failures split the gap low: on every threshold of a wide gap the search finds what the bisection finds,
     * and its probes cost less in all (a run 1, a failure its share) — in total and on average, where the bisection
     * makes as many runs as failures. Failures that cost as much as runs give the bisection's very probes.
     */
    @Test
    void weighsCheapFailuresAndFindsTheSameThresholds() {
        long failing = 100 * STEP;
        long running = 1100 * STEP;
        double weighedCost = 0;
        double bisectionCost = 0;
        for (long t = failing + STEP; t <= running; t += 7 * STEP) {
            long threshold = t;
            List<Long> bisection = new ArrayList<>();
            double[] costs = new double[2];
            long plain = MinimumCapacity.search(
                    failing,
                    running,
                    c -> {
                        bisection.add(c);
                        costs[0] += c >= threshold ? 1 : 0.01;
                        return c >= threshold ? Verdict.RUNS : Verdict.FAILS;
                    },
                    null);
            List<Long> asFails = new ArrayList<>();
            MinimumCapacity.search(
                    failing,
                    running,
                    c -> {
                        asFails.add(c);
                        return c >= threshold ? Verdict.RUNS : new Verdict(false, 1);
                    },
                    null);
            assertThat(asFails).as("failures as dear as runs: the bisection").isEqualTo(bisection);
            long weighed = MinimumCapacity.search(
                    failing,
                    running,
                    c -> {
                        assertThat(c % STEP).isZero();
                        assertThat(c).isGreaterThan(failing).isLessThan(running);
                        costs[1] += c >= threshold ? 1 : 0.01;
                        return c >= threshold ? Verdict.RUNS : Verdict.failsAfter(1, 100);
                    },
                    null);
            assertThat(weighed).as("threshold %d", threshold).isEqualTo(plain).isEqualTo(threshold);
            bisectionCost += costs[0];
            weighedCost += costs[1];
        }
        assertThat(weighedCost).as("cost of the weighed searches").isLessThan(0.7 * bisectionCost);
    }

    @Test
    void picksTheMidpointForDearFailuresAndAnEighthForCheapOnes() {
        assertThat(MinimumCapacity.divisorFor(1)).isEqualTo(2);
        assertThat(MinimumCapacity.divisorFor(0.7)).isEqualTo(2);
        assertThat(MinimumCapacity.divisorFor(0.4)).isEqualTo(3);
        assertThat(MinimumCapacity.divisorFor(0.2)).isEqualTo(4);
        assertThat(MinimumCapacity.divisorFor(0.001)).isEqualTo(8);
        for (double share = 0.001; share <= 1; share += 0.001) {
            assertThat(MinimumCapacity.divisorFor(share))
                    .as("share %f", share)
                    .isLessThanOrEqualTo(MinimumCapacity.divisorFor(share / 2));
        }
        // at least a step above the failing bound, below the running one
        assertThat(MinimumCapacity.split(0, 3 * STEP, 0.001)).isEqualTo(STEP);
        assertThat(MinimumCapacity.split(0, 800 * STEP, 0.001)).isEqualTo(100 * STEP);
        assertThat(MinimumCapacity.split(0, 800 * STEP, 1)).isEqualTo(400 * STEP);
    }

    @Test
    void aVerdictsShareIsAPartOfARun() {
        assertThat(Verdict.failsAfter(5, 10).share()).isEqualTo(0.5);
        assertThat(Verdict.failsAfter(0, 10).share()).as("at least one op").isEqualTo(0.1);
        assertThat(Verdict.failsAfter(20, 10).share()).as("at most a run").isEqualTo(1);
        assertThat(Verdict.failsAfter(1, Long.MAX_VALUE).share()).isPositive();
        assertThatThrownBy(() -> new Verdict(false, 0)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> new Verdict(false, Double.NaN)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> new Verdict(true, 1.5)).isInstanceOf(IllegalArgumentException.class);
    }
}
