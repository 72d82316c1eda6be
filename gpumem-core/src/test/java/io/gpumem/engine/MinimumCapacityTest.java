package io.gpumem.engine;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The one minimum-capacity search: a climb from the failing bound, then a bisection, probing only inside the gap. */
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
}
