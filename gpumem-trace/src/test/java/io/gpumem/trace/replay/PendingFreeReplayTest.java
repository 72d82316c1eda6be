package io.gpumem.trace.replay;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.alloc.CachingAllocator;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.history.BlockInfo;
import io.gpumem.history.BlockState;
import io.gpumem.history.HistoryOptions;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceAction;
import io.gpumem.trace.io.AllocatorSnapshots;
import io.gpumem.trace.io.TraceSnapshot;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A recording that ends while a block's free waits on another stream's events ({@code record_stream}: the
 * {@code free_requested} has no {@code free_completed} yet, the end state shows the block
 * {@code active_pending_free}) is replayed exactly: the model ends with the block waiting too, whether its free was
 * requested in the window or before it began (a history ring that wrapped).
 */
class PendingFreeReplayTest {

    private static final long MiB = 1L << 20;

    @ParameterizedTest
    @ValueSource(booleans = {false, true})
    void aFreeWaitingOnEventsAtTheEndIsReplayedAsWaiting(boolean requestedBeforeTheWindow) {
        SimulatedDevice device = SimulatedDevice.withCapacity(1L << 34);
        CachingAllocator a = new CachingAllocator(device, AllocatorConfig.parse(""));
        a.recordHistory(requestedBeforeTheWindow ? HistoryOptions.all(12) : HistoryOptions.all());
        long side = device.createStream();
        device.holdEvents(true);
        long p = a.malloc(4 * MiB, 0);
        a.recordStream(p, side);
        a.free(p);
        for (int k = 0; k < 8; k++) {
            a.free(a.malloc(MiB, 0)); // a trace with completions; enough of them to push p's free out of a ring of 12
        }
        a.malloc(MiB, 0);
        TraceSnapshot s = AllocatorSnapshots.toTraceSnapshot(a.snapshot(), "pending");
        assertThat(pendingBlocks(s)).isEqualTo(1);
        assertThat(s.traceOf(0).stream().anyMatch(e -> e.action() == TraceAction.FREE_REQUESTED && e.addr() == p))
                .isNotEqualTo(requestedBeforeTheWindow);

        OracleReplay replay = new OracleReplay().writeSnapshot(true);
        FidelityReport r = replay.check(s);

        DeviceFidelity f = r.devices().getFirst();
        assertThat(f.exact()).isEqualTo(f.allocs());
        assertThat(f.endSegmentsSame()).as(f.toString()).isEqualTo(f.endSegments());
        assertThat(r.isExact()).isTrue();
        assertThat(pendingBlocks(replay.replayedSnapshot())).isEqualTo(1); // replay --snapshot writes it waiting too
    }

    private static long pendingBlocks(TraceSnapshot s) {
        long n = 0;
        for (SegmentInfo seg : s.segmentsOf(0)) {
            for (BlockInfo b : seg.blocks()) {
                n += b.state() == BlockState.ACTIVE_PENDING_FREE ? 1 : 0;
            }
        }
        return n;
    }
}
