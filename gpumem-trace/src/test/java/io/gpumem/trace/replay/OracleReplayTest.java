package io.gpumem.trace.replay;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.trace.TestTraces;
import io.gpumem.trace.io.PytorchSnapshotReader;
import io.gpumem.trace.io.TraceSnapshot;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The acceptance check of the replay: gpumem's allocator, driven by the recorded requests and the recorded
 * driver addresses, makes every placement and driver call PyTorch made. Expected counts are the trace files'
 * own (README of the traces folder), not gpumem output.
 */
class OracleReplayTest {

    @ParameterizedTest
    @CsvSource({
        "tiny-forward.pickle, 36, 9",
        "lm2.7b-train-step.pickle, 6771, 783",
        "llama-offload-10-streams.pickle, 3058, 1163",
        "lm-medium-train-ctx128.pickle, 6526, 0",
        "nca-train-empty-cache.pickle, 1023, 27",
        "gnn-train-expandable-oom.pickle, 3025, 299",
    })
    void everyRecordedDecisionIsReproduced(String name, long allocs, long segmentEvents) {
        TraceSnapshot s = new PytorchSnapshotReader().read(TestTraces.file(name));
        FidelityReport r = new OracleReplay().check(s);
        System.out.println(name + ": " + r.exact() + "/" + r.allocs() + " exact, segments " + r.segmentMatched() + "/"
                + r.segmentEvents() + ", first mismatch " + r.firstMismatch()
                + (r.firstMismatch() == null
                        ? ""
                        : " context " + r.firstMismatch().context()));
        r.devices().forEach(d -> System.out.println("  " + d));
        assertThat(r.allocs()).isEqualTo(allocs);
        assertThat(r.segmentEvents()).isEqualTo(segmentEvents);
        assertThat(r.firstMismatch()).isNull();
        assertThat(r.exact()).isEqualTo(allocs);
        assertThat(r.segmentMatched()).isEqualTo(segmentEvents);
        for (DeviceFidelity d : r.devices()) {
            assertThat(d.endSegmentsSame())
                    .as("device " + d.device() + " end state")
                    .isEqualTo(d.endSegments());
        }
    }
}
