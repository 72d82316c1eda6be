package io.gpumem.trace.analysis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.replay.WhatIfReplay;
import io.gpumem.trace.workload.WorkloadWhatIf;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;

/**
 * Which moment {@code analyze} looks at and when it runs compare runs, on a recording made by the exact allocator:
 * a request fails with an OOM, the program frees a block and goes on. By default the analysed state is the one at
 * the OOM (later entries moved away from it), {@code --at} picks another, compare runs come from the caller's window
 * at the usable capacity, and a window that cannot be replayed falls back to the requests on an empty device.
 */
class DeviceAnalysisTest {

    private static final long MIB = 1L << 20;
    private static final long CAPACITY = 64 * MIB;

    /** 30 and 20 MiB live, a 40 MiB request fails, the 30 MiB block is freed and 8 MiB allocated. */
    private static TraceSnapshot oomThenRecovery() {
        return SnapshotStatesTest.oom((a, first) -> {
            a.free(first);
            a.malloc(8 * MIB);
        });
    }

    private static int indexOf(List<TraceEntry> trace, TraceAction action) {
        for (int i = 0; i < trace.size(); i++) {
            if (trace.get(i).action() == action) {
                return i;
            }
        }
        throw new AssertionError("no " + action + " in " + trace);
    }

    /** A snapshot with addresses is analysed from its own states: its window is never replayed for them. */
    static final Supplier<WhatIfReplay> NO_WINDOW_REPLAY = () -> {
        throw new AssertionError("a snapshot with addresses needs no replay of its window for its states");
    };

    private static DeviceAnalysis analyze(TraceSnapshot t, Integer at, boolean compare, List<Long> asked, WhatIf w) {
        return DeviceAnalysis.of(
                t,
                0,
                at,
                CAPACITY,
                5,
                compare,
                NO_WINDOW_REPLAY,
                usable -> {
                    asked.add(usable);
                    return w;
                },
                List.of());
    }

    @Test
    void byDefaultTheStateAnalysedIsTheOneAtTheOomTheProgramRecoveredFrom() {
        TraceSnapshot t = oomThenRecovery();
        int oom = indexOf(t.traceOf(0), TraceAction.OOM);
        assertThat(oom).isLessThan(t.traceOf(0).size() - 1);

        DeviceAnalysis d = analyze(t, null, false, new ArrayList<>(), null);
        assertThat(d.end()).isEqualTo(oom + 1);
        assertThat(d.analysis().state().oom())
                .hasValueSatisfying(e -> assertThat(e.requestBytes()).isEqualTo(40 * MIB));
        assertThat(d.analysis().all().allocated()).isEqualTo(50 * MIB);
        assertThat(d.whatIf()).as("no compare runs asked for").isNull();

        DeviceAnalysis atEnd = analyze(t, t.traceOf(0).size() - 1, false, new ArrayList<>(), null);
        assertThat(atEnd.end()).isEqualTo(t.traceOf(0).size());
        assertThat(atEnd.analysis().state().oom()).isEmpty();
        assertThat(atEnd.analysis().all().allocated()).isEqualTo(28 * MIB);

        DeviceAnalysis first = analyze(t, 0, false, new ArrayList<>(), null);
        assertThat(first.end()).isEqualTo(1);
        assertThat(first.device()).isZero();

        assertThatThrownBy(() -> analyze(t, t.traceOf(0).size(), false, new ArrayList<>(), null))
                .isInstanceOf(IllegalArgumentException.class);
        assertThat(DeviceAnalysis.hasRequests(t.traceOf(0))).isTrue();
        assertThat(DeviceAnalysis.hasRequests(List.of(TraceEntry.of(TraceAction.FREE_REQUESTED, 1 << 20, 512, 0))))
                .isFalse();
    }

    @Test
    void compareRunsComeFromTheWindowAtTheUsableCapacityWhenTheAnalysisWantsThem() {
        TraceSnapshot t = oomThenRecovery();
        RecommenderTest.TableWhatIf table = new RecommenderTest.TableWhatIf(Map.of(), null);
        List<Long> asked = new ArrayList<>();
        DeviceAnalysis d = analyze(t, null, true, asked, table);
        assertThat(d.whatIf()).isSameAs(table);
        long outside = d.analysis().diagnosis().outside();
        assertThat(asked).containsExactly(CAPACITY - Math.max(0, outside));
        assertThat(table.asked)
                .as("every configuration the recommender tries, run before it reads them")
                .containsAll(Recommender.configurationsTried(""));
        assertThat(d.replayNotes()).isEmpty();

        List<Long> none = new ArrayList<>();
        // after the first request: 30 MiB allocated in 30 MiB reserved (at the end, 28 MiB in 50 MiB is waste enough)
        DeviceAnalysis healthy = analyze(t, indexOf(t.traceOf(0), TraceAction.ALLOC), true, none, table);
        assertThat(healthy.analysis().all().allocated()).isEqualTo(30 * MIB);
        assertThat(healthy.whatIf()).as("nothing to fix: no compare runs").isNull();
        assertThat(none).isEmpty();
    }

    @Test
    void aWindowThatCannotBeReplayedFallsBackToTheRequestsOnAnEmptyDevice() {
        TraceSnapshot t = oomThenRecovery();
        DeviceAnalysis d = DeviceAnalysis.of(
                t,
                0,
                null,
                CAPACITY,
                5,
                true,
                NO_WINDOW_REPLAY,
                usable -> {
                    throw new IllegalStateException("window start unknown");
                },
                List.of());
        assertThat(d.whatIf()).isInstanceOf(WorkloadWhatIf.class);
        assertThat(d.replayNotes())
                .containsExactly("the window replay failed (window start unknown); the compare runs below replay the"
                        + " window's own requests on an empty device instead");
        assertThat(d.recommendations().baseline())
                .as("the fallback's runs back the recommendations")
                .isNotNull();
    }
}
