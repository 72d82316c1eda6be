package io.gpumem.trace.replay;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.window.RecordedConfig;
import io.gpumem.trace.window.WindowRebuilder;
import io.gpumem.trace.window.WindowStart;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Traces from PyTorch versions that record no {@code free_completed} entries free a block at its
 * {@code free_requested}. No shared trace is of that kind, so PIT showed the whole path untested: taking every trace
 * for one with completions (the rebuild's check, the compile's and the replay's flags) survived. In every shared
 * trace each completion directly follows its request (no {@code record_stream} delay), so dropping the completions
 * gives the same program as an older PyTorch would have recorded it: the start state, the replay's verdict and a
 * what-if's peak must all be the same as for the recording.
 */
class TracesWithoutCompletionsTest {

    /** {@code s} with every {@code free_completed} entry removed, after checking each directly follows its request. */
    private static TraceSnapshot withoutCompletions(TraceSnapshot s) {
        TraceSnapshot older = s;
        for (int d = 0; d < s.deviceTraces().size(); d++) {
            List<TraceEntry> trace = s.traceOf(d);
            List<TraceEntry> kept = new ArrayList<>(trace.size());
            for (int i = 0; i < trace.size(); i++) {
                TraceEntry e = trace.get(i);
                if (e.action() != TraceAction.FREE_COMPLETED) {
                    kept.add(e);
                    continue;
                }
                TraceEntry request = trace.get(i - 1);
                assertThat(request.action()).as("entry before %d", i).isEqualTo(TraceAction.FREE_REQUESTED);
                assertThat(request.addr()).as("entry before %d", i).isEqualTo(e.addr());
            }
            older = Recordings.withTrace(older, d, kept);
        }
        return older;
    }

    @ParameterizedTest
    @ValueSource(
            strings = {
                "tiny-forward.pickle",
                "nca-train-empty-cache.pickle",
                "llama-offload-10-streams.pickle",
                "gnn-train-expandable-oom.pickle"
            })
    void aTraceWithoutCompletionsFreesAtTheRequestAndReplaysAsTheRecordingDoes(String name) {
        TraceSnapshot recorded = Recordings.read(name);
        TraceSnapshot older = withoutCompletions(recorded);
        AllocatorConfig config = RecordedConfig.of(recorded);
        FidelityReport withCompletions = new OracleReplay().check(recorded);
        FidelityReport without = new OracleReplay().check(older);
        assertThat(without.firstMismatch()).as(name).isNull();
        assertThat(without.devices()).hasSameSizeAs(withCompletions.devices());
        for (int k = 0; k < without.devices().size(); k++) {
            DeviceFidelity a = withCompletions.devices().get(k);
            DeviceFidelity b = without.devices().get(k);
            String where = name + " device " + a.device();
            assertThat(b.allocs()).as(where).isEqualTo(a.allocs()).isPositive();
            assertThat(b.exact()).as(where).isEqualTo(a.exact()).isEqualTo(a.allocs());
            assertThat(b.segmentEvents()).as(where).isEqualTo(a.segmentEvents());
            assertThat(b.segmentMatched()).as(where).isEqualTo(a.segmentMatched());
            assertThat(b.endSegmentsSame()).as(where).isEqualTo(b.endSegments()).isEqualTo(a.endSegments());

            WindowStart startWith = new WindowRebuilder(config).rebuild(recorded, a.device());
            WindowStart startWithout = new WindowRebuilder(config).rebuild(older, a.device());
            assertThat(startWithout.segments()).as(where).isEqualTo(startWith.segments());
            assertThat(startWithout.preWindowFreed()).as(where).isEqualTo(startWith.preWindowFreed());

            long peakWith = new WhatIfReplay(recorded, a.device(), startWith)
                    .evaluate(config, true)
                    .peakReserved();
            long peakWithout = new WhatIfReplay(older, a.device(), startWithout)
                    .evaluate(config, true)
                    .peakReserved();
            assertThat(peakWithout).as(where).isEqualTo(peakWith).isPositive();
        }
    }

    /** The snapshot a replay writes is the older recording again: its frees at their requests, no completions. */
    @ParameterizedTest
    @ValueSource(strings = {"tiny-forward.pickle", "gnn-train-expandable-oom.pickle"})
    void theReplayedSnapshotOfATraceWithoutCompletionsIsThatTrace(String name) {
        TraceSnapshot older = withoutCompletions(Recordings.read(name));
        OracleReplay replay = new OracleReplay().writeSnapshot(true);
        assertThat(replay.check(older).isExact()).as(name).isTrue();
        TraceSnapshot written = replay.replayedSnapshot();
        for (int d = 0; d < older.deviceTraces().size(); d++) {
            assertThat(written.traceOf(d)).as(name + " device " + d).isEqualTo(older.traceOf(d));
        }
        assertThat(written.segments()).as(name).isEqualTo(older.segments());
    }
}
