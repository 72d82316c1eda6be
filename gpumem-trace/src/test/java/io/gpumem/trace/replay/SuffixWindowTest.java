package io.gpumem.trace.replay;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.engine.RunOutcome;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.window.RecordedConfig;
import io.gpumem.trace.window.WindowRebuilder;
import java.util.ArrayList;
import java.util.List;
import java.util.function.IntPredicate;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Any suffix of a recorded window is itself a window with the same end state: rebuilding its start (with more
 * blocks allocated before it, and expandable segments already mapped) and replaying it must stay exact. Cuts are
 * made before an alloc that is not preceded by its own driver calls, in every device's trace.
 */
class SuffixWindowTest {

    /** Cuts before an alloc that is not preceded by its own driver calls, {@code count - 1} of them spread evenly. */
    static List<Integer> cuts(List<TraceEntry> t, int count) {
        return cuts(
                t,
                count,
                i -> t.get(i).action() == TraceAction.ALLOC
                        && !t.get(i - 1).action().isSegmentEvent());
    }

    /**
     * Cuts between a {@code free_requested} and its {@code free_completed}, spread as {@link #cuts} spreads its own:
     * the window then opens with the completion of a free requested before it, which frees a start block (a real
     * recording can start there: with {@code record_stream}, a completion comes long after its request).
     */
    static List<Integer> cutsBeforeCompletions(List<TraceEntry> t, int count) {
        return cuts(
                t,
                count,
                i -> t.get(i).action() == TraceAction.FREE_COMPLETED
                        && t.get(i - 1).action() == TraceAction.FREE_REQUESTED);
    }

    /** For k = 1 .. count - 1, the first index at or after k / count of the trace where {@code cutHere} holds. */
    private static List<Integer> cuts(List<TraceEntry> t, int count, IntPredicate cutHere) {
        List<Integer> cuts = new ArrayList<>();
        for (int k = 1; k < count; k++) {
            int i = Math.max(1, (int) ((long) t.size() * k / count));
            while (i < t.size() && !cutHere.test(i)) {
                i++;
            }
            if (i < t.size()) {
                cuts.add(i);
            }
        }
        return cuts;
    }

    /** The snapshot whose trace of {@code device} starts at entry {@code cut}; everything else as recorded. */
    static TraceSnapshot suffix(TraceSnapshot s, int device, int cut) {
        List<TraceEntry> full = s.traceOf(device);
        return Recordings.withTrace(s, device, full.subList(cut, full.size()));
    }

    /**
     * Every device's trace is cut, not only the first: {@code gnn-train-expandable-oom}'s release run (six
     * {@code segment_unmap}) is on device 1, and only a cut between its maps and its unmaps gives a window whose start
     * has expandable pages mapped before the window and unmapped in it (PIT: dropping the backward pass's re-adding of
     * unmapped ranges survived while only device 0 was cut).
     */
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
        TraceSnapshot s = Recordings.read(name);
        for (int device = 0; device < s.deviceTraces().size(); device++) {
            for (int cut : cuts(s.traceOf(device), 9)) {
                checkSuffix(name, suffix(s, device, cut), device, cut);
            }
            for (int cut : cutsBeforeCompletions(s.traceOf(device), 5)) {
                checkSuffix(name, suffix(s, device, cut), device, cut);
            }
        }
    }

    private static void checkSuffix(String name, TraceSnapshot window, int device, int cut) {
        String where = name + " device " + device + " from entry " + cut;
        FidelityReport r = new OracleReplay().check(window);
        DeviceFidelity d = r.devices().stream()
                .filter(f -> f.device() == device)
                .findFirst()
                .orElseThrow();
        System.out.println(where + ": " + d.exact() + "/" + d.allocs() + " exact, segments " + d.segmentMatched() + "/"
                + d.segmentEvents() + ", end " + d.endSegmentsSame() + "/" + d.endSegments() + ", first mismatch "
                + d.firstMismatch());
        assertThat(d.firstMismatch()).as(where).isNull();
        assertThat(d.endSegmentsSame()).as(where).isEqualTo(d.endSegments());
        // The same window as a what-if: the recorded configuration reproduces the window's own peak reserved, and
        // at the recorded capacity fails again each request the recording saw fail.
        var config = RecordedConfig.of(window);
        var start = new WindowRebuilder(config).rebuild(window, device);
        WhatIfReplay w = new WhatIfReplay(window, device, start);
        RunOutcome row = w.evaluate(config, true);
        assertThat(row.peakReserved()).as(where).isEqualTo(w.recorded().peakReserved());
        assertThat(row.ooms()).as(where).isEqualTo(w.recorded().oomEntries());
    }
}
