package io.gpumem.alloc;

import static io.gpumem.testing.TestSizes.MiB;
import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.device.SimulatedDevice;
import io.gpumem.history.BlockState;
import io.gpumem.history.DriverCallListener;
import io.gpumem.history.Frame;
import io.gpumem.history.HistoryOptions;
import io.gpumem.history.HistoryOptions.Context;
import io.gpumem.history.HistoryOptions.Enabled;
import io.gpumem.history.MemorySnapshot;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** Memory history (allocator.md §10.1, §10.5): context levels, the "state" mode, trackers and snapshot contents. */
class HistoryTest {

    private static CachingAllocator allocator(AtomicInteger calls) {
        CachingAllocator a = new CachingAllocator(
                SimulatedDevice.builder().capacity(8L << 30).build());
        a.internals().setClock(() -> 42);
        a.setContextSupplier(() -> List.of(new Frame("f.py", calls.incrementAndGet(), "step")));
        return a;
    }

    @Test
    void contextAllCapturesFreeStacksAllocUsesAllocStacks() {
        AtomicInteger calls = new AtomicInteger();
        CachingAllocator a = allocator(calls);
        a.recordHistory(new HistoryOptions(Enabled.ALL, Context.ALL, 100));
        long p = a.malloc(MiB);
        a.free(p);
        List<TraceEntry> t = a.snapshot().deviceTraces().getFirst();
        assertThat(t)
                .extracting(TraceEntry::action)
                .containsExactly(
                        TraceAction.SEGMENT_ALLOC,
                        TraceAction.ALLOC,
                        TraceAction.FREE_REQUESTED,
                        TraceAction.FREE_COMPLETED);
        assertThat(t.get(1).frames().getFirst().line()).isEqualTo(1); // malloc stack
        assertThat(t.get(2).frames().getFirst().line()).isEqualTo(2); // free stack at level ALL
        assertThat(t).allSatisfy(e -> assertThat(e.timeUs()).isEqualTo(42));

        AtomicInteger calls2 = new AtomicInteger();
        CachingAllocator b = allocator(calls2);
        b.recordHistory(new HistoryOptions(Enabled.ALL, Context.ALLOC, 100));
        long q = b.malloc(MiB);
        b.free(q);
        List<TraceEntry> u = b.snapshot().deviceTraces().getFirst();
        assertThat(u.get(2).frames().getFirst().line()).isEqualTo(1); // free carries the allocation stack
        assertThat(calls2.get()).isEqualTo(1);
    }

    /**
     * allocator.md §10.1: a second {@code _record_memory_history} call while recording only changes PyTorch's ring
     * limit ({@code RingBuffer::setMaxEntries}); the entries already held stay in their slots. With max_entries 2,
     * three allocs leave [a3, a2] with the overwrite position at 1; at max_entries 4 the next two are appended, and
     * the trace reads from position 1: a2, a4, a5, a3.
     */
    @Test
    void reEnablingWithMoreEntriesKeepsTheRingSlotsAsPyTorchDoes() {
        CachingAllocator a = allocator(new AtomicInteger());
        a.malloc(MiB); // a 2 MiB small segment: the next allocs are served from it, one alloc entry each
        a.recordHistory(new HistoryOptions(Enabled.ALL, Context.NONE, 2));
        long[] p = new long[6];
        for (int i = 1; i <= 3; i++) {
            p[i] = a.malloc(1024);
        }
        a.recordHistory(new HistoryOptions(Enabled.ALL, Context.NONE, 4));
        p[4] = a.malloc(1024);
        p[5] = a.malloc(1024);
        List<TraceEntry> t = a.snapshot().deviceTraces().getFirst();
        assertThat(t).extracting(TraceEntry::action).containsOnly(TraceAction.ALLOC);
        assertThat(t).extracting(TraceEntry::addr).containsExactly(p[2], p[4], p[5], p[3]);
    }

    @Test
    void contextStateKeepsStacksOnLiveBlocksOnly() {
        AtomicInteger calls = new AtomicInteger();
        CachingAllocator a = allocator(calls);
        a.recordHistory(new HistoryOptions(Enabled.STATE, Context.STATE, 100));
        long p = a.malloc(MiB);
        long q = a.malloc(MiB / 2);
        a.free(q);
        MemorySnapshot snap = a.snapshot();
        assertThat(snap.deviceTraces().getFirst()).hasSize(1); // "state" keeps a one-entry buffer
        assertThat(snap.deviceTraces().getFirst().getFirst().frames()).isNull();
        SegmentInfo seg = snap.segments().getFirst();
        assertThat(seg.blocks().getFirst().state()).isEqualTo(BlockState.ACTIVE_ALLOCATED);
        assertThat(seg.blocks().getFirst().frames()).isNotEmpty();
        assertThat(seg.blocks().get(1).state()).isEqualTo(BlockState.INACTIVE);
        assertThat(seg.blocks().get(1).frames()).isEmpty();
        assertThat(seg.blocks().get(1).requestedSize()).isEqualTo(MiB / 2); // stale after free
        assertThat(seg.frames()).isNotEmpty();
        assertThat(seg.allocatedSize()).isEqualTo(MiB);
        assertThat(seg.totalSize()).isEqualTo(2 * MiB);
        a.free(p);
    }

    @Test
    void trackersSeeEntriesWithHistoryOffAndSnapshotEntryCountsActiveBytes() {
        CachingAllocator a = new CachingAllocator(
                SimulatedDevice.builder().capacity(8L << 30).build());
        List<TraceEntry> seen = new ArrayList<>();
        a.internals().attachTraceTracker(seen::add);
        long p = a.malloc(3 * MiB);
        a.snapshot();
        assertThat(seen)
                .extracting(TraceEntry::action)
                .containsExactly(TraceAction.SEGMENT_ALLOC, TraceAction.ALLOC, TraceAction.SNAPSHOT);
        assertThat(seen.getLast().size()).isEqualTo(3 * MiB);
        assertThat(a.snapshot().deviceTraces().getFirst()).isEmpty();
        assertThat(a.internals().detachTraceTracker(seen::add)).isFalse();
        a.free(p);
    }

    @Test
    void driverCallListenersSeeDriverCallsOnlyWithHistoryOff() {
        CachingAllocator a = new CachingAllocator(
                SimulatedDevice.builder().capacity(8L << 30).build());
        List<String> seen = new ArrayList<>();
        DriverCallListener listener =
                (action, addr, size, stream) -> seen.add(action + " " + Long.toHexString(addr) + " " + size);
        a.internals().attachDriverCallListener(listener);
        long p = a.malloc(3 * MiB);
        a.free(p);
        a.snapshot();
        a.emptyCache();
        // the segment's driver calls, none of its alloc, free or snapshot entries
        assertThat(seen)
                .containsExactly(
                        "SEGMENT_ALLOC " + Long.toHexString(p) + " " + 20 * MiB,
                        "SEGMENT_FREE " + Long.toHexString(p) + " " + 20 * MiB);
        assertThat(a.snapshot().deviceTraces().getFirst()).isEmpty();
        assertThat(a.internals().detachDriverCallListener(listener)).isTrue();
        a.malloc(MiB);
        assertThat(seen).hasSize(2);
    }

    @Test
    void withoutAnInjectedClockEntriesAreStampedWithTheWallClockInMicroseconds() {
        CachingAllocator a = new CachingAllocator(
                SimulatedDevice.builder().capacity(8L << 30).build());
        a.recordHistory(HistoryOptions.all());
        long before = System.currentTimeMillis() * 1000;
        a.free(a.malloc(MiB));
        long after = (System.currentTimeMillis() + 1) * 1000;
        List<TraceEntry> t = a.snapshot().deviceTraces().getFirst();
        assertThat(t).isNotEmpty();
        // PyTorch's time_us: microseconds since the epoch, as the viewers put entries on a time axis
        assertThat(t).allSatisfy(e -> assertThat(e.timeUs()).isBetween(before, after));
    }
}
