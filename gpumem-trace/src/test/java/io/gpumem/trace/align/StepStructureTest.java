package io.gpumem.trace.align;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.trace.TestTraces;
import io.gpumem.trace.io.TraceReaders;
import io.gpumem.trace.io.TraceSnapshot;
import java.util.Arrays;
import java.util.Random;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * Step detection on token sequences built to a plan: a loop repeated from the start, the same loop after a warm-up
 * (a set-up and a longer first step), warm-ups too long or repetitions too few to call a loop, and noise. The demo's
 * training workload, whose first step the optimizer lengthens, is {@code ByteCategoriesTest}'s.
 */
class StepStructureTest {

    /** {@code steps} copies of a step of {@code period} distinct tokens (100 + i), after {@code warmUp} others. */
    private static int[] loop(int warmUp, int period, int steps) {
        int[] t = new int[warmUp + period * steps];
        for (int i = 0; i < warmUp; i++) {
            t[i] = 10_000 + i;
        }
        for (int i = warmUp; i < t.length; i++) {
            t[i] = 100 + (i - warmUp) % period;
        }
        return t;
    }

    /** Allocated bytes rising through each step from 0 at its first request (the warm-up held higher). */
    private static long[] levels(int warmUp, int period, int length) {
        long[] level = new long[length];
        for (int i = 0; i < length; i++) {
            level[i] = i < warmUp ? 1L << 30 : 1024L * ((i - warmUp) % period);
        }
        return level;
    }

    @Test
    void aLoopFromTheStartIsFoundWithoutAWarmUp() {
        int[] t = loop(0, 37, 6);
        StepStructure s = StepStructure.detect(t, levels(0, 37, t.length));
        assertThat(s.period()).isEqualTo(37);
        assertThat(s.warmUp()).isZero();
        assertThat(s.coverage()).isEqualTo(1.0);
        assertThat(s.stepCount()).isEqualTo(6);
        for (int k = 0; k < 6; k++) {
            assertThat(s.stepStart(k)).isEqualTo(37 * k);
        }
    }

    @Test
    void aLoopAfterAWarmUpIsFoundAndTheWarmUpIsStepZero() {
        // a set-up of 30 requests and a first step 1.5 times as long as the 40 that follow it: 90 before the loop
        int warmUp = 90;
        int period = 40;
        int[] t = loop(warmUp, period, 9);
        StepStructure s = StepStructure.detect(t, levels(warmUp, period, t.length));
        assertThat(s.period()).isEqualTo(period);
        assertThat(s.warmUp()).isEqualTo(warmUp);
        assertThat(s.coverage()).isEqualTo(1.0);
        assertThat(s.stepCount()).as("the warm-up, then 9 steps").isEqualTo(10);
        assertThat(s.stepStart(0)).isZero();
        for (int k = 1; k < s.stepCount(); k++) {
            assertThat(s.stepStart(k)).as("step %d", k).isEqualTo(warmUp + (k - 1) * period);
        }
        assertThat(s.stepOf(warmUp - 1)).isZero();
        assertThat(s.stepOf(warmUp)).isEqualTo(1);
        assertThat(s.positionInStep(warmUp + 3 * period + 7)).isEqualTo(7);
    }

    /**
     * Tokens of {@code steps} steps of {@code period} (100 + position), after {@code warmUp} set-up tokens, cut to
     * {@code length}, with one extra token (99) after position 20 of step {@code extraIn} (-1: none); the level is 0
     * at each step's {@code low}-th request and a MiB or more elsewhere.
     */
    private static StepStructure detect(int warmUp, int period, int steps, int extraIn, int low, int length) {
        return detect(warmUp, period, steps, extraIn, 1, low, length);
    }

    /**
     * As above, with step {@code changedStep} longer by {@code change} requests (extra tokens 99 after position 20)
     * or shorter by {@code -change} (positions from 20 left out); {@code length} -1 for the whole.
     */
    private static StepStructure detect(
            int warmUp, int period, int steps, int changedStep, int change, int low, int length) {
        int[] t = new int[warmUp + period * steps + Math.max(0, change)];
        long[] level = new long[t.length];
        int i = 0;
        for (; i < warmUp; i++) {
            t[i] = 10_000 + i;
            level[i] = 1L << 30;
        }
        for (int k = 0; k < steps; k++) {
            for (int pos = 0; pos < period; pos++) {
                if (k == changedStep && change < 0 && pos >= 20 && pos < 20 - change) {
                    continue;
                }
                t[i] = 100 + pos;
                level[i++] = pos == low ? 0 : (1L << 20) + 1024L * Math.floorMod(pos - low, period);
                for (int e = 0; k == changedStep && pos == 20 && e < change; e++, i++) {
                    t[i] = 99;
                    level[i] = level[i - 1];
                }
            }
        }
        int n = length < 0 ? i : length;
        return StepStructure.detect(Arrays.copyOf(t, n), Arrays.copyOf(level, n));
    }

    private static int[] starts(StepStructure s) {
        int[] out = new int[s.stepCount()];
        Arrays.setAll(out, s::stepStart);
        return out;
    }

    @Test
    void aRequestInOneStepOnlyDoesNotShiftTheLaterBoundaries() {
        StepStructure s = detect(0, 40, 12, 8, 0, 481);
        assertThat(s.period()).isEqualTo(40);
        assertThat(s.warmUp()).isZero();
        assertThat(starts(s)).containsExactly(0, 40, 80, 120, 160, 200, 240, 280, 320, 361, 401, 441);
        assertThat(s.positionInStep(361 + 5)).isEqualTo(5);
        assertThat(s.positionInStep(360))
                .as("the extra request is its step's 41st")
                .isEqualTo(40);
    }

    @Test
    void stepsStartWhereLeastIsAllocatedAndThePartialFirstStepCountsBack() {
        StepStructure s = detect(0, 40, 6, -1, 7, 240);
        assertThat(starts(s)).containsExactly(0, 7, 47, 87, 127, 167, 207);
        assertThat(s.repeats()).isTrue();
        assertThat(s.stepOf(6)).isZero();
        assertThat(s.stepOf(7)).isEqualTo(1);
        assertThat(s.stepOf(239)).isEqualTo(6);
        assertThat(s.positionInStep(3)).as("counted back from step 1's start").isEqualTo(3 - 7 + 40);
        assertThat(s.positionInStep(50)).isEqualTo(3);
    }

    @Test
    void aWindowEndingInsideAStepEndsWithThatPartialStep() {
        assertThat(starts(detect(0, 40, 6, -1, 0, 210))).containsExactly(0, 40, 80, 120, 160, 200);
        assertThat(starts(detect(0, 40, 6, -1, 0, 200))).containsExactly(0, 40, 80, 120, 160);
    }

    @Test
    void afterAWarmUpTheBoundariesAreFoundFromTheEndAcrossARequestInOneStepOnly() {
        StepStructure s = detect(90, 40, 15, 5, 0, 90 + 15 * 40 + 1);
        assertThat(s.period()).isEqualTo(40);
        assertThat(s.warmUp()).isEqualTo(90);
        assertThat(starts(s))
                .containsExactly(0, 90, 130, 170, 210, 250, 290, 331, 371, 411, 451, 491, 531, 571, 611, 651);

        StepStructure cut = detect(90, 40, 9, -1, 0, 90 + 8 * 40 + 10);
        assertThat(starts(cut)).containsExactly(0, 90, 130, 170, 210, 250, 290, 330, 370, 410);
        StepStructure lowInside = detect(90, 40, 9, -1, 13, 90 + 9 * 40);
        assertThat(lowInside.warmUp()).isEqualTo(103);
        assertThat(starts(lowInside)).containsExactly(0, 103, 143, 183, 223, 263, 303, 343, 383, 423);
    }

    /**
     * A step longer or shorter than the period: the next boundary snaps to the step's first token when it lies within
     * a quarter period (10 of 40) of one period on, whichever way; beyond that it is placed exactly one period on (what
     * the class comment promises, no more). The changed step lies where the phase's levels are not: late for the walk
     * from the start, early for the walk from the end.
     */
    @Test
    void aBoundarySnapsToItsTokenWithinAQuarterPeriodEitherWay() {
        for (int change : new int[] {-10, -1, 1, 10}) {
            StepStructure s = detect(0, 40, 24, 18, change, 0, -1);
            assertThat(s.period()).as("change %d", change).isEqualTo(40);
            for (int k = 0; k < s.stepCount(); k++) {
                int expected = k <= 18 ? 40 * k : 40 * k + change;
                assertThat(s.stepStart(k)).as("change %d, step %d", change, k).isEqualTo(expected);
            }
        }
        StepStructure beyond = detect(0, 40, 24, 18, 11, 0, -1);
        assertThat(beyond.stepStart(19)).as("11 late: one period on").isEqualTo(760);
        assertThat(beyond.stepStart(20)).isEqualTo(800);
        StepStructure early = detect(0, 40, 24, 18, -11, 0, -1);
        assertThat(early.stepStart(19)).as("11 early: one period on").isEqualTo(760);

        for (int change : new int[] {-10, -1, 1, 10}) {
            // found from the end: the changed step early, the later half as the phase's
            StepStructure s = detect(90, 40, 24, 3, change, 0, -1);
            assertThat(s.warmUp()).as("warm-up, change %d", change).isEqualTo(90);
            for (int k = 1; k < s.stepCount(); k++) {
                int expected = 90 + 40 * (k - 1) + (k - 1 <= 3 ? 0 : change);
                assertThat(s.stepStart(k))
                        .as("warm-up, change %d, step %d", change, k)
                        .isEqualTo(expected);
            }
        }
    }

    /** The coverage is reached at exactly 90% of the span; and two periods are the shortest window that repeats. */
    @Test
    void theCoverageBoundHoldsAtNinetyPercentAndTwoPeriodsRepeat() {
        int[] t = loop(0, 40, 4);
        t = Arrays.copyOf(t, 140); // span for 40: 100 requests
        int[] tenOff = t.clone();
        int[] elevenOff = t.clone();
        for (int i = 100; i < 111; i++) {
            elevenOff[i] = 50_000 + i; // compared once each, as request i - 40's partner
            if (i < 110) {
                tenOff[i] = 50_000 + i;
            }
        }
        StepStructure ten = StepStructure.detect(tenOff, new long[140]);
        assertThat(ten.period()).isEqualTo(40);
        assertThat(ten.coverage()).isEqualTo(0.9);
        assertThat(StepStructure.detect(elevenOff, new long[140]).repeats()).isFalse();

        int[] two = loop(0, 40, 2);
        StepStructure twice = StepStructure.detect(two, levels(0, 40, two.length));
        assertThat(twice.period()).isEqualTo(40);
        assertThat(twice.stepCount()).isEqualTo(2);
    }

    @Test
    void tokensAndLevelsOfDifferentLengthsAreRefused() {
        assertThatThrownBy(() -> StepStructure.detect(new int[3], new long[2]))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("tokens and levels differ in length: 3 vs 2");
    }

    /**
     * The warm-up may take a third of the window and must leave two periods after it. Its start is the earliest
     * request from which the coverage holds, so a tenth of what follows may still be warm-up: the cases sit clear of
     * the bounds.
     */
    @Test
    void aWarmUpOfHalfTheWindowOrLessThanTwoStepsAfterItIsNoLoop() {
        int[] third = loop(80, 40, 4);
        assertThat(StepStructure.detect(third, levels(80, 40, third.length)).period())
                .isEqualTo(40);
        int[] half = loop(160, 40, 4);
        StepStructure one = StepStructure.detect(half, levels(160, 40, half.length));
        assertThat(one.period()).isEqualTo(half.length);
        assertThat(one.stepCount()).isEqualTo(1);
        assertThat(one.warmUp()).isZero();
        assertThat(one.repeats()).isFalse();

        int[] twoSteps = loop(20, 40, 2);
        StepStructure two = StepStructure.detect(twoSteps, levels(20, 40, twoSteps.length));
        assertThat(two.period())
                .as("two steps after the warm-up are the least that can repeat")
                .isEqualTo(40);
        assertThat(two.stepCount()).isEqualTo(3);
        int[] stepAndAHalf = Arrays.copyOf(loop(20, 40, 2), 20 + 40 + 20);
        assertThat(StepStructure.detect(stepAndAHalf, levels(20, 40, stepAndAHalf.length))
                        .repeats())
                .isFalse();
    }

    @Test
    void noiseRepeatsNothing() {
        long seed = Long.getLong("gpumem.seed", System.nanoTime());
        System.out.println("StepStructureTest seed " + seed);
        Random rnd = new Random(seed);
        int[] t = new int[600];
        Arrays.setAll(t, i -> rnd.nextInt(1 << 20));
        StepStructure s = StepStructure.detect(t, new long[t.length]);
        assertThat(s.repeats()).as("seed %d", seed).isFalse();
        assertThat(s.warmUp()).isZero();
    }

    /**
     * A recorded warm-up: device 2 of the GNN recording sets up for 74 requests, then repeats a step of 106 three
     * times (the window ends inside the third). Over the whole window that is 74% coverage, so it was one step.
     */
    @Test
    void theGnnRecordingsThirdDeviceRepeatsAfterItsSetUp() {
        TraceSnapshot gnn = TraceReaders.read(TestTraces.file("gnn-train-expandable-oom.pickle"));
        StepStructure s = StepStructure.of(RequestSequence.of(gnn, 2, new FrameSignatures()));
        assertThat(s.period()).isEqualTo(106);
        assertThat(s.warmUp()).isEqualTo(74);
        assertThat(s.coverage()).isEqualTo(1.0);
        assertThat(s.stepCount()).isEqualTo(4);
        assertThat(new int[] {s.stepStart(1), s.stepStart(2), s.stepStart(3)}).containsExactly(74, 180, 286);
    }

    @Test
    void aPeriodsScanStopsOnlyOnceItsCountCannotReachWhatIsNeeded() {
        long seed = new SplittableRandom().nextLong();
        System.out.println("StepStructureTest seed=" + seed);
        SplittableRandom rnd = new SplittableRandom(seed);
        for (int trial = 0; trial < 2_000; trial++) {
            int n = 2 + rnd.nextInt(300);
            int[] tokens = new int[n];
            int alphabet = 1 + rnd.nextInt(4); // few tokens: counts near every threshold
            for (int i = 0; i < n; i++) {
                tokens[i] = rnd.nextInt(alphabet);
            }
            int p = 1 + rnd.nextInt(n - 1);
            int span = n - p;
            int from = rnd.nextInt(span + 1);
            int exact = 0;
            for (int i = from; i < span; i++) {
                exact += tokens[i] == tokens[i + p] ? 1 : 0;
            }
            double needed = rnd.nextDouble() * (span - from + 1);
            int got = StepStructure.equalAPeriodOn(tokens, p, from, span, needed);
            if (exact >= needed) {
                assertThat(got)
                        .as("seed %d, trial %d: a count that reaches %s is exact", seed, trial, needed)
                        .isEqualTo(exact);
            } else {
                assertThat(got)
                        .as("seed %d, trial %d: a count short of %s stays short", seed, trial, needed)
                        .isLessThan((int) Math.ceil(needed))
                        .isLessThanOrEqualTo(exact);
            }
            assertThat(StepStructure.equalAPeriodOn(tokens, p, from, span, 0)).isEqualTo(exact);
        }
    }
}
