package io.gpumem.trace.align;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.history.Frame;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.policy.PolicySpec;
import io.gpumem.trace.align.SyntheticAlignmentTest.Op;
import io.gpumem.trace.io.SourceFormat;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.replay.DeviceFidelity;
import io.gpumem.trace.replay.FidelityReport;
import io.gpumem.trace.replay.OracleReplay;
import io.gpumem.trace.replay.WhatIfReplay;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.function.Predicate;
import org.junit.jupiter.api.Test;

/**
 * {@code gpumem predict} on generated programs whose size laws are known ({@link SyntheticAlignmentTest}'s seeded
 * programs, no shared trace needed): a family of recordings at two or three values predicts, at a value never run,
 * the requests the program makes there; the predicted recording replays exactly; the family picks its reference and
 * refuses what cannot be a family; and the "which value fits" search agrees with a scan of every value.
 */
class SyntheticPredictionTest {

    private static final int STEPS = 4;

    private static long seed() {
        long seed = Long.getLong("gpumem.seed", System.nanoTime()); // -Dgpumem.seed=N replays a run
        System.out.println("SyntheticPredictionTest seed " + seed);
        return seed;
    }

    private static RecordingFamily family(List<Op> program, long... values) {
        List<TraceSnapshot> runs = new ArrayList<>();
        for (long x : values) {
            runs.add(SyntheticAlignmentTest.run(program, x, STEPS, true, false));
        }
        return RecordingFamily.of(runs, values);
    }

    private static List<Long> allocSizes(TraceSnapshot t) {
        List<Long> sizes = new ArrayList<>();
        for (TraceEntry e : t.traceOf(0)) {
            if (e.action() == TraceAction.ALLOC) {
                sizes.add(e.size());
            }
        }
        return sizes;
    }

    @Test
    void aFamilyReadOnAChosenDevicePredictsThatDevicesProgram() {
        long seed = seed();
        Random random = new Random(seed);
        List<Op> program = SyntheticAlignmentTest.program(random, 10 + random.nextInt(10));
        List<Op> busier = SyntheticAlignmentTest.program(random, 40);
        List<TraceSnapshot> runs = new ArrayList<>();
        long[] values = {128, 256};
        for (long x : values) {
            // device 0 runs the busier program, device 1 the one asked about
            TraceSnapshot zero = SyntheticAlignmentTest.run(busier, x, STEPS, true, false);
            TraceSnapshot one = SyntheticAlignmentTest.run(program, x, STEPS, true, false);
            List<SegmentInfo> segments = new ArrayList<>(zero.segments());
            one.segments().forEach(seg -> segments.add(seg.onDevice(1)));
            runs.add(new TraceSnapshot(
                    "two devices @" + x,
                    SourceFormat.PYTORCH_SNAPSHOT,
                    segments,
                    List.of(zero.traceOf(0), one.traceOf(0)),
                    null,
                    null,
                    Map.of(),
                    true));
        }
        assertThat(RecordingFamily.of(runs, values).recording(0).device())
                .as("seed %d: the busiest by default", seed)
                .isZero();
        RecordingFamily family = RecordingFamily.of(runs, values, 1);
        assertThat(family.recording(0).device()).isEqualTo(1);
        assertThat(family.recording(1).device()).isEqualTo(1);
        List<Long> sizes = allocSizes(family.predict(512).trace());
        assertThat(sizes).as("seed %d", seed).hasSize(STEPS * program.size());
        for (int i = 0; i < sizes.size(); i++) {
            assertThat(sizes.get(i))
                    .as("seed %d, request %d", seed, i)
                    .isEqualTo(program.get(i % program.size()).size(512));
        }
    }

    @Test
    void aValueNeverRunGetsEachRequestAtItsOpsOwnLawAndReplaysExactly() {
        long seed = seed();
        List<Op> program = SyntheticAlignmentTest.program(new Random(seed), 20 + new Random(seed).nextInt(30));
        RecordingFamily family = family(program, 128, 256);
        PredictedRecording p = family.predict(512);

        assertThat(p.at()).isEqualTo(512);
        assertThat(p.unpredictedRequests()).as("seed %d", seed).isZero();
        List<Long> sizes = allocSizes(p.trace());
        assertThat(sizes).as("seed %d: one request per op and step", seed).hasSize(STEPS * program.size());
        assertThat(p.predictedRequests()).isEqualTo(sizes.size());
        for (int i = 0; i < sizes.size(); i++) {
            Op o = program.get(i % program.size());
            assertThat(sizes.get(i)).as("seed %d, request %d", seed, i).isEqualTo(o.size(512));
        }
        assertThat(p.warmUpPasses())
                .as("a window recorded from the start (nothing reserved) starts cold")
                .isZero();

        FidelityReport check = new OracleReplay().check(p.trace());
        DeviceFidelity d = check.devices().getFirst();
        assertThat(d.allocs()).isEqualTo(sizes.size());
        assertThat(d.isExact())
                .as("seed %d: every address and driver call the allocator's own: %s", seed, d)
                .isTrue();
        assertThat(d.endSegments()).isPositive();
    }

    @Test
    void aRecordedValueIsPredictedAsRecorded() {
        long seed = seed();
        List<Op> program = SyntheticAlignmentTest.program(new Random(seed), 24);
        RecordingFamily family = family(program, 100, 200, 300);
        for (int j = 0; j < family.size(); j++) {
            long x = family.label(j);
            assertThat(allocSizes(family.predict(x).trace()))
                    .as("seed %d at %d", seed, x)
                    .isEqualTo(allocSizes(family.trace(j)));
        }
        RecordingFamily others = family.without(1);
        assertThat(others.size()).isEqualTo(2);
        assertThat(new long[] {others.label(0), others.label(1)}).containsExactly(100, 300);
        assertThat(allocSizes(others.predict(200).trace()))
                .as("seed %d: 200 from 100 and 300", seed)
                .isEqualTo(allocSizes(family.trace(1)));
    }

    @Test
    void theReferenceIsTheNearestRecordingAndTheLargerOnATie() {
        List<Op> program = SyntheticAlignmentTest.program(new Random(7), 16);
        RecordingFamily family = family(program, 200, 100, 400);
        assertThat(family.nearest(0)).isEqualTo(1);
        assertThat(family.nearest(149)).isEqualTo(1);
        assertThat(family.nearest(150)).as("a tie goes to the larger").isZero();
        assertThat(family.nearest(300)).as("a tie goes to the larger").isEqualTo(2);
        assertThat(family.nearest(299)).isZero();
        assertThat(family.nearest(1L << 40)).isEqualTo(2);
        assertThat(family.largestLabel()).isEqualTo(400);
        assertThat(family.lawsFor(299)).as("laws are fitted once per reference").isSameAs(family.lawsFor(201));
        assertThat(family.lawsFor(299).labels()[0]).isEqualTo(200);
        assertThat(family.lawsFor(350).labels()[0]).isEqualTo(400);
    }

    @Test
    void whatCannotBeAFamilyIsRefusedNamingTheRecordings() {
        List<Op> program = SyntheticAlignmentTest.program(new Random(11), 16);
        TraceSnapshot a = SyntheticAlignmentTest.run(program, 128, STEPS, true, false);
        TraceSnapshot b = SyntheticAlignmentTest.run(program, 256, STEPS, true, false);
        assertThatThrownBy(() -> RecordingFamily.of(List.of(a), new long[] {128}))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("a prediction needs two or more labelled recordings, got 1 (x=128)");
        assertThatThrownBy(() -> RecordingFamily.of(List.of(a, b), new long[] {128}))
                .hasMessage("2 recordings but 1 labels");
        assertThatThrownBy(() -> RecordingFamily.of(List.of(a, b), new long[] {128, 128}))
                .hasMessage("x=128 and x=256 have the same label 128: a law needs distinct values");
        assertThatThrownBy(() -> family(program, 128, 256).without(0))
                .isInstanceOf(IllegalStateException.class)
                .hasMessage("leaving one out needs three or more recordings, got 2");

        // the same ops from another file: no request of one has a stack the other has
        List<TraceEntry> elsewhere = new ArrayList<>();
        for (TraceEntry e : b.traceOf(0)) {
            elsewhere.add(
                    e.frames() == null || e.frames().isEmpty()
                            ? e
                            : new TraceEntry(
                                    e.action(),
                                    e.addr(),
                                    e.size(),
                                    e.stream(),
                                    e.timeUs(),
                                    List.of(new Frame(
                                            "other.py", e.frames().getFirst().line(), "train_step")),
                                    -1,
                                    e.keys()));
        }
        TraceSnapshot other = new TraceSnapshot(
                "other", SourceFormat.PYTORCH_SNAPSHOT, List.of(), List.of(elsewhere), null, null, Map.of(), true);
        RecordingFamily notOne = RecordingFamily.of(List.of(a, other), new long[] {128, 256});
        assertThatThrownBy(() -> notOne.predict(512))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageStartingWith("other and x=128 do not look like the same program: 0.0% of other's");
    }

    /**
     * The search doubles and bisects on the assumption that the values that fit form a prefix; a caching allocator's
     * reservations are not monotonic in the value (a segment holds a little more or less), so the check is the one
     * the search guarantees whatever the program: the value found fits and the next multiple does not, and where a
     * scan of every multiple shows a prefix, the search finds its end.
     */
    @Test
    void theLargestFittingValueFitsAndTheNextMultipleDoesNot() {
        long seed = seed();
        List<Op> program = SyntheticAlignmentTest.program(new Random(seed), 24);
        RecordingFamily family = family(program, 128, 256);
        AllocatorConfig config = AllocatorConfig.defaults();
        PolicySpec stitch = PolicySpec.parse("stitch");
        long step = 32;
        int multiples = 64;
        long small = replay(family, step).runOnce(config, 1L << 40);
        long large = replay(family, multiples * step).runOnce(config, 1L << 40);
        assertThat(large).as("seed %d", seed).isGreaterThan(small);
        for (int i = 0; i <= 4; i++) {
            long capacity = small + (large - small) * i / 4;
            CapacityFit fit = CapacityFit.of(family, capacity, step);
            // the family is recorded under the defaults: the recorded row runs them
            List<CapacityFit.LargestValue> rows = fit.rows(List.of(), List.of(stitch));
            Predicate<WhatIfReplay> exact = r -> r.runOnce(config, capacity) >= 0;
            Predicate<WhatIfReplay> byStitch = r -> r.runsWithoutOom(stitch, capacity);
            System.out.println("  capacity " + capacity + ": " + rows.get(0).value() + ", stitch "
                    + rows.get(1).value() + ", " + fit.cost());
            assertBoundary(family, step, rows.get(0), exact, seed);
            assertBoundary(family, step, rows.get(1), byStitch, seed);
            assertThat(rows.get(0).value())
                    .as("seed %d: the step fits what its value needs", seed)
                    .isPositive();
            assertThat(rows.get(0).recorded()).isTrue();
            assertThat(rows.get(0).outcome().ooms()).isZero();
            assertThat(rows.get(1).policy()).isEqualTo("stitch");
            long[] scan = scan(family, step, multiples, exact);
            if (scan[1] == 0 && scan[0] < multiples * step) {
                assertThat(rows.get(0).value())
                        .as("seed %d: the end of the prefix", seed)
                        .isEqualTo(scan[0]);
            }
            assertThat(fit.cost().valuesPredicted())
                    .as("each value predicted once: a doubling and a bisection's worth")
                    .isLessThanOrEqualTo(2 * 12);
        }
    }

    private static void assertBoundary(
            RecordingFamily family, long step, CapacityFit.LargestValue row, Predicate<WhatIfReplay> runs, long seed) {
        long v = row.value();
        assertThat(v % step).isZero();
        if (v == 0) {
            assertThat(row.outcome()).isNull();
            assertThat(fits(family, step, runs))
                    .as("seed %d: not even the step fits", seed)
                    .isFalse();
            return;
        }
        assertThat(row.outcome()).isNotNull();
        assertThat(fits(family, v, runs)).as("seed %d: %d fits", seed, v).isTrue();
        assertThat(fits(family, v + step, runs))
                .as("seed %d: %d does not", seed, v + step)
                .isFalse();
    }

    /**
     * A program whose memory does not grow with the value fits at every value: the answer is the last multiple of the
     * step within the values searched, also when that is no power of two times the largest recorded value (the
     * doubling used to stop at the last power of two below the limit: 4 steps of 3 * 2^36 instead of 5).
     */
    @Test
    void aProgramThatFitsAtEveryValueGetsTheLastMultipleWithinTheLimit() {
        List<Op> constant = new ArrayList<>();
        for (int i = 0; i < 12; i++) {
            constant.add(new Op(i % 5, 512L * (1 + i), 0, 0, 1 + i % 3));
        }
        RecordingFamily family = family(constant, 128, 256);
        for (long step : new long[] {3L << 36, 1L << 37, 100}) {
            CapacityFit fit = CapacityFit.of(family, 1L << 30, step);
            long value = fit.rows(List.of(), List.of()).getFirst().value();
            assertThat(value).as("step %d", step).isEqualTo(CapacityFit.LIMIT / step * step);
        }
        assertThat(CapacityFit.of(family, 1L << 30, CapacityFit.LIMIT + 1)
                        .rows(List.of(), List.of())
                        .getFirst()
                        .value())
                .as("a step past the limit: nothing searched")
                .isZero();
    }

    @Test
    void noValueFitsADeviceTooSmallForTheStep() {
        List<Op> program = SyntheticAlignmentTest.program(new Random(3), 24);
        RecordingFamily family = family(program, 128, 256);
        CapacityFit fit = CapacityFit.of(family, 1 << 20, 64);
        CapacityFit.LargestValue row = fit.rows(List.of(), List.of()).getFirst();
        assertThat(row.value()).isZero();
        assertThat(row.outcome()).isNull();
        assertThatThrownBy(() -> CapacityFit.of(family, 0, 64))
                .hasMessage("capacity and step must be positive, got 0, 64");
        assertThatThrownBy(() -> CapacityFit.of(family, 1 << 30, 0))
                .hasMessage("capacity and step must be positive, got 1073741824, 0");
    }

    private static WhatIfReplay replay(RecordingFamily family, long value) {
        return family.predict(value).session().window(0).replay();
    }

    private static boolean fits(RecordingFamily family, long value, Predicate<WhatIfReplay> runs) {
        try {
            return runs.test(replay(family, value));
        } catch (IllegalArgumentException | IllegalStateException e) {
            return false;
        }
    }

    /**
     * Every multiple of {@code step} up to {@code multiples} steps: the last value of the run of fitting ones from the
     * step on (0 if the step does not fit), and how many fit after the first that does not.
     */
    private static long[] scan(RecordingFamily family, long step, int multiples, Predicate<WhatIfReplay> runs) {
        long prefixEnd = 0;
        long laterFits = 0;
        boolean broken = false;
        for (int m = 1; m <= multiples; m++) {
            boolean fits = fits(family, m * step, runs);
            if (!fits) {
                broken = true;
            } else if (broken) {
                laterFits++;
            } else {
                prefixEnd = m * step;
            }
        }
        return new long[] {prefixEnd, laterFits};
    }
}
