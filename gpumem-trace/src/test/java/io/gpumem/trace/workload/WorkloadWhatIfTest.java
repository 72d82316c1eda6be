package io.gpumem.trace.workload;

import static io.gpumem.testing.TestSizes.GiB;
import static io.gpumem.testing.TestSizes.MiB;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.alloc.CachingAllocator;
import io.gpumem.engine.MinimumCapacity;
import io.gpumem.engine.RequestStream;
import io.gpumem.engine.RunOutcome;
import io.gpumem.history.Frame;
import io.gpumem.history.TraceAction;
import io.gpumem.policy.PolicyFactory;
import io.gpumem.policy.PolicyRegistry;
import io.gpumem.policy.PolicySpec;
import io.gpumem.trace.analysis.AllocatorStates;
import io.gpumem.trace.analysis.DiagnosisKind;
import io.gpumem.trace.analysis.OomEvent;
import io.gpumem.trace.analysis.Recommendation;
import io.gpumem.trace.analysis.Recommender;
import io.gpumem.trace.analysis.StateAnalysis;
import io.gpumem.trace.analysis.StateAnalyzer;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** Generated workloads compiled into the engine's stream and run by its runner, as the demo runs them. */
class WorkloadWhatIfTest {

    static TrainingWorkload small() {
        return TrainingWorkload.builder()
                .layers(4)
                .hidden(512)
                .heads(4)
                .vocab(8000)
                .batch(4)
                .seqLens(128, 1024, 128)
                .steps(6)
                .seed(11)
                .build();
    }

    private static Map<String, Long> stats(RunOutcome run) {
        return run.allocator().stats().toPyTorchMap();
    }

    @Test
    void completedRunEndsWithExactlyTheIntendedLiveRequests() {
        TrainingWorkload w = small();
        RunOutcome run = new WorkloadWhatIf(w, 8 * GiB, 0, false).runWithHistory("");
        assertThat(run.completed()).isTrue();
        assertThat(run.stepsCompleted()).isEqualTo(6);
        long liveRequested = 0;
        RequestStream ops = w.stream();
        for (int k = 0; k < ops.length(); k++) {
            if (ops.op(k) == RequestStream.ALLOC && w.isLiveAtEnd(ops.slot(k))) {
                liveRequested += ops.size(k);
            }
        }
        assertThat(stats(run).get("requested_bytes.all.current")).isEqualTo(liveRequested);
        assertThat(run.peakAllocated()).isGreaterThanOrEqualTo(w.peakLiveBytes());
        assertThat(stats(run).get("num_ooms")).isZero();
        ((CachingAllocator) run.allocator()).internals().checkInvariants();
    }

    @Test
    void theStreamKeepsTheWorkloadsStepsAndFrames() {
        TrainingWorkload w = small();
        RequestStream stream = w.stream();
        assertThat(stream.steps()).isEqualTo(6);
        assertThat(stream.op(0)).as("weights come first").isEqualTo(RequestStream.ALLOC);
        assertThat(w.kind(stream.slot(0))).isEqualTo(TensorKind.WEIGHT);
        assertThat(stream.frames(0)).extracting(Frame::name).contains("init_parameters", "build_model");
        int firstStep = 0;
        while (stream.op(firstStep) != RequestStream.STEP) {
            firstStep++;
        }
        assertThat(stream.frames(firstStep)).isSameAs(AllocationWorkload.NO_REQUEST);
        assertThat(stream.entry(firstStep))
                .as("each op's entry is its own index")
                .isEqualTo(firstStep);
    }

    @Test
    void runsAreDeterministic() {
        TrainingWorkload w = small();
        WorkloadWhatIf whatIf = new WorkloadWhatIf(w, 8 * GiB, 0, false);
        assertThat(stats(whatIf.runWithHistory("expandable_segments:True")))
                .isEqualTo(stats(whatIf.runWithHistory("expandable_segments:True")));
    }

    @Test
    void tooSmallDeviceStopsAtTheFirstOom() {
        TrainingWorkload w = small();
        WorkloadWhatIf whatIf = new WorkloadWhatIf(w, w.peakLiveBytes() / 2, 0, false);
        RunOutcome run = whatIf.runWithHistory("");
        assertThat(run.completed()).isFalse();
        assertThat(run.oomReport()).isNotNull();
        assertThat(run.failedOp()).isBetween(0, whatIf.stream().length() - 1);
        assertThat(whatIf.stream().op(run.failedOp())).isEqualTo(RequestStream.ALLOC);
        assertThat(run.ooms()).isEqualTo(1);
        assertThat(stats(run).get("num_ooms")).isEqualTo(1);
        assertThat(run.stepsCompleted()).isLessThan(6);
    }

    @Test
    void minimumCapacityIsTheSmallestThatRuns() {
        TrainingWorkload w = small();
        WorkloadWhatIf whatIf = new WorkloadWhatIf(w, 8 * GiB, 64 * MiB, true);
        for (String conf : new String[] {"", "expandable_segments:True", "max_split_size_mb:64"}) {
            long min = whatIf.run(conf).minCapacity();
            assertThat(min % MinimumCapacity.STEP).isZero();
            assertThat(new WorkloadWhatIf(w, min, 64 * MiB, false).run(conf).completed())
                    .as(conf + " at min")
                    .isTrue();
            assertThat(new WorkloadWhatIf(w, min - MinimumCapacity.STEP, 64 * MiB, false)
                            .run(conf)
                            .completed())
                    .as(conf + " below min")
                    .isFalse();
        }
        for (String policy : WorkloadWhatIf.demoPolicies()) {
            PolicySpec spec = PolicySpec.parse(policy);
            long min = whatIf.run(spec).minCapacity();
            assertThat(new WorkloadWhatIf(w, min, 64 * MiB, false).run(spec).completed())
                    .as(policy)
                    .isTrue();
            assertThat(new WorkloadWhatIf(w, min - MinimumCapacity.STEP, 64 * MiB, false)
                            .run(spec)
                            .completed())
                    .as(policy + " below min")
                    .isFalse();
        }
        assertThatThrownBy(() -> new WorkloadWhatIf(w, GiB, GiB, false)).hasMessageContaining("held-outside");
    }

    @Test
    void analysisOfALiveAllocatorAgreesWithItsStats() {
        TrainingWorkload w = small();
        RunOutcome run = new WorkloadWhatIf(w, 8 * GiB, 0, false).runWithHistory("");
        StateAnalysis a = new StateAnalyzer().analyze(AllocatorStates.capture(run.allocator(), "", "end", null));
        Map<String, Long> stats = stats(run);
        assertThat(a.all().reserved()).isEqualTo(stats.get("reserved_bytes.all.current"));
        assertThat(a.all().allocated()).isEqualTo(stats.get("allocated_bytes.all.current"));
        assertThat(a.all().active()).isEqualTo(stats.get("active_bytes.all.current"));
        assertThat(a.all().requested()).isEqualTo(stats.get("requested_bytes.all.current"));
        assertThat(a.all().inactiveSplit()).isEqualTo(stats.get("inactive_split_bytes.all.current"));
        assertThat(a.small().reserved()).isEqualTo(stats.get("reserved_bytes.small_pool.current"));
        assertThat(a.large().inactiveSplit()).isEqualTo(stats.get("inactive_split_bytes.large_pool.current"));
        assertThat(a.all().segments())
                .isEqualTo(stats.get("segment.all.current").intValue());
        assertThat(a.state().capacity()).isEqualTo(8 * GiB);
        assertThat(a.state().deviceFree()).isEqualTo(8 * GiB - a.all().reserved());
    }

    /** The demo's scenario: fragmentation makes the default config run out where expandable segments fit. */
    @Test
    void defaultDemoWorkloadFragmentsA24GibDeviceAndExpandableSegmentsFixIt() {
        TrainingWorkload w = TrainingWorkload.builder().build();
        WorkloadWhatIf whatIf = new WorkloadWhatIf(w, 24 * GiB, 0, false);
        assertThat(w.peakLiveBytes()).isLessThan(24 * GiB);
        RunOutcome run = whatIf.runWithHistory("");
        assertThat(run.completed()).isFalse();
        OomEvent oom = new OomEvent(
                run.oomReport().roundedSize(),
                run.oomReport().deviceFree(),
                whatIf.stream().stream(run.failedOp()),
                -1);
        StateAnalysis analysis = new StateAnalyzer().analyze(AllocatorStates.capture(run.allocator(), "", "oom", oom));
        assertThat(analysis.diagnosis().kind()).isEqualTo(DiagnosisKind.FRAGMENTATION);

        RunOutcome expandable = whatIf.run("expandable_segments:True");
        assertThat(expandable.ooms()).isZero();
        Recommender.Result r = new Recommender().recommend(analysis, whatIf);
        assertThat(r.recommendations())
                .first()
                .extracting(Recommendation::action)
                .isEqualTo("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True");
        assertThat(whatIf.runSmallerBatch()).get().extracting(RunOutcome::label).isEqualTo("batch 3");
    }

    @Test
    void theDemoAddsEveryPolicyButTheExactOneAndHalvesOnlyATrainingBatchOfTwoOrMore() {
        assertThat(WorkloadWhatIf.demoPolicies())
                .containsExactlyElementsOf(PolicyRegistry.alternatives().stream()
                        .map(PolicyFactory::name)
                        .toList())
                .contains("stitch", "planned")
                .doesNotContain(PolicyRegistry.EXACT);

        TrainingWorkload.Builder b = small().settings();
        assertThat(new WorkloadWhatIf(b.batch(1).build(), 8 * GiB, 0, false).runSmallerBatch())
                .isEmpty();
        for (int batch : new int[] {2, 3, 4}) {
            RunOutcome half = new WorkloadWhatIf(b.batch(batch).build(), 8 * GiB, 0, false)
                    .runSmallerBatch()
                    .orElseThrow();
            assertThat(half.label()).isEqualTo("batch " + batch / 2);
            assertThat(half.peakAllocated())
                    .isEqualTo(new WorkloadWhatIf(b.batch(batch / 2).build(), 8 * GiB, 0, false)
                            .run("")
                            .peakAllocated());
        }
        TraceWorkload trace = TraceWorkload.of(
                TraceWorkloadTest.snapshot(List.of(TraceWorkloadTest.e(TraceAction.ALLOC, 0x1000, 512))), 0, 1);
        assertThat(new WorkloadWhatIf(trace, GiB, 0, false).runSmallerBatch())
                .as("a recorded trace has no batch to halve")
                .isEmpty();
    }

    @Test
    void aRequestLargerThanTheUnlimitedRunsTebibyteStillGetsItsMinimumCapacity() {
        long request = 3L << 40; // 3 TiB: more than UNLIMITED, so the search must go above it
        TraceWorkload huge = TraceWorkload.of(
                TraceWorkloadTest.snapshot(List.of(TraceWorkloadTest.e(TraceAction.ALLOC, 0x1000, request))), 0, 1);
        RunOutcome row = new WorkloadWhatIf(huge, 2L << 40, 0, true).run("");
        assertThat(row.ooms()).as("3 TiB does not fit in 2").isEqualTo(1);
        assertThat(row.minCapacity()).isEqualTo(request);
    }

    @Test
    void aWorkloadLargerThanTheLargestModelledDeviceGetsNoMinimumCapacitySearchAndSaysWhy() {
        long request = 40L << 40; // 40 TiB live at once: past MAX_CAPACITY (32 TiB)
        TraceWorkload huge = TraceWorkload.of(
                TraceWorkloadTest.snapshot(List.of(TraceWorkloadTest.e(TraceAction.ALLOC, 0x1000, request))), 0, 1);
        WorkloadWhatIf whatIf = new WorkloadWhatIf(huge, 2L << 40, 0, true);
        RunOutcome row = whatIf.run("");
        assertThat(row.ooms()).isEqualTo(1);
        assertThat(row.minCapacity()).as("not searched: unknown").isEqualTo(-1);
        assertThat(whatIf.minCapacityNotSearched())
                .hasValue("minimum capacity not searched: the workload has 40960.00 GiB live at once, more than the"
                        + " largest device the runs model (32768.00 GiB)");

        // bytes held outside count: 31 TiB live beside 2 TiB held is past it too, and 31 TiB alone is not
        long justBelow = 31L << 40;
        TraceWorkload large = TraceWorkload.of(
                TraceWorkloadTest.snapshot(List.of(TraceWorkloadTest.e(TraceAction.ALLOC, 0x1000, justBelow))), 0, 1);
        WorkloadWhatIf held = new WorkloadWhatIf(large, 8L << 40, 2L << 40, true);
        assertThat(held.run("").minCapacity()).isEqualTo(-1);
        assertThat(held.minCapacityNotSearched().orElseThrow()).contains("beside 2048.00 GiB held outside");
        WorkloadWhatIf fits = new WorkloadWhatIf(large, 8L << 40, 0, true);
        assertThat(fits.run("").minCapacity()).isEqualTo(justBelow);
        assertThat(fits.minCapacityNotSearched()).isEmpty();
        assertThat(new WorkloadWhatIf(huge, 2L << 40, 0, false).minCapacityNotSearched())
                .as("nothing to say when no search was asked for")
                .isEmpty();
    }
}
