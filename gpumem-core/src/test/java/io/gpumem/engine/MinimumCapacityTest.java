package io.gpumem.engine;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The one minimum-capacity search: a bisection on multiples of the step, probing only inside the open gap. */
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
            // 37 steps apart: at most ceil(log2(37)) = 6 probes, each a multiple of the step strictly between the
            // bounds
            assertThat(probes).as("probes for threshold %d", t).hasSizeLessThanOrEqualTo(6);
            assertThat(probes).allSatisfy(c -> {
                assertThat(c % STEP).isZero();
                assertThat(c).isGreaterThan(failing).isLessThan(running);
            });
            assertThat(probes).doesNotHaveDuplicates();
        }
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
