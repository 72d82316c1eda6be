package io.gpumem.trace.analysis;

import static io.gpumem.testing.TestSizes.GiB;
import static io.gpumem.testing.TestSizes.MiB;
import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.alloc.Pool;
import io.gpumem.engine.RunOutcome;
import io.gpumem.history.BlockState;
import io.gpumem.policy.PolicySpec;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Test;

class RecommenderTest {

    /** A what-if whose runs are given per configuration, recording which configurations were asked for. */
    static final class TableWhatIf implements WhatIf {
        final Map<String, RunOutcome> table;
        final RunOutcome smaller;
        final List<String> asked = new ArrayList<>();

        TableWhatIf(Map<String, RunOutcome> table, RunOutcome smaller) {
            this.table = table;
            this.smaller = smaller;
        }

        @Override
        public String description() {
            return "table";
        }

        @Override
        public RunOutcome run(String conf) {
            asked.add(conf);
            RunOutcome baseline = table.get("");
            return table.getOrDefault(
                    conf, baseline != null ? baseline : outcome(conf, 10 * GiB, 12 * GiB, 50, 0, 0, -1));
        }

        /** A policy's run is the table's row {@code policy NAME}, else the baseline's. */
        @Override
        public RunOutcome run(PolicySpec policy) {
            return run(WhatIf.policyLabel(policy));
        }

        @Override
        public Optional<RunOutcome> runSmallerBatch() {
            return Optional.ofNullable(smaller);
        }
    }

    static StateAnalysis fragmentedOom(String conf) {
        MemoryState.Builder b = MemoryState.builder().deviceFree(0);
        if (conf != null) {
            b.allocatorConf(conf);
        }
        for (int i = 0; i < 4; i++) {
            b.segment(StateAnalyzerTest.seg(
                    GiB + 20L * i * MiB,
                    Pool.LARGE,
                    0,
                    false,
                    4 * MiB,
                    BlockState.ACTIVE_ALLOCATED,
                    16 * MiB,
                    BlockState.INACTIVE));
        }
        b.oom(new OomEvent(30 * MiB, 0, 0, 1));
        return new StateAnalyzer().analyze(b.build());
    }

    @Test
    void ranksConfigsThatRemoveTheOomFirstThenBySaving() {
        TableWhatIf whatIf = new TableWhatIf(
                Map.of(
                        "", outcome("", 10 * GiB, 12 * GiB, 50, 3, 1, 14 * GiB),
                        "expandable_segments:True", outcome("e", 10 * GiB, 11 * GiB, 40, 0, 0, 11 * GiB),
                        "max_split_size_mb:128", outcome("m128", 10 * GiB, 12 * GiB, 60, 1, 0, 13 * GiB),
                        "max_split_size_mb:256", outcome("m256", 10 * GiB, 13 * GiB, 60, 1, 1, 15 * GiB)),
                null);
        Recommender.Result r = new Recommender().recommend(fragmentedOom(null), whatIf);

        assertThat(whatIf.asked)
                .containsExactly(
                        "",
                        "expandable_segments:True",
                        "max_split_size_mb:128",
                        "max_split_size_mb:256",
                        "max_split_size_mb:512");
        assertThat(r.baseline().minCapacity()).isEqualTo(14 * GiB);
        assertThat(r.recommendations())
                .extracting(Recommendation::action)
                .containsExactly(
                        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
                        "PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:128");
        assertThat(r.recommendations().get(0).bytesSaved()).isEqualTo(3 * GiB);
        assertThat(r.recommendations().get(0).basis())
                .contains("minimum capacity 14.00 GiB -> 11.00 GiB")
                .contains("OOMs 1 -> 0");
    }

    @Test
    void aPolicyThatRemovesTheOomIsRecommendedBesideTheConfigurations() {
        RunOutcome stitched = outcome("policy stitch", 10 * GiB, 10 * GiB, 20, 0, 0, 10 * GiB);
        TableWhatIf whatIf = new TableWhatIf(
                Map.of(
                        "", outcome("", 10 * GiB, 12 * GiB, 50, 3, 1, 14 * GiB),
                        "max_split_size_mb:128", outcome("m128", 10 * GiB, 12 * GiB, 60, 1, 0, 13 * GiB),
                        "policy stitch", stitched,
                        "policy planned", outcome("policy planned", 10 * GiB, 15 * GiB, 20, 0, 1, 16 * GiB)),
                null);
        Recommender.Result r = new Recommender()
                .recommend(fragmentedOom(null), whatIf, PolicySpec.parseAll(List.of("stitch", "planned")));

        assertThat(whatIf.asked)
                .containsExactly(
                        "",
                        "expandable_segments:True",
                        "max_split_size_mb:128",
                        "max_split_size_mb:256",
                        "max_split_size_mb:512",
                        "policy stitch",
                        "policy planned");
        assertThat(r.alternatives()).contains(stitched);
        assertThat(r.recommendations())
                .extracting(Recommendation::action)
                .containsExactly(
                        "use allocation policy stitch (gpumem compare --policy stitch)",
                        "PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:128");
        assertThat(r.recommendations().getFirst().bytesSaved()).isEqualTo(4 * GiB);

        // with no policy asked for, the same table gives today's configuration-only recommendations
        assertThat(new Recommender().recommend(fragmentedOom(null), whatIf).recommendations())
                .extracting(Recommendation::action)
                .containsExactly("PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:128");
    }

    @Test
    void smallerBatchIsNotTriedAgainstFragmentationThatAConfigFixes() {
        RunOutcome fix = outcome("e", 10 * GiB, 11 * GiB, 40, 0, 0, 11 * GiB);
        TableWhatIf whatIf = new TableWhatIf(
                Map.of("", outcome("", 10 * GiB, 12 * GiB, 50, 3, 1, 14 * GiB), "expandable_segments:True", fix),
                outcome("batch 4", 5 * GiB, 6 * GiB, 9, 0, 0, 6 * GiB));
        Recommender.Result r = new Recommender().recommend(fragmentedOom(null), whatIf);
        assertThat(r.alternatives()).noneMatch(o -> o.label().equals("batch 4"));
        assertThat(r.recommendations()).extracting(Recommendation::outcome).containsExactly(fix);

        TableWhatIf noFix = new TableWhatIf(
                Map.of("", outcome("", 10 * GiB, 12 * GiB, 50, 3, 1, 14 * GiB)),
                outcome("batch 4", 5 * GiB, 6 * GiB, 9, 0, 0, 6 * GiB));
        Recommender.Result last = new Recommender().recommend(fragmentedOom(null), noFix);
        assertThat(last.recommendations())
                .extracting(Recommendation::action)
                .containsExactly("use a smaller batch (batch 4)");
        assertThat(last.notes()).noneMatch(n -> n.contains("no run tried fits"));

        TableWhatIf nothingFits = new TableWhatIf(
                Map.of("", outcome("", 10 * GiB, 12 * GiB, 50, 3, 1, 14 * GiB)),
                outcome("batch 4", 5 * GiB, 6 * GiB, 9, 1, 1, 13 * GiB));
        Recommender.Result none = new Recommender().recommend(fragmentedOom(null), nothingFits);
        assertThat(none.notes())
                .contains(
                        "no run tried fits this device: the least demanding (batch 4) needs 13.00 GiB of device memory");
    }

    @Test
    void mergesCandidatesIntoTheConfigInForceAndSkipsWhatIsAlreadySet() {
        TableWhatIf whatIf = new TableWhatIf(Map.of(), null);
        new Recommender().recommend(fragmentedOom("expandable_segments:True,roundup_power2_divisions:4"), whatIf);
        assertThat(whatIf.asked)
                .containsExactly(
                        "expandable_segments:True,roundup_power2_divisions:4",
                        "expandable_segments:True,roundup_power2_divisions:4,max_split_size_mb:128",
                        "expandable_segments:True,roundup_power2_divisions:4,max_split_size_mb:256",
                        "expandable_segments:True,roundup_power2_divisions:4,max_split_size_mb:512");
        assertThat(Recommender.merge("max_split_size_mb:64,x:1", "max_split_size_mb:128"))
                .isEqualTo("max_split_size_mb:128,x:1");
    }

    /** 23 GiB live on a 24 GiB device with 1 GiB free, and a 2 GiB request that failed: short by 1 GiB. */
    static StateAnalysis liveTensorsOom() {
        MemoryState live = MemoryState.builder()
                .capacity(24 * GiB)
                .deviceFree(GiB)
                .segment(StateAnalyzerTest.seg(GiB, Pool.LARGE, 0, false, 23 * GiB, BlockState.ACTIVE_ALLOCATED))
                .oom(new OomEvent(2 * GiB, GiB, 0, -1))
                .build();
        return new StateAnalyzer().analyze(live);
    }

    @Test
    void smallerBatchIsTriedForLiveTensorsAndStateOnlyFallsBackToArithmetic() {
        StateAnalysis a = liveTensorsOom();
        TableWhatIf whatIf = new TableWhatIf(
                Map.of("", outcome("", 23 * GiB, 23 * GiB, 9, 1, 1, 26 * GiB)),
                outcome("batch 4", 13 * GiB, 14 * GiB, 9, 0, 0, 14 * GiB));
        Recommender.Result r = new Recommender().recommend(a, whatIf);
        assertThat(r.recommendations().get(0).action()).contains("smaller batch (batch 4)");
        assertThat(r.recommendations().get(0).bytesSaved()).isEqualTo(12 * GiB);
        assertThat(r.recommendations())
                .anyMatch(x -> x.action().startsWith("shrink live tensors by at least 1024.00 MiB"));

        Recommender.Result stateOnly = new Recommender().recommend(fragmentedOom(null), null);
        assertThat(stateOnly.baseline()).isNull();
        assertThat(stateOnly.notes()).anyMatch(n -> n.contains("no request stream"));
        assertThat(stateOnly.recommendations())
                .singleElement()
                .satisfies(x -> assertThat(x.action()).contains("not measured"));
    }

    @Test
    void anOomNoRunRemovesPutsShrinkingLiveTensorsFirstAndOneARunRemovesAfterTheRuns() {
        StateAnalysis a = liveTensorsOom();
        assertThat(a.diagnosis().kind()).isEqualTo(DiagnosisKind.LIVE_TENSORS);
        String shrink = "shrink live tensors by at least 1024.00 MiB";

        // every configuration still fails the request, one needs 40 MiB less: saving that does not make the job fit
        TableWhatIf stillOom = new TableWhatIf(
                Map.of(
                        "", outcome("", 23 * GiB, 23 * GiB, 9, 1, 1, 26 * GiB),
                        "max_split_size_mb:128", outcome("m128", 23 * GiB, 23 * GiB, 9, 1, 1, 26 * GiB - 40 * MiB)),
                null);
        Recommender.Result r = new Recommender().recommend(a, stillOom);
        assertThat(r.recommendations())
                .extracting(Recommendation::action)
                .satisfiesExactly(
                        first -> assertThat(first).startsWith(shrink),
                        second -> assertThat(second).isEqualTo("PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:128"));

        // a configuration that removes the failure comes first, the state's remedy after it
        TableWhatIf fixed = new TableWhatIf(
                Map.of(
                        "", outcome("", 23 * GiB, 23 * GiB, 9, 1, 1, 26 * GiB),
                        "expandable_segments:True", outcome("e", 23 * GiB, 23 * GiB, 9, 0, 0, 24 * GiB)),
                null);
        assertThat(new Recommender().recommend(a, fixed).recommendations())
                .extracting(Recommendation::action)
                .satisfiesExactly(
                        first -> assertThat(first).isEqualTo("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"),
                        second -> assertThat(second).startsWith(shrink));

        // a baseline that runs (the replay's capacity serves the request) has no failure for a run to remove
        TableWhatIf runs = new TableWhatIf(Map.of("", outcome("", 23 * GiB, 23 * GiB, 9, 0, 0, 24 * GiB)), null);
        Recommender.Result ran = new Recommender().recommend(a, runs);
        assertThat(ran.recommendations())
                .extracting(Recommendation::action)
                .singleElement()
                .satisfies(only -> assertThat(only).startsWith(shrink));
        assertThat(ran.notes()).noneMatch(n -> n.startsWith("no run tried fits"));
    }

    @Test
    void healthyStateGetsNoRunsButEmptyCacheWhenSegmentsAreWhollyFree() {
        MemoryState state = MemoryState.builder()
                .capacity(80 * GiB)
                .deviceFree(70 * GiB)
                .segment(StateAnalyzerTest.seg(GiB, Pool.LARGE, 0, false, 6 * GiB, BlockState.ACTIVE_ALLOCATED))
                .segment(StateAnalyzerTest.seg(8 * GiB, Pool.LARGE, 0, false, 100 * MiB, BlockState.INACTIVE))
                .build();
        TableWhatIf whatIf = new TableWhatIf(Map.of(), null);
        Recommender.Result r = new Recommender().recommend(new StateAnalyzer().analyze(state), whatIf);
        assertThat(whatIf.asked).isEmpty();
        assertThat(r.recommendations()).singleElement().satisfies(x -> {
            assertThat(x.action()).contains("empty_cache");
            assertThat(x.bytesSaved()).isEqualTo(100 * MiB);
        });
    }

    /**
     * {@code compare}'s rule, row by row: the saving is the drop in minimum capacity when the runs are judged by
     * capacity or one of them stopped at an OOM (and both computed it), else the drop in peak reserved when both ran
     * to the end, else nothing; a run is better with fewer OOMs, or as many and a saving; a negative saving counts 0.
     */
    @Test
    void compareJudgesByCapacityOrByPeakReservedAsItsCommentSays() {
        RunOutcome base = outcome("", 10 * GiB, 12 * GiB, 5, 0, 0, 14 * GiB);
        RunOutcome leaner = outcome("b", 10 * GiB, 11 * GiB, 5, 0, 0, 13 * GiB);

        Recommendation byCapacity = Recommender.compare(base, leaner, "a", true).orElseThrow();
        assertThat(byCapacity.bytesSaved()).isEqualTo(GiB);
        assertThat(byCapacity.basis())
                .isEqualTo(
                        "compare run: minimum capacity 14.00 GiB -> 13.00 GiB, peak reserved 12.00 GiB -> 11.00 GiB");
        assertThat(byCapacity.outcome()).isSameAs(leaner);
        assertThat(byCapacity.action()).isEqualTo("a");

        RunOutcome lowerPeak = outcome("c", 10 * GiB, 10 * GiB, 5, 0, 0, 14 * GiB);
        Recommendation byReserved =
                Recommender.compare(base, lowerPeak, "a", false).orElseThrow();
        assertThat(byReserved.bytesSaved()).isEqualTo(2 * GiB);
        assertThat(byReserved.basis())
                .isEqualTo(
                        "compare run: peak reserved 12.00 GiB -> 10.00 GiB, minimum capacity 14.00 GiB -> 14.00 GiB");
        assertThat(Recommender.compare(base, lowerPeak, "a", true))
                .as("judged by capacity, the same minimum capacity saves nothing")
                .isEmpty();

        RunOutcome oomBase = outcome("", 10 * GiB, 12 * GiB, 5, 2, 1, 14 * GiB);
        RunOutcome fits = outcome("d", 10 * GiB, 13 * GiB, 5, 0, 0, 12 * GiB);
        Recommendation oomFixed = Recommender.compare(oomBase, fits, "a", false).orElseThrow();
        assertThat(oomFixed.bytesSaved())
                .as("a run stopped early: capacity, not peak")
                .isEqualTo(2 * GiB);
        assertThat(oomFixed.basis()).isEqualTo("compare run: minimum capacity 14.00 GiB -> 12.00 GiB, OOMs 1 -> 0");

        RunOutcome unknownBase = outcome("", 10 * GiB, 12 * GiB, 5, 2, 1, -1);
        RunOutcome hungrier = outcome("e", 10 * GiB, 15 * GiB, 5, 0, 0, -1);
        Recommendation fewerOoms =
                Recommender.compare(unknownBase, hungrier, "a", true).orElseThrow();
        assertThat(fewerOoms.bytesSaved())
                .as("no capacity, a run stopped early: no figure")
                .isZero();
        assertThat(fewerOoms.basis()).isEqualTo("compare run: OOMs 1 -> 0");
        Recommendation costlier = Recommender.compare(
                        oomBase, outcome("f", 10 * GiB, 13 * GiB, 5, 0, 0, 15 * GiB), "a", true)
                .orElseThrow();
        assertThat(costlier.bytesSaved())
                .as("fewer OOMs at a higher capacity: saves nothing, still better")
                .isZero();

        RunOutcome zeroCapacity = outcome("g", 10 * GiB, 11 * GiB, 5, 0, 0, 0);
        assertThat(Recommender.compare(base, zeroCapacity, "a", true)
                        .orElseThrow()
                        .bytesSaved())
                .as("a minimum capacity of 0 is known")
                .isEqualTo(14 * GiB);
        assertThat(Recommender.compare(base, base, "a", true)).isEmpty();
        assertThat(Recommender.compare(base, base, "a", false)).isEmpty();
        RunOutcome moreOoms = outcome("h", 10 * GiB, 9 * GiB, 5, 0, 1, 9 * GiB);
        assertThat(Recommender.compare(base, moreOoms, "a", true))
                .as("more OOMs is never better")
                .isEmpty();
    }

    @Test
    void whenNoRunFitsTheLeastDemandingOneIsNamedAndWhenNoneIsBetterTheTriedOnesAre() {
        TableWhatIf stillOom = new TableWhatIf(
                Map.of(
                        "", outcome("", 10 * GiB, 12 * GiB, 50, 3, 1, 14 * GiB),
                        "expandable_segments:True", outcome("e", 10 * GiB, 12 * GiB, 50, 3, 1, 13 * GiB),
                        "max_split_size_mb:128", outcome("m128", 10 * GiB, 12 * GiB, 50, 3, 1, -1)),
                null);
        Recommender.Result r = new Recommender().recommend(fragmentedOom(null), stillOom);
        assertThat(r.notes())
                .contains("no run tried fits this device: the least demanding (e) needs 13.00 GiB of device memory");
        assertThat(r.recommendations())
                .extracting(Recommendation::action)
                .contains("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True");

        TableWhatIf noBetter = new TableWhatIf(Map.of("", outcome("", 10 * GiB, 12 * GiB, 50, 3, 1, 14 * GiB)), null);
        Recommender.Result none =
                new Recommender().recommend(fragmentedOom(null), noBetter, List.of(PolicySpec.parse("stitch")));
        assertThat(none.recommendations()).noneMatch(x -> x.outcome() != null);
        assertThat(none.notes())
                .contains("no configuration or policy tried (expandable_segments:True, max_split_size_mb:128,"
                        + " max_split_size_mb:256, max_split_size_mb:512, policy stitch) did better than the baseline"
                        + " on table");
        assertThat(none.notes())
                .anyMatch(n -> n.startsWith("no run tried fits this device: the least demanding (defaults) needs"));
    }

    @Test
    void compareRunsAreWantedForADiagnosisOrWasteAboveTheSevereRatio() {
        assertThat(Recommender.wantsCompareRuns(fragmentedOom(null))).isTrue();
        MemoryState.Builder healthy = MemoryState.builder().capacity(80 * GiB).deviceFree(70 * GiB);
        healthy.segment(StateAnalyzerTest.seg(GiB, Pool.LARGE, 0, false, 6 * GiB, BlockState.ACTIVE_ALLOCATED));
        assertThat(Recommender.wantsCompareRuns(new StateAnalyzer().analyze(healthy.build())))
                .isFalse();
        assertThat(Recommender.configurationsTried("expandable_segments:True"))
                .as("the configuration in force once, candidates merged into it, duplicates dropped")
                .containsExactly(
                        "expandable_segments:True",
                        "expandable_segments:True,max_split_size_mb:128",
                        "expandable_segments:True,max_split_size_mb:256",
                        "expandable_segments:True,max_split_size_mb:512");
    }

    /** A compare row with the figures the recommender reads (capacity and driver frees play no part). */
    private static RunOutcome outcome(
            String label,
            long peakAllocated,
            long peakReserved,
            long deviceAllocs,
            long retries,
            long ooms,
            long minCapacity) {
        return RunOutcome.builder()
                .label(label)
                .peakAllocated(peakAllocated)
                .peakReserved(peakReserved)
                .deviceAllocs(deviceAllocs)
                .retries(retries)
                .ooms(ooms)
                .minCapacity(minCapacity)
                .build();
    }
}
