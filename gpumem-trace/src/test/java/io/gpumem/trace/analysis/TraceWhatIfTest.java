package io.gpumem.trace.analysis;

import static io.gpumem.testing.TestSizes.GiB;
import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.engine.RunOutcome;
import io.gpumem.trace.io.AllocatorSnapshots;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.session.TraceSession;
import io.gpumem.trace.workload.TrainingWorkload;
import io.gpumem.trace.workload.WorkloadWhatIf;
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
}
