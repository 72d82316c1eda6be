package io.gpumem.trace.session;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.io.SourceFormat;
import io.gpumem.trace.io.TraceSnapshot;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * A session's choices and its one-window-per-device promise, in memory: the busiest device is the one with the most
 * {@code alloc} entries (the first on a tie, 0 when none has any), a device's window is rebuilt and compiled once
 * however often it is asked for, and a window that cannot be built fails the same way every time without being
 * tried again.
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
}
