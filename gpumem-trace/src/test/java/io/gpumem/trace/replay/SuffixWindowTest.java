package io.gpumem.trace.replay;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.engine.RunOutcome;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.TestTraces;
import io.gpumem.trace.io.PytorchSnapshotReader;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.window.RecordedConfig;
import io.gpumem.trace.window.WindowRebuilder;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Any suffix of a recorded window is itself a window with the same end state: rebuilding its start (with more
 * blocks allocated before it, and expandable segments already mapped) and replaying it must stay exact. Cuts are
 * made before an alloc that is not preceded by its own driver calls.
 */
class SuffixWindowTest {

    static List<Integer> cuts(List<TraceEntry> t, int count) {
        List<Integer> cuts = new ArrayList<>();
        for (int k = 1; k < count; k++) {
            int i = (int) ((long) t.size() * k / count);
            while (i < t.size()
                    && !(t.get(i).action() == TraceAction.ALLOC
                            && !t.get(i - 1).action().isSegmentEvent())) {
                i++;
            }
            if (i < t.size()) {
                cuts.add(i);
            }
        }
        return cuts;
    }

    @ParameterizedTest
    @ValueSource(
            strings = {
                "lm2.7b-train-step.pickle",
                "llama-offload-10-streams.pickle",
                "nca-train-empty-cache.pickle",
                "gnn-train-expandable-oom.pickle",
                "lm-medium-train-ctx128.pickle"
            })
    void suffixWindowsReplayExactly(String name) {
        TraceSnapshot s = new PytorchSnapshotReader().read(TestTraces.file(name));
        List<TraceEntry> full = s.traceOf(0);
        for (int cut : cuts(full, 5)) {
            List<List<TraceEntry>> traces = new ArrayList<>(s.deviceTraces());
            traces.set(0, full.subList(cut, full.size()));
            TraceSnapshot window = new TraceSnapshot(
                    s.source(),
                    s.format(),
                    s.segments(),
                    traces,
                    s.allocatorSettings(),
                    s.externalAnnotations(),
                    s.extra(),
                    true);
            FidelityReport r = new OracleReplay().check(window);
            DeviceFidelity d0 = r.devices().getFirst();
            System.out.println(name + " from entry " + cut + ": " + d0.exact() + "/" + d0.allocs() + " exact, segments "
                    + d0.segmentMatched() + "/" + d0.segmentEvents() + ", end " + d0.endSegmentsSame() + "/"
                    + d0.endSegments() + ", first mismatch " + d0.firstMismatch());
            assertThat(d0.firstMismatch()).as(name + " from entry " + cut).isNull();
            assertThat(d0.endSegmentsSame()).isEqualTo(d0.endSegments());
            // The same window as a what-if: the recorded configuration reproduces the window's own peak reserved.
            var config = RecordedConfig.of(window);
            var start = new WindowRebuilder(config).rebuild(window, 0);
            WhatIfReplay w = new WhatIfReplay(window, 0, start);
            RunOutcome row = w.evaluate(config, true);
            assertThat(row.peakReserved())
                    .as(name + " from entry " + cut)
                    .isEqualTo(w.recorded().peakReserved());
            assertThat(row.ooms()).isZero();
        }
    }
}
