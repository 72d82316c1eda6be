package io.gpumem.trace.replay;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.alloc.CachingAllocator;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.history.HistoryOptions;
import io.gpumem.history.MemorySnapshot;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.io.AllocatorSnapshots;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.window.WindowRebuilder;
import io.gpumem.trace.window.WindowStart;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * A history ring that cuts between a request's {@code segment_alloc} and its {@code alloc}: the window opens with an
 * alloc at the base of a segment the walk back from the end state finds wholly free. Under
 * {@code max_split_size_mb}, with the segment oversize and the request not, the model would refuse that segment as a
 * cached block (an oversize block never serves a smaller request) and the replay used to report a mismatch at the
 * window's first entry; the rebuild now takes the segment as made for that request.
 */
class WindowOpeningInsideARequestTest {

    private static final long MiB = 1L << 20;

    /** 38.3 MiB: rounded below 40 MiB, its segment (rounded up to 2 MiB) 40 MiB, oversize under max_split 40. */
    private static final long REQUEST = 40_141_243;

    @Test
    void anOversizeSegmentMadeForTheFirstRequestIsNotInTheStartStateAndTheReplayIsExact() {
        AllocatorConfig config = AllocatorConfig.parse("max_split_size_mb:40");
        TraceSnapshot s = cutAfterTheFirstSegmentAlloc(config);
        assertThat(s.traceOf(0).get(0).action()).isEqualTo(TraceAction.ALLOC);

        WindowStart start = new WindowRebuilder(config).rebuild(s, 0);
        long segment = s.traceOf(0).get(0).addr();
        assertThat(start.segmentAllocBeforeWindow()).isEqualTo(segment);
        assertThat(start.segments()).noneMatch(seg -> seg.address() == segment);

        DeviceFidelity f = new OracleReplay().check(s).devices().get(0);
        assertThat(f.firstMismatch()).as(f.toString()).isNull();
        assertThat(f.exact()).isEqualTo(f.allocs());
        assertThat(f.segmentMatched()).isEqualTo(f.segmentEvents());
        assertThat(f.endSegmentsSame()).isEqualTo(f.endSegments());
        assertThat(f.notes()).anyMatch(n -> n.contains("opens inside its first request"));
    }

    @Test
    void withoutMaxSplitTheWhollyFreeSegmentStaysInTheStartStateSinceACachedOneWouldServeTheRequestToo() {
        AllocatorConfig config = AllocatorConfig.parse("");
        TraceSnapshot s = cutAfterTheFirstSegmentAlloc(config);

        WindowStart start = new WindowRebuilder(config).rebuild(s, 0);
        long segment = s.traceOf(0).get(0).addr();
        assertThat(start.segmentAllocBeforeWindow()).isZero();
        assertThat(start.segments()).anyMatch(seg -> seg.address() == segment);

        DeviceFidelity f = new OracleReplay().check(s).devices().get(0);
        assertThat(f.firstMismatch()).as(f.toString()).isNull();
        assertThat(f.exact()).isEqualTo(f.allocs());
        assertThat(f.notes()).noneMatch(n -> n.contains("opens inside"));
    }

    @Test
    void aCachedOversizeSegmentServingAnOversizeRequestIsKept() {
        // the request is oversize too: a cached oversize segment could serve it, so nothing says it was made for it
        AllocatorConfig config = AllocatorConfig.parse("max_split_size_mb:40");
        SimulatedDevice device = SimulatedDevice.withCapacity(1L << 40);
        CachingAllocator a = new CachingAllocator(device, config);
        a.recordHistory(HistoryOptions.all(1 << 10));
        long warm = a.malloc(20 * MiB, 0);
        long big = a.malloc(41 * MiB, 0);
        a.free(big);
        long again = a.malloc(41 * MiB, 0); // served from the cached 42 MiB segment
        assertThat(again).isEqualTo(big);
        a.free(warm);
        TraceSnapshot s = windowFrom(a.snapshot(), entryIndexOfAllocAt(a.snapshot(), again, 1));

        WindowStart start = new WindowRebuilder(config).rebuild(s, 0);
        assertThat(start.segmentAllocBeforeWindow()).isZero();
        DeviceFidelity f = new OracleReplay().check(s).devices().get(0);
        assertThat(f.firstMismatch()).as(f.toString()).isNull();
        assertThat(f.exact()).isEqualTo(f.allocs());
    }

    /** A 20 MiB warm-up block, then the request: the window opens at the request's alloc, after its segment_alloc. */
    private static TraceSnapshot cutAfterTheFirstSegmentAlloc(AllocatorConfig config) {
        SimulatedDevice device = SimulatedDevice.withCapacity(1L << 40);
        CachingAllocator a = new CachingAllocator(device, config);
        a.recordHistory(HistoryOptions.all(1 << 10));
        long warm = a.malloc(20 * MiB, 0);
        long p = a.malloc(REQUEST, 0);
        long q = a.malloc(MiB, 0);
        a.free(p);
        a.free(warm);
        a.free(q);
        MemorySnapshot snap = a.snapshot();
        List<TraceEntry> all = snap.deviceTraces().get(0);
        int alloc = entryIndexOfAllocAt(snap, p, 0);
        assertThat(all.get(alloc - 1).action()).isEqualTo(TraceAction.SEGMENT_ALLOC);
        return windowFrom(snap, alloc);
    }

    /** The index of the {@code nth} (from 0) alloc entry at {@code address}. */
    private static int entryIndexOfAllocAt(MemorySnapshot snap, long address, int nth) {
        List<TraceEntry> all = snap.deviceTraces().get(0);
        int seen = 0;
        for (int i = 0; i < all.size(); i++) {
            if (all.get(i).action() == TraceAction.ALLOC && all.get(i).addr() == address && seen++ == nth) {
                return i;
            }
        }
        throw new AssertionError("no alloc " + nth + " at " + Long.toHexString(address));
    }

    private static TraceSnapshot windowFrom(MemorySnapshot snap, int from) {
        return AllocatorSnapshots.toTraceSnapshot(RingCut.from(snap, from), "ring");
    }
}
