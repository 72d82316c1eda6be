package io.gpumem.trace.align;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.alloc.SizeRules;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.align.SyntheticAlignmentTest.Op;
import io.gpumem.trace.io.SourceFormat;
import io.gpumem.trace.io.TraceSnapshot;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * {@code gpumem diff} on seeded generated programs ({@link SyntheticAlignmentTest}): two runs of one program at two
 * values, the second one step longer and with a workspace request the first lacks. Each call site's requests and
 * bytes are the program's own, the workspace is the second run's alone, the sites' shares add up to both peaks,
 * and runs without frames fall back to positions in the step.
 */
class RecordingDiffTest {

    private static long seed() {
        long seed = Long.getLong("gpumem.seed", System.nanoTime()); // -Dgpumem.seed=N replays a run
        System.out.println("RecordingDiffTest seed " + seed);
        return seed;
    }

    @Test
    void eachCallSiteHoldsItsOpsRequestsAndTheWorkspaceIsTheSecondRunsAlone() {
        long seed = seed();
        List<Op> program = SyntheticAlignmentTest.program(new Random(seed), 30);
        FrameSignatures sigs = new FrameSignatures();
        RequestSequence a = RequestSequence.of(SyntheticAlignmentTest.run(program, 128, 5, true, false), 0, sigs);
        RequestSequence b = RequestSequence.of(SyntheticAlignmentTest.run(program, 256, 6, true, true), 0, sigs);
        RecordingDiff diff = RecordingDiff.of(RequestAlignment.align(a, b));
        assertThat(diff.sameProgram()).isTrue();
        assertInvariants(diff, a, b);

        // per call site (model.py line 10 + site): its ops' requests and rounded bytes, steps times over
        Map<String, long[]> expected = new HashMap<>();
        AllocatorConfig config = AllocatorConfig.defaults();
        for (Op o : program) {
            long[] e = expected.computeIfAbsent("model.py:" + (10 + o.site()) + " forward", k -> new long[4]);
            e[0] += 5;
            e[1] += 6;
            e[2] += 5 * SizeRules.roundSize(o.size(128), config);
            e[3] += 6 * SizeRules.roundSize(o.size(256), config);
        }
        for (Map.Entry<String, long[]> e : expected.entrySet()) {
            RecordingDiff.Site s = site(diff, e.getKey());
            long[] want = e.getValue();
            assertThat(new long[] {s.requests(0), s.requests(1), s.bytes(0), s.bytes(1)})
                    .as("seed %d, %s", seed, e.getKey())
                    .containsExactly(want);
            assertThat(s.matched(0))
                    .as("seed %d, %s: every request of the shorter run matched", seed, e.getKey())
                    .isEqualTo(s.requests(0));
        }
        RecordingDiff.Site workspace = diff.sites().stream()
                .filter(s -> !s.name().startsWith("model.py:") && !s.name().equals(RecordingDiff.BEFORE_WINDOW))
                .findFirst()
                .orElseThrow();
        assertThat(workspace.requests(0)).isZero();
        assertThat(workspace.requests(1)).as("one workspace request a step").isEqualTo(6);
        assertThat(workspace.matched(1)).isZero();
        assertThat(workspace.bytes(1)).isEqualTo(6L << 20);
        assertThat(diff.sites())
                .as("the ops' sites and the workspace; both runs start empty, so no row of blocks from before them")
                .hasSize(expected.size() + 1)
                .extracting(RecordingDiff.Site::name)
                .doesNotContain(RecordingDiff.BEFORE_WINDOW);
    }

    @Test
    void withoutFramesASiteIsAPositionInTheFirstRunsStep() {
        long seed = seed();
        List<Op> program = SyntheticAlignmentTest.program(new Random(seed), 24);
        FrameSignatures sigs = new FrameSignatures();
        RequestSequence a = RequestSequence.of(SyntheticAlignmentTest.run(program, 128, 5, false, false), 0, sigs);
        RequestSequence b = RequestSequence.of(SyntheticAlignmentTest.run(program, 256, 6, false, false), 0, sigs);
        RecordingDiff diff = RecordingDiff.of(RequestAlignment.align(a, b));
        assertInvariants(diff, a, b);
        assertThat(diff.sites())
                .extracting(RecordingDiff.Site::name)
                .allMatch(n -> n.startsWith("step position ") || n.equals(RecordingDiff.BEFORE_WINDOW));
        assertThat(diff.sites().stream().mapToLong(site -> site.matched(0)).sum())
                .as("seed %d: most requests matched by order", seed)
                .isGreaterThan(a.size() / 2);
    }

    /**
     * Without frames, a request of the warm-up (a set-up before the loop) has no position in the step: it is named by
     * its index in the warm-up, so no step position gathers set-up requests beside the loop's. Each step position then
     * holds at most one request a step.
     */
    @Test
    void withoutFramesTheWarmUpsRequestsAreNamedApartFromTheStepsPositions() {
        long seed = seed();
        List<Op> program = SyntheticAlignmentTest.program(new Random(seed), 24);
        FrameSignatures sigs = new FrameSignatures();
        RequestSequence a =
                RequestSequence.of(withSetUp(SyntheticAlignmentTest.run(program, 128, 12, false, false)), 0, sigs);
        RequestSequence b =
                RequestSequence.of(withSetUp(SyntheticAlignmentTest.run(program, 256, 13, false, false)), 0, sigs);
        StepStructure steps = StepStructure.of(a);
        assertThat(steps.warmUp()).as("seed %d: the set-up is a warm-up", seed).isPositive();
        RecordingDiff diff = RecordingDiff.of(RequestAlignment.align(a, b));
        assertInvariants(diff, a, b);
        assertThat(diff.sites()).extracting(RecordingDiff.Site::name).anyMatch(n -> n.startsWith("warm-up request "));
        for (RecordingDiff.Site site : diff.sites()) {
            if (site.name().startsWith("step position ")) {
                assertThat(site.requests(0))
                        .as("seed %d, %s", seed, site.name())
                        .isLessThanOrEqualTo(steps.stepCount());
            }
        }
    }

    /**
     * The trace after a set-up of 48 requests never freed, each on a stream of its own (without frames a token is the
     * stream, the lifetime and whether the size repeats: a set-up of equal tokens would repeat at any period).
     */
    private static TraceSnapshot withSetUp(TraceSnapshot run) {
        List<TraceEntry> t = new ArrayList<>();
        for (int i = 0; i < 48; i++) {
            long addr = (1L << 44) + ((long) i << 24);
            t.add(new TraceEntry(
                    TraceAction.ALLOC,
                    addr,
                    512L * (i + 1),
                    1000 + i,
                    0,
                    null,
                    -1,
                    TraceEntry.recordedKeys(TraceAction.ALLOC)));
        }
        t.addAll(run.traceOf(0));
        return new TraceSnapshot(
                run.source(), SourceFormat.PYTORCH_SNAPSHOT, List.of(), List.of(t), null, null, Map.of(), true);
    }

    @Test
    void equalPeaksHaveNoShareToSplitAndTheCachedBytesAreWhatThePeakReservedDoesNotHold() {
        List<Op> program = SyntheticAlignmentTest.program(new Random(5), 20);
        FrameSignatures sigs = new FrameSignatures();
        RequestSequence a = RequestSequence.of(SyntheticAlignmentTest.run(program, 128, 4, true, false), 0, sigs);
        RequestSequence same = RequestSequence.of(SyntheticAlignmentTest.run(program, 128, 4, true, false), 0, sigs);
        RecordingDiff diff = RecordingDiff.of(RequestAlignment.align(a, same));
        assertThat(diff.shareOfPeakAllocatedDifference(3)).isNaN();
        assertThat(diff.sites())
                .allSatisfy(s -> assertThat(s.peakAllocatedDifference()).isZero());
        for (int side = 0; side < 2; side++) {
            assertThat(diff.cachedAtPeakReserved(side)).isEqualTo(a.peakReserved() - a.allocatedAtPeakReserved());
        }
    }

    /**
     * The class's invariants: a matched pair counts under one site on both sides, every request counts once, both
     * peaks split over the sites, and the sites come in their documented order.
     */
    private static void assertInvariants(RecordingDiff diff, RequestSequence a, RequestSequence b) {
        assertThat(diff.sites())
                .allSatisfy(s -> assertThat(s.matched(0)).as(s.name()).isEqualTo(s.matched(1)));
        assertThat(diff.sites().stream().mapToLong(s -> s.requests(0)).sum()).isEqualTo(a.size());
        assertThat(diff.sites().stream().mapToLong(s -> s.requests(1)).sum()).isEqualTo(b.size());
        RequestSequence[] both = {a, b};
        for (int side = 0; side < 2; side++) {
            int sd = side;
            assertThat(diff.sites().stream()
                            .mapToLong(s -> s.atPeakAllocated(sd))
                            .sum())
                    .isEqualTo(both[side].peakAllocated());
            assertThat(diff.sites().stream()
                            .mapToLong(s -> s.atPeakReserved(sd))
                            .sum())
                    .isEqualTo(both[side].allocatedAtPeakReserved());
            assertThat(diff.cachedAtPeakReserved(side))
                    .isEqualTo(both[side].peakReserved() - both[side].allocatedAtPeakReserved());
        }
        assertThat(diff.sites())
                .isSortedAccordingTo(
                        Comparator.comparingLong((RecordingDiff.Site s) -> -Math.abs(s.peakAllocatedDifference()))
                                .thenComparingLong(s -> -Math.abs(s.peakReservedDifference()))
                                .thenComparingLong(s -> -Math.abs(s.bytes(1) - s.bytes(0)))
                                .thenComparing(RecordingDiff.Site::name));
        long delta = b.peakAllocated() - a.peakAllocated();
        if (delta != 0) {
            assertThat(diff.shareOfPeakAllocatedDifference(diff.sites().size())).isEqualTo(1.0);
            long top = diff.sites().get(0).peakAllocatedDifference();
            assertThat(diff.shareOfPeakAllocatedDifference(1)).isEqualTo((double) top / delta);
            assertThat(diff.shareOfPeakAllocatedDifference(0)).isZero();
        }
    }

    private static RecordingDiff.Site site(RecordingDiff diff, String name) {
        return diff.sites().stream()
                .filter(s -> s.name().equals(name))
                .findFirst()
                .orElseThrow(() -> new AssertionError("no site " + name + " in "
                        + diff.sites().stream().map(RecordingDiff.Site::name).toList()));
    }
}
