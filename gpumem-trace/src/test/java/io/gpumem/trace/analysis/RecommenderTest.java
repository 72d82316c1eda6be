package io.gpumem.trace.analysis;

import io.gpumem.trace.whatif.WhatIfOutcome;
import io.gpumem.alloc.Pool;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Test;

class RecommenderTest {
    static final long GIB = 1L << 30;
    static final long MIB = 1L << 20;

    /** A what-if whose runs are given per configuration, recording which configurations were asked for. */
    static final class TableWhatIf implements WhatIf {
        final Map<String, WhatIfOutcome> table;
        final WhatIfOutcome smaller;
        final List<String> asked = new ArrayList<>();

        TableWhatIf(Map<String, WhatIfOutcome> table, WhatIfOutcome smaller) {
            this.table = table;
            this.smaller = smaller;
        }

        @Override
        public String description() {
            return "table";
        }

        @Override
        public WhatIfOutcome run(String conf) {
            asked.add(conf);
            WhatIfOutcome baseline = table.get("");
            return table.getOrDefault(conf, baseline != null ? baseline
                    : outcome(conf, 10 * GIB, 12 * GIB, 50, 0, 0, -1));
        }

        @Override
        public Optional<WhatIfOutcome> runSmallerBatch() {
            return Optional.ofNullable(smaller);
        }
    }

    static StateAnalysis fragmentedOom(String conf) {
        MemoryState.Builder b = MemoryState.builder().deviceFree(0);
        if (conf != null) {
            b.allocatorConf(conf);
        }
        for (int i = 0; i < 4; i++) {
            b.segment(StateAnalyzerTest.seg(GIB + i * 20 * MIB, Pool.LARGE, 0, false,
                    4 * MIB, BlockState.ALLOCATED, 16 * MIB, BlockState.INACTIVE));
        }
        b.oom(new OomEvent(30 * MIB, 0, 0, 1));
        return new StateAnalyzer().analyze(b.build());
    }

    @Test
    void ranksConfigsThatRemoveTheOomFirstThenBySaving() {
        TableWhatIf whatIf = new TableWhatIf(Map.of(
                "", outcome("", 10 * GIB, 12 * GIB, 50, 3, 1, 14 * GIB),
                "expandable_segments:True", outcome("e", 10 * GIB, 11 * GIB, 40, 0, 0, 11 * GIB),
                "max_split_size_mb:128", outcome("m128", 10 * GIB, 12 * GIB, 60, 1, 0, 13 * GIB),
                "max_split_size_mb:256", outcome("m256", 10 * GIB, 13 * GIB, 60, 1, 1, 15 * GIB)), null);
        Recommender.Result r = new Recommender().recommend(fragmentedOom(null), whatIf);

        assertThat(whatIf.asked).containsExactly("", "expandable_segments:True", "max_split_size_mb:128",
                "max_split_size_mb:256", "max_split_size_mb:512");
        assertThat(r.baseline().minCapacity()).isEqualTo(14 * GIB);
        assertThat(r.recommendations()).extracting(Recommendation::action).containsExactly(
                "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", "PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:128");
        assertThat(r.recommendations().get(0).bytesSaved()).isEqualTo(3 * GIB);
        assertThat(r.recommendations().get(0).basis()).contains("minimum capacity 14.00 GiB -> 11.00 GiB").contains("OOMs 1 -> 0");
    }

    @Test
    void smallerBatchIsNotTriedAgainstFragmentationThatAConfigFixes() {
        WhatIfOutcome fix = outcome("e", 10 * GIB, 11 * GIB, 40, 0, 0, 11 * GIB);
        TableWhatIf whatIf = new TableWhatIf(Map.of(
                "", outcome("", 10 * GIB, 12 * GIB, 50, 3, 1, 14 * GIB),
                "expandable_segments:True", fix), outcome("batch 4", 5 * GIB, 6 * GIB, 9, 0, 0, 6 * GIB));
        Recommender.Result r = new Recommender().recommend(fragmentedOom(null), whatIf);
        assertThat(r.alternatives()).noneMatch(o -> o.label().equals("batch 4"));
        assertThat(r.recommendations()).extracting(Recommendation::outcome).containsExactly(fix);

        TableWhatIf noFix = new TableWhatIf(Map.of("", outcome("", 10 * GIB, 12 * GIB, 50, 3, 1, 14 * GIB)),
                outcome("batch 4", 5 * GIB, 6 * GIB, 9, 0, 0, 6 * GIB));
        Recommender.Result last = new Recommender().recommend(fragmentedOom(null), noFix);
        assertThat(last.recommendations()).extracting(Recommendation::action).containsExactly("use a smaller batch (batch 4)");
        assertThat(last.notes()).noneMatch(n -> n.contains("no run tried fits"));

        TableWhatIf nothingFits = new TableWhatIf(Map.of("", outcome("", 10 * GIB, 12 * GIB, 50, 3, 1, 14 * GIB)),
                outcome("batch 4", 5 * GIB, 6 * GIB, 9, 1, 1, 13 * GIB));
        Recommender.Result none = new Recommender().recommend(fragmentedOom(null), nothingFits);
        assertThat(none.notes()).contains("no run tried fits this device: the least demanding (batch 4) needs 13.00 GiB of device memory");
    }

    @Test
    void mergesCandidatesIntoTheConfigInForceAndSkipsWhatIsAlreadySet() {
        TableWhatIf whatIf = new TableWhatIf(Map.of(), null);
        new Recommender().recommend(fragmentedOom("expandable_segments:True,roundup_power2_divisions:4"), whatIf);
        assertThat(whatIf.asked).containsExactly("expandable_segments:True,roundup_power2_divisions:4",
                "expandable_segments:True,roundup_power2_divisions:4,max_split_size_mb:128",
                "expandable_segments:True,roundup_power2_divisions:4,max_split_size_mb:256",
                "expandable_segments:True,roundup_power2_divisions:4,max_split_size_mb:512");
        assertThat(Recommender.merge("max_split_size_mb:64,x:1", "max_split_size_mb:128")).isEqualTo("max_split_size_mb:128,x:1");
    }

    @Test
    void smallerBatchIsTriedForLiveTensorsAndStateOnlyFallsBackToArithmetic() {
        MemoryState live = MemoryState.builder().capacity(24 * GIB).deviceFree(GIB)
                .segment(StateAnalyzerTest.seg(GIB, Pool.LARGE, 0, false, 23 * GIB, BlockState.ALLOCATED))
                .oom(new OomEvent(2 * GIB, GIB, 0, -1)).build();
        StateAnalysis a = new StateAnalyzer().analyze(live);
        TableWhatIf whatIf = new TableWhatIf(Map.of("", outcome("", 23 * GIB, 23 * GIB, 9, 1, 1, 26 * GIB)),
                outcome("batch 4", 13 * GIB, 14 * GIB, 9, 0, 0, 14 * GIB));
        Recommender.Result r = new Recommender().recommend(a, whatIf);
        assertThat(r.recommendations().get(0).action()).contains("smaller batch (batch 4)");
        assertThat(r.recommendations().get(0).bytesSaved()).isEqualTo(12 * GIB);
        assertThat(r.recommendations()).anyMatch(x -> x.action().startsWith("shrink live tensors by at least 1024.00 MiB"));

        Recommender.Result stateOnly = new Recommender().recommend(fragmentedOom(null), null);
        assertThat(stateOnly.baseline()).isNull();
        assertThat(stateOnly.notes()).anyMatch(n -> n.contains("no request stream"));
        assertThat(stateOnly.recommendations()).singleElement().satisfies(x -> assertThat(x.action()).contains("not measured"));
    }

    @Test
    void healthyStateGetsNoRunsButEmptyCacheWhenSegmentsAreWhollyFree() {
        MemoryState state = MemoryState.builder().capacity(80 * GIB).deviceFree(70 * GIB)
                .segment(StateAnalyzerTest.seg(GIB, Pool.LARGE, 0, false, 6 * GIB, BlockState.ALLOCATED))
                .segment(StateAnalyzerTest.seg(8 * GIB, Pool.LARGE, 0, false, 100 * MIB, BlockState.INACTIVE))
                .build();
        TableWhatIf whatIf = new TableWhatIf(Map.of(), null);
        Recommender.Result r = new Recommender().recommend(new StateAnalyzer().analyze(state), whatIf);
        assertThat(whatIf.asked).isEmpty();
        assertThat(r.recommendations()).singleElement().satisfies(x -> {
            assertThat(x.action()).contains("empty_cache");
            assertThat(x.bytesSaved()).isEqualTo(100 * MIB);
        });
    }

    /** A compare row with the figures the recommender reads (capacity and driver frees play no part). */
    private static WhatIfOutcome outcome(String label, long peakAllocated, long peakReserved, long deviceAllocs,
                                         long retries, long ooms, long minCapacity) {
        return new WhatIfOutcome(label, false, 0, peakAllocated, peakReserved, deviceAllocs, 0, retries, ooms,
                minCapacity);
    }
}
