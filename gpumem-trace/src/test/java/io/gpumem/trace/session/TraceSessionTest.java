package io.gpumem.trace.session;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import io.gpumem.engine.RunOutcome;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.policy.PolicySpec;
import io.gpumem.trace.analysis.DeviceAnalysis;
import io.gpumem.trace.analysis.MemoryState;
import io.gpumem.trace.category.PeakCategories;
import io.gpumem.trace.io.ReadLimits;
import io.gpumem.trace.io.SourceFormat;
import io.gpumem.trace.io.TraceFormatException;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.replay.StartMode;
import io.gpumem.trace.replay.WhatIfReplay;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A session's choices and its one-window-per-device promise, in memory: the busiest device is the one with the most
 * {@code alloc} entries (the first on a tie, 0 when none has any), a device's window is rebuilt and compiled once
 * however often it is asked for, and a window that cannot be built fails the same way every time without being
 * tried again; a start mode reaches every window, built before or after it; a report's extra rows carry the recorded
 * baseline only where the table has none, and none for a device without requests; a file is read once, its bytes
 * reported to the end, and an unreadable one names itself.
 */
class TraceSessionTest {

    private static List<TraceEntry> allocs(int n) {
        List<TraceEntry> t = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            long addr = (1L << 32) + ((long) i << 21);
            t.add(TraceEntry.of(TraceAction.ALLOC, addr, 4096, 0));
            t.add(TraceEntry.of(TraceAction.FREE_REQUESTED, addr, 4096, 0));
        }
        return t;
    }

    private static TraceSnapshot devices(List<List<TraceEntry>> traces) {
        return new TraceSnapshot(
                "in memory", SourceFormat.PYTORCH_SNAPSHOT, List.of(), traces, null, null, Map.of(), true);
    }

    @Test
    void theBusiestDeviceHasTheMostAllocsTheFirstOnATie() {
        assertThat(TraceSession.of(devices(List.of(allocs(2), allocs(5), allocs(3))))
                        .busiestDevice())
                .isEqualTo(1);
        assertThat(TraceSession.of(devices(List.of(allocs(4), allocs(4)))).busiestDevice())
                .isZero();
        assertThat(TraceSession.of(devices(List.of(allocs(0), allocs(0), allocs(1))))
                        .busiestDevice())
                .isEqualTo(2);
        List<TraceEntry> freesOnly = List.of(TraceEntry.of(TraceAction.FREE_REQUESTED, 1L << 32, 4096, 0));
        TraceSession none = TraceSession.of(devices(List.of(List.of(), freesOnly)));
        assertThat(none.busiestDevice()).as("no device has an alloc").isZero();
        assertThat(none.hasRequests(1)).isFalse();
        assertThat(none.devices()).containsExactly(1);
        assertThat(TraceSession.of(devices(List.of(allocs(1)))).hasRequests(0)).isTrue();
        assertThat(none.recordedConfString()).isEmpty();
        assertThat(none.fileReads()).isZero();
    }

    @Test
    void aDevicesWindowIsRebuiltAndCompiledOnce() {
        TraceSession session = TraceSession.of(devices(List.of(allocs(3), allocs(2))));
        DeviceWindow first = session.window(0);
        assertThat(session.window(0)).isSameAs(first);
        assertThat(session.windowRebuilds()).isEqualTo(1);
        assertThat(session.streamCompiles()).isEqualTo(1);
        session.window(1);
        assertThat(session.windowRebuilds()).isEqualTo(2);
        assertThat(session.streamCompiles()).isEqualTo(2);
    }

    @Test
    void aWindowThatCannotBeBuiltFailsAlikeEachTimeAndIsNotTriedAgain() {
        TraceSnapshot badSettings = new TraceSnapshot(
                "bad settings",
                SourceFormat.PYTORCH_SNAPSHOT,
                List.of(),
                List.of(allocs(2)),
                Map.of("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:banana"),
                null,
                Map.of(),
                true);
        TraceSession session = TraceSession.of(badSettings);
        assertThat(session.recordedConfString()).isEqualTo("max_split_size_mb:banana");
        RuntimeException first = catchThrowableOfType(RuntimeException.class, () -> session.window(0));
        assertThat(first).hasMessageContaining("banana");
        assertThatThrownBy(() -> session.window(0))
                .as("the same failure, not a second try")
                .isSameAs(first);
        assertThat(session.windowRebuilds()).isZero();
    }

    @Test
    void aStartModeReachesTheWindowsBuiltBeforeAndAfterIt() {
        TraceSession session = TraceSession.of(devices(List.of(allocs(3), allocs(2))));
        WhatIfReplay before = session.window(0).replay();
        assertThat(before.steady())
                .as("AUTO, on a window that starts cold: the window as recorded")
                .isFalse();
        assertThat(session.startMode(StartMode.STEADY)).isSameAs(session);
        assertThat(before.steady()).as("the window built before the change").isTrue();
        assertThat(session.window(1).replay().steady())
                .as("a window built after it")
                .isTrue();
        session.startMode(StartMode.WINDOW);
        assertThat(before.steady()).isFalse();
        assertThat(session.window(1).replay().steady()).isFalse();
    }

    @Test
    void aReportsExtraRowsHaveTheRecordedBaselineFirstOnlyWhereTheTableHasNone() {
        TraceSession session = TraceSession.of(devices(List.of(allocs(6), List.of())));
        DeviceAnalysis analysis = session.analyze(0, null, MemoryState.UNKNOWN, 3, false);
        assertThat(analysis.whatIf()).as("no compare runs asked for").isNull();
        List<PolicySpec> stitch = List.of(PolicySpec.parse("stitch"));

        assertThat(session.policyRows(analysis, null, List.of(), false)).isEmpty();
        assertThat(session.policyRows(analysis, null, stitch, false))
                .extracting(RunOutcome::label)
                .containsExactly("recorded (defaults)", "stitch");
        assertThat(session.policyRows(analysis, null, stitch, true))
                .as("another row is the baseline already")
                .extracting(RunOutcome::label)
                .containsExactly("stitch");
        assertThat(session.policyRows(analysis, 32L << 20, stitch, true))
                .extracting(RunOutcome::capacity)
                .containsExactly(32L << 20);

        assertThat(session.configRows(analysis, MemoryState.UNKNOWN, List.of())).isEmpty();
        List<RunOutcome> configs =
                session.configRows(analysis, MemoryState.UNKNOWN, List.of("expandable_segments:True"));
        assertThat(configs).extracting(RunOutcome::label).containsExactly("", "expandable_segments:True");
        assertThat(configs)
                .as("at the recorded capacity when the capacity is unknown")
                .extracting(RunOutcome::capacity)
                .containsOnly(session.recordedCapacity(0));
        assertThat(session.windowRebuilds())
                .as("every row replays the one window")
                .isEqualTo(1);

        DeviceAnalysis idle = session.analyze(1, null, MemoryState.UNKNOWN, 3, false);
        assertThat(session.policyRows(idle, null, stitch, false))
                .as("no requests on device 1")
                .isEmpty();
        assertThat(session.configRows(idle, MemoryState.UNKNOWN, List.of("expandable_segments:True")))
                .isEmpty();
    }

    @Test
    void aSessionOpenedOnAFileReadsItOnceAndReportsTheBytesToTheEnd(@TempDir Path dir) throws IOException {
        Path f = dir.resolve("rmm.csv");
        Files.writeString(f, """
                Thread,Time,Action,Pointer,Size,Stream
                1,1,allocate,0x7f0000000000,1000,0x0
                1,2,allocate,0x7f0000100000,2000000,0x0
                1,3,free,0x7f0000000000,1000,0x0
                """);
        List<long[]> progress = new ArrayList<>();
        TraceSession session =
                TraceSession.open(f, ReadLimits.DEFAULT, (done, total) -> progress.add(new long[] {done, total}));
        assertThat(session.fileReads()).isEqualTo(1);
        assertThat(session.source()).contains("rmm.csv");
        assertThat(session.hasRequests(0)).isTrue();
        assertThat(progress.getLast()).containsExactly(Files.size(f), Files.size(f));

        assertThatThrownBy(() -> TraceSession.open(f, new ReadLimits(10, 1_000)))
                .isInstanceOf(TraceFormatException.class)
                .hasMessageContaining("rmm.csv");
        assertThatThrownBy(() -> TraceSession.open(dir.resolve("missing.pickle"), ReadLimits.DEFAULT))
                .isInstanceOf(TraceFormatException.class)
                .hasMessageContaining("missing.pickle");
    }

    @Test
    void theBytesAreClassifiedOverTheSessionsWindowAsAFreshClassificationWouldBe() {
        TraceSnapshot trace = devices(List.of(allocs(6), List.of()));
        TraceSession session = TraceSession.of(trace);
        DeviceAnalysis analysis = session.analyze(0, null, MemoryState.UNKNOWN, 3, false);
        session.classifyAhead(0);
        session.classifyAhead(0);
        PeakCategories shared = session.peakCategories(analysis, 0);
        PeakCategories fresh = PeakCategories.of(trace, 0, analysis, 0);
        assertThat(shared.atPeak()).isEqualTo(fresh.atPeak());
        assertThat(shared.atEnd()).isEqualTo(fresh.atEnd());
        assertThat(shared.atPeak().total())
                .as("one 4 KiB block live at the peak")
                .isEqualTo(4096);
        assertThat(session.windowRebuilds())
                .as("classified over the session's one window")
                .isEqualTo(1);
        assertThat(session.peakCategories(analysis, 0).atPeak()).isEqualTo(shared.atPeak());

        DeviceAnalysis idle = session.analyze(1, null, MemoryState.UNKNOWN, 3, false);
        session.classifyAhead(1);
        assertThat(session.peakCategories(idle, 0).atPeak().total()).isZero();
        assertThat(session.windowRebuilds())
                .as("nothing to classify on device 1")
                .isEqualTo(1);
    }

    @Test
    void aReportsConfigurationRowsRunAtAKnownCapacity() {
        TraceSession session = TraceSession.of(devices(List.of(allocs(6))));
        DeviceAnalysis analysis = session.analyze(0, null, 48L << 20, 3, false);
        assertThat(session.configRows(analysis, 48L << 20, List.of("expandable_segments:True")))
                .extracting(RunOutcome::capacity)
                .containsExactly(48L << 20, 48L << 20);
    }
}
