package io.gpumem.trace.session;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.engine.RunOutcome;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.policy.PolicySpec;
import io.gpumem.trace.io.SourceFormat;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.replay.WhatIfReplay;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * Compare's rows as {@link TraceSession#compare} computes them for every command that shows them: the configurations
 * in the order given (the first one is the recorded one), then the policies; all at one capacity (the recorded one
 * unless another is given); progress from 0 to the number of rows; each row the figures the window's replay gives
 * for it alone, though the rows run in parallel; and the labels compare's table and the report show.
 */
class CompareRunsTest {

    /** Device 0: three waves of four requests, of about 1.5, 3 and 6 MiB, each wave freed before the next. */
    private static TraceSession session() {
        List<TraceEntry> t = new ArrayList<>();
        long base = 1L << 32;
        for (int wave = 0; wave < 3; wave++) {
            long size = (3L << 19) << wave; // 1.5, 3, 6 MiB
            for (int i = 0; i < 4; i++) {
                t.add(TraceEntry.of(TraceAction.ALLOC, base + ((long) (wave * 4 + i) << 24), size + 512L * i, 0));
            }
            for (int i = 0; i < 4; i++) {
                t.add(TraceEntry.of(
                        TraceAction.FREE_REQUESTED, base + ((long) (wave * 4 + i) << 24), size + 512L * i, 0));
            }
        }
        TraceSnapshot trace = new TraceSnapshot(
                "waves", SourceFormat.PYTORCH_SNAPSHOT, List.of(), List.of(t), null, null, Map.of(), true);
        return TraceSession.of(trace);
    }

    @Test
    void configurationsComeFirstThenPoliciesAllAtTheRecordedCapacityWithProgressToTheEnd() {
        TraceSession session = session();
        AllocatorConfig expandable = AllocatorConfig.parse("expandable_segments:True");
        List<long[]> progress = new ArrayList<>();
        CompareRuns runs = session.compare(
                0,
                List.of(session.recordedConfig(), expandable),
                List.of(PolicySpec.parse("stitch")),
                null,
                (done, total) -> progress.add(new long[] {done, total}));

        long recordedCapacity = session.recordedCapacity(0);
        assertThat(runs.capacity()).isEqualTo(recordedCapacity);
        assertThat(runs.rows()).hasSize(3);
        assertThat(runs.rows()).allSatisfy(r -> assertThat(r.capacity()).isEqualTo(recordedCapacity));
        assertThat(runs.rows()).extracting(RunOutcome::recorded).containsExactly(true, false, false);
        assertThat(runs.rows()).extracting(RunOutcome::label).containsExactly("", "expandable_segments:True", "");
        assertThat(runs.rows().get(2).policy()).isEqualTo("stitch");
        assertThat(runs.start()).isSameAs(session.window(0).start());
        assertThat(runs.replay()).isSameAs(session.window(0).replay());
        assertThat(session.windowRebuilds())
                .as("the compare runs share the session's window")
                .isEqualTo(1);

        assertThat(progress.getFirst()).containsExactly(0, 3);
        assertThat(progress.getLast()).containsExactly(3, 3);
        for (int i = 1; i < progress.size(); i++) {
            assertThat(progress.get(i)[0]).isGreaterThanOrEqualTo(progress.get(i - 1)[0]);
        }
        assertThatThrownBy(() -> runs.rows().add(runs.rows().getFirst()))
                .isInstanceOf(UnsupportedOperationException.class);
    }

    @Test
    void eachRowIsWhatTheWindowsReplayGivesForItAlone() {
        TraceSession session = session();
        AllocatorConfig expandable = AllocatorConfig.parse("expandable_segments:True");
        AllocatorConfig rounded = AllocatorConfig.parse("roundup_power2_divisions:4");
        long capacity = 64L << 20;
        PolicySpec stitch = PolicySpec.parse("stitch");
        CompareRuns runs = session.compare(
                0, List.of(session.recordedConfig(), expandable, rounded), List.of(stitch), capacity, (d, t) -> {});
        assertThat(runs.capacity()).isEqualTo(capacity);

        WhatIfReplay alone = session.window(0).replay();
        List<RunOutcome> expected = List.of(
                alone.evaluate(session.recordedConfig(), true, capacity),
                alone.evaluate(expandable, false, capacity),
                alone.evaluate(rounded, false, capacity),
                alone.evaluate(stitch, capacity));
        for (int i = 0; i < expected.size(); i++) {
            RunOutcome got = runs.rows().get(i);
            RunOutcome want = expected.get(i);
            assertThat(got.peakAllocated()).as("row %d peak allocated", i).isEqualTo(want.peakAllocated());
            assertThat(got.peakReserved()).as("row %d peak reserved", i).isEqualTo(want.peakReserved());
            assertThat(got.deviceAllocs()).as("row %d driver allocs", i).isEqualTo(want.deviceAllocs());
            assertThat(got.deviceFrees()).as("row %d driver frees", i).isEqualTo(want.deviceFrees());
            assertThat(got.minCapacity()).as("row %d minimum capacity", i).isEqualTo(want.minCapacity());
            assertThat(got.ooms()).as("row %d OOMs", i).isEqualTo(want.ooms());
        }
        RunOutcome recorded = runs.rows().get(0);
        assertThat(recorded.peakAllocated())
                .as("the last wave: four blocks of 6 MiB + 512 i bytes")
                .isEqualTo((24L << 20) + 3 * 1024);
        assertThat(recorded.peakReserved())
                .as("20 MiB segments: the first holds every wave's first three blocks, the last 6 MiB needs a second")
                .isEqualTo(40L << 20);
        assertThat(recorded.deviceMaps()).isZero();
        assertThat(runs.rows().get(1).deviceMaps())
                .as("the expandable row ran with expandable segments")
                .isPositive();
    }

    @Test
    void labelsNameTheRecordedConfigurationAnotherConfigurationOrAPolicyWithItsOptions() {
        RunOutcome.Builder exact = RunOutcome.builder().policy("pytorch");
        assertThat(CompareRuns.label(exact.label("").recorded(true).build())).isEqualTo("recorded (defaults)");
        assertThat(CompareRuns.label(exact.label("garbage_collection_threshold:0.6")
                        .recorded(true)
                        .build()))
                .isEqualTo("recorded (garbage_collection_threshold:0.6)");
        assertThat(CompareRuns.label(exact.label("").recorded(false).build())).isEqualTo("defaults");
        assertThat(CompareRuns.label(
                        exact.label("expandable_segments:True").recorded(false).build()))
                .isEqualTo("expandable_segments:True");
        assertThat(CompareRuns.label(
                        RunOutcome.builder().policy("stitch").label("").build()))
                .isEqualTo("stitch");
        assertThat(CompareRuns.label(
                        RunOutcome.builder().policy("planned").label("oracle").build()))
                .isEqualTo("planned:oracle");

        CompareRuns runs = new CompareRuns(
                null,
                null,
                1L << 30,
                List.of(
                        exact.label("").recorded(true).peakReserved(7).build(),
                        RunOutcome.builder()
                                .policy("stitch")
                                .label("")
                                .peakReserved(5)
                                .build()));
        assertThat(runs.reportRows()).extracting(RunOutcome::label).containsExactly("recorded (defaults)", "stitch");
        assertThat(runs.reportRows())
                .as("relabelled, not refigured")
                .extracting(RunOutcome::peakReserved)
                .containsExactly(7L, 5L);
    }
}
