package io.gpumem.trace.analysis;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.alloc.CachingAllocator;
import io.gpumem.alloc.Pool;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.history.BlockState;
import io.gpumem.history.HistoryOptions;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.oom.OutOfMemoryException;
import io.gpumem.trace.io.AllocatorSnapshots;
import io.gpumem.trace.io.SourceFormat;
import io.gpumem.trace.io.TraceSnapshot;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.BiConsumer;
import org.junit.jupiter.api.Test;

/**
 * The end state {@code analyze} reads from a snapshot: the OOM that ended the trace is attached when nothing after it
 * changed the allocator (a snapshot dumped from an OOM handler), and only then; and the devices a file speaks of are
 * those with segments or trace entries.
 */
class SnapshotStatesTest {

    private static final long MIB = 1L << 20;

    /**
     * 30 and 20 MiB live on a 64 MiB device, then a 40 MiB request fails; {@code after} (given the allocator and the
     * 30 MiB block's address) runs before the snapshot. {@code DeviceAnalysisTest}'s recording too.
     */
    static TraceSnapshot oom(BiConsumer<CachingAllocator, Long> after) {
        CachingAllocator a = new CachingAllocator(SimulatedDevice.withCapacity(64 * MIB));
        a.recordHistory(HistoryOptions.all());
        long first = a.malloc(30 * MIB);
        a.malloc(20 * MIB);
        try {
            a.malloc(40 * MIB);
            throw new AssertionError("40 MiB fitted beside 50 MiB on a 64 MiB device");
        } catch (OutOfMemoryException expected) {
            after.accept(a, first);
        }
        return AllocatorSnapshots.toTraceSnapshot(a.snapshot(), "oom");
    }

    @Test
    void anOomWithNothingAfterItIsTheEndStatesAndOneFollowedByAnAllocIsNot() {
        TraceSnapshot dumped = oom((a, first) -> {});
        List<TraceEntry> trace = dumped.traceOf(0);
        int oom = TraceStates.lastOom(trace);
        assertThat(oom).isEqualTo(trace.size() - 1);
        MemoryState end = SnapshotStates.endState(dumped, 0, 64 * MIB);
        assertThat(end.oom()).hasValueSatisfying(e -> {
            assertThat(e.requestBytes()).isEqualTo(40 * MIB);
            assertThat(e.entryIndex()).isEqualTo(oom);
            assertThat(e.deviceFree()).isEqualTo(trace.get(oom).deviceFree());
        });

        List<TraceEntry> withMarks = new ArrayList<>(trace);
        withMarks.add(TraceEntry.of(TraceAction.SNAPSHOT, 0, 0, 0));
        withMarks.add(TraceEntry.of(TraceAction.ANNOTATE, 0, 0, 0));
        assertThat(SnapshotStates.endState(withTrace(dumped, withMarks), 0, 64 * MIB)
                        .oom())
                .as("a snapshot or an annotation changes nothing")
                .isPresent();

        TraceSnapshot recovered = oom((a, first) -> a.malloc(512 * 1024)); // a small block: 2 MiB of the 14 MiB left
        assertThat(TraceStates.lastOom(recovered.traceOf(0)))
                .isBetween(0, recovered.traceOf(0).size() - 2);
        assertThat(SnapshotStates.endState(recovered, 0, 64 * MIB).oom())
                .as("an alloc after the OOM")
                .isEmpty();
        assertThat(TraceStates.lastOom(List.of(TraceEntry.of(TraceAction.ALLOC, 1 << 20, 512, 0))))
                .isEqualTo(-1);
    }

    @Test
    void theDevicesAreThoseWithSegmentsOrEntries() {
        TraceSnapshot one = oom((a, first) -> {});
        SegmentInfo segment =
                StateAnalyzerTest.seg(1L << 32, Pool.LARGE, 0, false, 2 * MIB, BlockState.ACTIVE_ALLOCATED);
        SegmentInfo onDevice2 = SegmentInfo.ofBlocks(2, segment.address(), 0, Pool.LARGE, false, segment.blocks());
        TraceSnapshot s = new TraceSnapshot(
                "mixed",
                SourceFormat.PYTORCH_SNAPSHOT,
                List.of(onDevice2),
                List.of(one.traceOf(0), List.of()),
                null,
                null,
                Map.of(),
                true);
        assertThat(SnapshotStates.devices(s)).containsExactly(0, 2);
        assertThat(SnapshotStates.endState(s, 2, MemoryState.UNKNOWN).segments())
                .hasSize(1);
        assertThat(SnapshotStates.endState(s, 2, MemoryState.UNKNOWN).oom()).isEmpty();
    }

    private static TraceSnapshot withTrace(TraceSnapshot s, List<TraceEntry> trace) {
        return new TraceSnapshot(
                s.source(), s.format(), s.segments(), List.of(trace), s.allocatorSettings(), null, Map.of(), true);
    }
}
