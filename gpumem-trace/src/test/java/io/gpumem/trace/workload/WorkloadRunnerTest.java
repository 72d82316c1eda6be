package io.gpumem.trace.workload;

import io.gpumem.stats.MemoryStats;
import io.gpumem.stats.StatKind;
import io.gpumem.stats.StatType;
import static io.gpumem.testing.TestSizes.MiB;
import static io.gpumem.testing.TestSizes.GiB;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.trace.analysis.AllocatorStates;
import io.gpumem.trace.analysis.DiagnosisKind;
import io.gpumem.trace.analysis.OomEvent;
import io.gpumem.trace.analysis.Recommendation;
import io.gpumem.trace.analysis.Recommender;
import io.gpumem.trace.analysis.StateAnalysis;
import io.gpumem.trace.analysis.StateAnalyzer;
import io.gpumem.trace.whatif.WhatIfOutcome;
import org.junit.jupiter.api.Test;

class WorkloadRunnerTest {

    static TrainingWorkload small() {
        return TrainingWorkload.builder().layers(4).hidden(512).heads(4).vocab(8000).batch(4)
                .seqLens(128, 1024, 128).steps(6).seed(11).build();
    }

    @Test
    void completedRunEndsWithExactlyTheIntendedLiveRequests() {
        TrainingWorkload w = small();
        WorkloadRunner.Run run = new WorkloadRunner(8 * GiB, 0).run(w, "", false);
        assertThat(run.completed()).isTrue();
        assertThat(run.stepsCompleted()).isEqualTo(6);
        long liveRequested = 0;
        for (MemoryOp op : w.ops()) {
            if (op instanceof MemoryOp.Alloc a && w.isLiveAtEnd(a.id())) {
                liveRequested += a.bytes();
            }
        }
        assertThat(run.stats().get(StatKind.REQUESTED_BYTES, StatType.ALL).current()).isEqualTo(liveRequested);
        assertThat(run.stats().get(StatKind.ALLOCATED_BYTES, StatType.ALL).peak()).isGreaterThanOrEqualTo(w.peakLiveBytes());
        assertThat(run.stats().numOoms()).isZero();
        run.allocator().internals().checkInvariants();
    }

    @Test
    void runsAreDeterministic() {
        TrainingWorkload w = small();
        WorkloadRunner runner = new WorkloadRunner(8 * GiB, 0);
        MemoryStats a = runner.run(w, "expandable_segments:True", false).stats();
        MemoryStats b = runner.run(w, "expandable_segments:True", false).stats();
        assertThat(a).isEqualTo(b);
    }

    @Test
    void tooSmallDeviceStopsAtTheFirstOom() {
        TrainingWorkload w = small();
        WorkloadRunner.Run run = new WorkloadRunner(w.peakLiveBytes() / 2, 0).run(w, "", false);
        assertThat(run.completed()).isFalse();
        assertThat(run.oom()).isNotNull();
        assertThat(run.failedAlloc()).isNotNull();
        assertThat(run.oomOp()).isBetween(0, w.ops().size() - 1);
        assertThat(w.ops().get(run.oomOp())).isEqualTo(run.failedAlloc());
        assertThat(run.stats().numOoms()).isEqualTo(1);
        assertThat(run.stepsCompleted()).isLessThan(6);
    }

    @Test
    void minimumCapacityIsTheSmallestThatRuns() {
        TrainingWorkload w = small();
        WorkloadRunner runner = new WorkloadRunner(8 * GiB, 64 * MiB);
        for (String conf : new String[] {"", "expandable_segments:True"}) {
            long min = runner.minCapacity(w, conf);
            assertThat(min % WorkloadRunner.CAPACITY_STEP).isZero();
            assertThat(new WorkloadRunner(min, 64 * MiB).run(w, conf, false).completed()).as(conf + " at min").isTrue();
            assertThat(new WorkloadRunner(min - WorkloadRunner.CAPACITY_STEP, 64 * MiB).run(w, conf, false).completed())
                    .as(conf + " below min").isFalse();
        }
        assertThatThrownBy(() -> new WorkloadRunner(GiB, GiB)).hasMessageContaining("held-outside");
    }

    @Test
    void analysisOfALiveAllocatorAgreesWithItsStats() {
        TrainingWorkload w = small();
        WorkloadRunner.Run run = new WorkloadRunner(8 * GiB, 0).run(w, "", true);
        StateAnalysis a = new StateAnalyzer().analyze(AllocatorStates.capture(run.allocator(), "end", null));
        assertThat(a.all().reserved()).isEqualTo(run.stats().get(StatKind.RESERVED_BYTES, StatType.ALL).current());
        assertThat(a.all().allocated()).isEqualTo(run.stats().get(StatKind.ALLOCATED_BYTES, StatType.ALL).current());
        assertThat(a.all().active()).isEqualTo(run.stats().get(StatKind.ACTIVE_BYTES, StatType.ALL).current());
        assertThat(a.all().requested()).isEqualTo(run.stats().get(StatKind.REQUESTED_BYTES, StatType.ALL).current());
        assertThat(a.all().inactiveSplit()).isEqualTo(run.stats().get(StatKind.INACTIVE_SPLIT_BYTES, StatType.ALL).current());
        assertThat(a.small().reserved()).isEqualTo(run.stats().get(StatKind.RESERVED_BYTES, StatType.SMALL_POOL).current());
        assertThat(a.large().inactiveSplit()).isEqualTo(run.stats().get(StatKind.INACTIVE_SPLIT_BYTES, StatType.LARGE_POOL).current());
        assertThat(a.all().segments()).isEqualTo((int) run.stats().get(StatKind.SEGMENT, StatType.ALL).current());
        assertThat(a.state().capacity()).isEqualTo(8 * GiB);
        assertThat(a.state().deviceFree()).isEqualTo(8 * GiB - a.all().reserved());
    }

    /** The demo's scenario: fragmentation makes the default config run out where expandable segments fit. */
    @Test
    void defaultDemoWorkloadFragmentsA24GibDeviceAndExpandableSegmentsFixIt() {
        TrainingWorkload w = TrainingWorkload.builder().build();
        WorkloadRunner runner = new WorkloadRunner(24 * GiB, 0);
        assertThat(w.peakLiveBytes()).isLessThan(24 * GiB);
        WorkloadRunner.Run run = runner.run(w, "", false);
        assertThat(run.completed()).isFalse();
        OomEvent oom = new OomEvent(run.oom().roundedSize(), run.oom().deviceFree(), run.failedAlloc().stream(), -1);
        StateAnalysis analysis = new StateAnalyzer().analyze(AllocatorStates.capture(run.allocator(), "oom", oom));
        assertThat(analysis.diagnosis().kind()).isEqualTo(DiagnosisKind.FRAGMENTATION);

        WorkloadWhatIf whatIf = new WorkloadWhatIf(w, runner, false);
        WhatIfOutcome expandable = whatIf.run("expandable_segments:True");
        assertThat(expandable.ooms()).isZero();
        Recommender.Result r = new Recommender().recommend(analysis, whatIf);
        assertThat(r.recommendations()).first().extracting(Recommendation::action)
                .isEqualTo("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True");
        assertThat(whatIf.runSmallerBatch()).get().extracting(WhatIfOutcome::label).isEqualTo("batch 3");
    }
}
