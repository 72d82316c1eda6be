package io.gpumem.trace.analysis;

import static io.gpumem.testing.TestSizes.GiB;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.config.ConfigException;
import io.gpumem.engine.RunOutcome;
import io.gpumem.policy.PolicySpec;
import io.gpumem.trace.io.AllocatorSnapshots;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.session.TraceSession;
import io.gpumem.trace.workload.TrainingWorkload;
import io.gpumem.trace.workload.WorkloadWhatIf;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

class TraceWhatIfTest {

    /** A recorded run replayed by the compare engine gives the figures of running its requests again. */
    @Test
    void replayOfARecordedRunMatchesRunningItsRequests() {
        TrainingWorkload w = TrainingWorkload.builder()
                .layers(3)
                .hidden(512)
                .heads(4)
                .vocab(4000)
                .batch(2)
                .seqLens(128, 1024, 128)
                .steps(3)
                .seed(5)
                .build();
        WorkloadWhatIf rerun = new WorkloadWhatIf(w, 8 * GiB, 0, true);
        RunOutcome recorded = rerun.runWithHistory("");
        TraceSnapshot trace =
                AllocatorSnapshots.toTraceSnapshot(recorded.allocator().snapshot(), "recorded");
        WhatIf replay = TraceSession.of(trace).whatIf(0, 8 * GiB);
        for (String conf : Recommender.configurationsTried("")) {
            RunOutcome a = replay.run(conf);
            RunOutcome b = rerun.run(conf);
            assertThat(a.peakReserved()).as(conf).isEqualTo(b.peakReserved());
            assertThat(a.peakAllocated()).as(conf).isEqualTo(b.peakAllocated());
            assertThat(a.deviceAllocs()).as(conf).isEqualTo(b.deviceAllocs());
            assertThat(a.ooms()).as(conf).isZero();
            assertThat(a.minCapacity()).as(conf).isEqualTo(b.minCapacity());
        }
        assertThat(replay.description()).contains("device 0");
    }

    /**
     * Prefetched runs (one per core) are the runs made one by one: same figures, same labels, configurations and a
     * policy alike, and a configuration that cannot run keeps its failure for the call that asks for it.
     */
    @Test
    void prefetchedRunsAreTheSequentialRunsAndKeepTheirFailures() {
        TrainingWorkload w = TrainingWorkload.builder()
                .layers(2)
                .hidden(256)
                .heads(4)
                .vocab(2000)
                .batch(2)
                .seqLens(128, 512, 128)
                .steps(2)
                .seed(9)
                .build();
        RunOutcome recorded = new WorkloadWhatIf(w, 8 * GiB, 0, false).runWithHistory("");
        TraceSnapshot trace =
                AllocatorSnapshots.toTraceSnapshot(recorded.allocator().snapshot(), "recorded");
        List<String> confs = new ArrayList<>(Recommender.configurationsTried(""));
        List<PolicySpec> policies = List.of(PolicySpec.parse("stitch"));
        WhatIf sequential = TraceSession.of(trace).whatIf(0, 8 * GiB);
        WhatIf prefetched = TraceSession.of(trace).whatIf(0, 8 * GiB);
        prefetched.prefetch(
                Stream.concat(confs.stream(), Stream.of("max_split_size_mb:nonsense"))
                        .toList(),
                policies);
        for (String conf : confs) {
            assertThat(prefetched.run(conf))
                    .as(conf)
                    .usingRecursiveComparison()
                    .ignoringFields("v.nsPerPair")
                    .isEqualTo(sequential.run(conf));
        }
        assertThat(prefetched.run(policies.getFirst()))
                .usingRecursiveComparison()
                .ignoringFields("v.nsPerPair")
                .isEqualTo(sequential.run(policies.getFirst()));
        assertThatThrownBy(() -> prefetched.run("max_split_size_mb:nonsense"))
                .isInstanceOf(ConfigException.class)
                .hasMessageContaining("nonsense");
    }
}
