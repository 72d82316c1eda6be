package io.gpumem.trace.workload;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.engine.RequestStream;
import io.gpumem.engine.RunOutcome;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.stats.StatKind;
import io.gpumem.stats.StatType;
import io.gpumem.trace.io.SourceFormat;
import io.gpumem.trace.io.TraceSnapshot;
import java.util.List;
import java.util.Map;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

class TraceWorkloadTest {
    static TraceEntry e(TraceAction a, long addr, long size) {
        return TraceEntry.of(a, addr, size, 0);
    }

    static TraceSnapshot snapshot(List<TraceEntry> trace) {
        return new TraceSnapshot(
                "t.pickle", SourceFormat.PYTORCH_SNAPSHOT, List.of(), List.of(trace), null, null, Map.of(), true);
    }

    @Test
    void takesAllocsAndTheirFreesSkipsPreWindowFreesAndAppendsTheFailedRequest() {
        List<TraceEntry> trace = List.of(
                e(TraceAction.FREE_REQUESTED, 0x9000, 100), // allocated before the window: skipped
                e(TraceAction.SEGMENT_ALLOC, 0x1000, 2 << 20),
                e(TraceAction.ALLOC, 0x1000, 700),
                e(TraceAction.ALLOC, 0x1400, 300),
                e(TraceAction.FREE_REQUESTED, 0x1000, 700),
                e(TraceAction.FREE_COMPLETED, 0x1000, 700),
                e(TraceAction.OOM, 0, 50 << 20));
        TraceWorkload all = TraceWorkload.of(snapshot(trace), 0, trace.size());
        RequestStream ops = all.stream();
        assertThat(IntStream.range(0, ops.length())
                        .mapToObj(k ->
                                ops.op(k) + " slot " + ops.slot(k) + " size " + ops.size(k) + " entry " + ops.entry(k)
                                        + " at " + ops.frames(k).getFirst().filename()))
                .containsExactly(
                        RequestStream.ALLOC + " slot 0 size 700 entry 2 at alloc #2",
                        RequestStream.ALLOC + " slot 1 size 300 entry 3 at alloc #3",
                        RequestStream.FREE + " slot 0 size 0 entry 4 at gpumem-demo",
                        RequestStream.ALLOC + " slot 2 size " + (50 << 20) + " entry 6 at failed request #6");
        assertThat(ops.allocs()).isEqualTo(3);
        assertThat(all.describe()).contains("1 frees of blocks from before the window skipped");
        assertThat(all.peakLiveBytes()).isEqualTo(300 + (50 << 20));

        // arbitrary stream handles, as traces carry them, run on streams the simulated device creates
        List<TraceEntry> streams = List.of(
                TraceEntry.of(TraceAction.ALLOC, 0x1000, 3 << 20, 123288560L),
                TraceEntry.of(TraceAction.ALLOC, 0x9000, 3 << 20, 0),
                TraceEntry.of(TraceAction.FREE_REQUESTED, 0x1000, 3 << 20, 123288560L));
        RunOutcome run =
                new WorkloadWhatIf(TraceWorkload.of(snapshot(streams), 0, 3), 1L << 30, 0, false).runWithHistory("");
        assertThat(run.completed()).isTrue();
        assertThat(run.allocator().stats().get(StatKind.SEGMENT, StatType.ALL).current())
                .as("one segment per stream")
                .isEqualTo(2);

        TraceWorkload upToFirstFree = TraceWorkload.of(snapshot(trace), 0, 5);
        assertThat(upToFirstFree.stream().length()).isEqualTo(3);
        assertThat(upToFirstFree.describe()).contains("up to entry 4");
    }

    @Test
    void aReusedAddressFreesItsEarlierBlockAndOnlyTheLastEntrysFailedRequestIsAppended() {
        List<TraceEntry> trace = List.of(
                e(TraceAction.ALLOC, 0x1000, 700),
                e(TraceAction.ALLOC, 0x2000, 0), // a zero-byte request: nothing to place
                e(TraceAction.ALLOC, 0x3000, 300),
                e(TraceAction.OOM, 0, 9 << 20), // not the analysed moment: the run goes on past it
                e(TraceAction.FREE_REQUESTED, 0x3000, 300),
                e(TraceAction.ALLOC, 0x1000, 500), // 0x1000 again, its free not in the record
                e(TraceAction.FREE_REQUESTED, 0x2000, 0),
                e(TraceAction.OOM, 0, 0));
        TraceWorkload w = TraceWorkload.of(snapshot(trace), 0, trace.size());
        RequestStream ops = w.stream();
        assertThat(IntStream.range(0, ops.length())
                        .mapToObj(k -> ops.op(k) + " slot " + ops.slot(k) + " entry " + ops.entry(k)))
                .containsExactly(
                        RequestStream.ALLOC + " slot 0 entry 0",
                        RequestStream.ALLOC + " slot 1 entry 2",
                        RequestStream.FREE + " slot 1 entry 4",
                        RequestStream.FREE + " slot 0 entry 5",
                        RequestStream.ALLOC + " slot 2 entry 5");
        assertThat(w.describe())
                .as("the whole trace, the zero-byte block's free the one skipped")
                .isEqualTo("the 3 requests of device 0's trace (1 frees of blocks from before the window skipped)");

        TraceWorkload clean = TraceWorkload.of(snapshot(trace.subList(0, 3)), 0, 3);
        assertThat(clean.describe()).isEqualTo("the 2 requests of device 0's trace");
        TraceWorkload atTheOom = TraceWorkload.of(snapshot(trace), 0, 4);
        assertThat(atTheOom.stream().allocs())
                .as("the OOM that ends the window is appended")
                .isEqualTo(3);
        assertThat(atTheOom.describe()).contains("up to entry 3");
    }
}
