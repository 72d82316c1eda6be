package io.gpumem.alloc;

import static io.gpumem.testing.TestSizes.GiB;
import static io.gpumem.testing.TestSizes.MiB;
import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.device.DeviceOp;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.history.BlockInfo;
import io.gpumem.history.BlockState;
import io.gpumem.history.Frame;
import io.gpumem.history.HistoryOptions;
import io.gpumem.history.HistoryOptions.Context;
import io.gpumem.history.HistoryOptions.Enabled;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.oom.OomReport;
import io.gpumem.oom.OutOfMemoryException;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * Corners of the exact allocator that the broad tests ran through without pinning what a user sees there (each was
 * found as a surviving PIT mutant; docs/testing.md): the OOM report's largest free blocks, the oversize release
 * before a retry, empty_cache waiting for recorded streams, event reuse, the stacks of free and segment entries.
 */
class AllocatorCornersTest {

    @Test
    void theOomReportListsTheLargestCachedBlockOfEachPoolAndStream() {
        SimulatedDevice dev = SimulatedDevice.builder().capacity(GiB).build();
        CachingAllocator a = new CachingAllocator(dev);
        long side = dev.createStream();
        // stream 0, large pool: a 20 MiB segment keeps 12 MiB free beside an 8 MiB block
        a.malloc(8 * MiB);
        // the side stream, large pool: 15 MiB free beside 5 MiB
        a.malloc(5 * MiB, side);
        // stream 0, small pool: two segments with free space, 1 MiB in one and 1.5 MiB in the other
        long y1 = a.malloc(MiB);
        a.malloc(MiB);
        a.malloc(MiB / 2);
        a.free(y1);

        OomReport report = null;
        try {
            a.malloc(4 * GiB);
        } catch (OutOfMemoryException e) {
            report = e.report();
        }
        assertThat(report).as("4 GiB on a 1 GiB device").isNotNull();

        // independently: the largest inactive block per (pool, stream) in the allocator's own snapshot
        Map<String, Long> expected = new HashMap<>();
        for (SegmentInfo s : a.snapshot().segments()) {
            for (BlockInfo b : s.blocks()) {
                if (b.state() == BlockState.INACTIVE) {
                    expected.merge(s.pool() + "/" + s.stream(), b.size(), Math::max);
                }
            }
        }
        assertThat(expected)
                .containsEntry("LARGE/0", 12 * MiB)
                .containsEntry("LARGE/" + side, 15 * MiB)
                .containsEntry("SMALL/0", 3 * MiB / 2)
                .hasSize(3);
        Map<String, Long> listed = new HashMap<>();
        for (OomReport.LargestFree f : report.largestFreeBlocks()) {
            assertThat(listed.put(f.pool() + "/" + f.stream(), f.size()))
                    .as("one entry per pool and stream")
                    .isNull();
        }
        assertThat(listed).isEqualTo(expected);
    }

    @Test
    void cachedOversizeBlocksReleasedExactlyEnoughSpareTheFullRetry() {
        // max_split_size 22 MiB: cached blocks of 22 and 26 MiB are both oversize (size >= max_split_size); a 48 MiB
        // request that does not fit beside them frees the largest first, then the next, and 48 MiB released is just
        // enough: no retry (num_alloc_retries), no release of the whole cache
        SimulatedDevice dev = SimulatedDevice.builder().capacity(60 * MiB).build();
        CachingAllocator a = new CachingAllocator(dev, AllocatorConfig.parse("max_split_size_mb:22"));
        long p = a.malloc(22 * MiB);
        long q = a.malloc(26 * MiB);
        a.free(p);
        a.free(q);
        a.malloc(48 * MiB);
        assertThat(a.stats().numAllocRetries()).isZero();
        assertThat(a.stats().numDeviceFree()).isEqualTo(2);
        assertThat(a.reservedBytes()).isEqualTo(48 * MiB);
    }

    @Test
    void garbageCollectionFreesTheOldestBlocksPassByPassUntilEnoughIsReclaimed() {
        // garbage_collection_threshold 0.5 of a 100 MiB allowance: a miss above 50 MiB reserved frees unsplit cached
        // large blocks whose age (get_free_block calls since cached) is at least the mean age, then again with the
        // mean of those left, until the excess over 50 MiB is reclaimed (PyTorch's garbage_collect_cached_blocks)
        SimulatedDevice dev = SimulatedDevice.builder().capacity(100 * MiB).build();
        CachingAllocator a = new CachingAllocator(dev, AllocatorConfig.parse("garbage_collection_threshold:0.5"));
        a.setMemoryFraction(1.0);
        long x = a.malloc(12 * MiB);
        long y = a.malloc(14 * MiB);
        long z = a.malloc(16 * MiB);
        a.malloc(20 * MiB);
        long[] ticker = {a.malloc(10 * MiB)};
        Runnable tick = () -> { // one get_free_block call on the large pool, served from the cache
            a.free(ticker[0]);
            ticker[0] = a.malloc(10 * MiB);
        };
        a.free(x);
        for (int i = 0; i < 5; i++) {
            tick.run();
        }
        a.free(y);
        for (int i = 0; i < 3; i++) {
            tick.run();
        }
        a.free(z);
        tick.run();
        assertThat(a.reservedBytes()).isEqualTo(72 * MiB);
        // at the miss the ages are 10, 5 and 2 (mean 5.7): the first pass frees the 12 MiB block; 22 MiB are due, so a
        // second pass (mean of 5 and 2: 3.5) frees the 14 MiB block and stops there, keeping the youngest
        a.malloc(30 * MiB);
        assertThat(a.stats().numDeviceFree()).isEqualTo(2);
        assertThat(a.reservedBytes()).isEqualTo((72 - 12 - 14 + 30) * MiB);
        assertThat(a.snapshot().segments())
                .extracting(SegmentInfo::totalSize)
                .containsExactlyInAnyOrder(16 * MiB, 20 * MiB, 10 * MiB, 30 * MiB);
    }

    @Test
    void emptyCacheWaitsForRecordedStreamsBeforeGivingMemoryBack() {
        SimulatedDevice dev = SimulatedDevice.builder().capacity(GiB).build();
        CachingAllocator a = new CachingAllocator(dev);
        long side = dev.createStream();
        dev.holdEvents(true);
        long p = a.malloc(MiB);
        a.recordStream(p, side);
        a.free(p);
        assertThat(dev.pendingEventCount()).isEqualTo(1);
        assertThat(a.reservedBytes()).isEqualTo(2 * MiB); // still in use on the side stream

        a.emptyCache();
        assertThat(dev.callCount(DeviceOp.SYNCHRONIZE_EVENT)).isEqualTo(1);
        assertThat(dev.pendingEventCount()).isZero();
        assertThat(a.reservedBytes()).isZero();
    }

    @Test
    void aCompletedEventIsReusedForTheNextRecordedStream() {
        SimulatedDevice dev = SimulatedDevice.builder().capacity(GiB).build();
        CachingAllocator a = new CachingAllocator(dev);
        long side = dev.createStream();
        for (int round = 0; round < 3; round++) {
            long p = a.malloc(MiB); // processes the events of the round before: its event goes back to the pool
            a.recordStream(p, side);
            a.free(p);
            dev.completeAllEvents();
        }
        assertThat(dev.callCount(DeviceOp.RECORD_EVENT)).isEqualTo(3);
        assertThat(dev.callCount(DeviceOp.CREATE_EVENT)).isEqualTo(1);
    }

    @Test
    void freeAndSegmentEntriesCarryTheStackOfTheCallThatCausedThem() {
        for (boolean expandable : new boolean[] {false, true}) {
            AtomicInteger calls = new AtomicInteger();
            CachingAllocator a = new CachingAllocator(
                    SimulatedDevice.builder().capacity(GiB).build(),
                    AllocatorConfig.parse("expandable_segments:" + (expandable ? "True" : "False")));
            a.setContextSupplier(() -> List.of(new Frame("f.py", calls.incrementAndGet(), "step")));
            a.recordHistory(new HistoryOptions(Enabled.ALL, Context.ALL, 100));
            long p = a.malloc(MiB); // stack 1
            a.free(p); // stack 2
            a.emptyCache(); // stack 3
            List<TraceEntry> t = a.snapshot().deviceTraces().getFirst();
            String what = expandable ? "expandable" : "cudaMalloc'd";
            assertThat(t)
                    .as(what)
                    .extracting(TraceEntry::action)
                    .containsExactly(
                            expandable ? TraceAction.SEGMENT_MAP : TraceAction.SEGMENT_ALLOC,
                            TraceAction.ALLOC,
                            TraceAction.FREE_REQUESTED,
                            TraceAction.FREE_COMPLETED,
                            expandable ? TraceAction.SEGMENT_UNMAP : TraceAction.SEGMENT_FREE);
            assertThat(t).as(what).extracting(e -> e.frames().getFirst().line()).containsExactly(1L, 1L, 2L, 2L, 3L);
        }
    }

    @Test
    void atContextAllocFreeAndSegmentEntriesFallBackToTheAllocationStacks() {
        AtomicInteger calls = new AtomicInteger();
        CachingAllocator a = new CachingAllocator(
                SimulatedDevice.builder().capacity(GiB).build(), AllocatorConfig.parse("expandable_segments:True"));
        a.setContextSupplier(() -> List.of(new Frame("f.py", calls.incrementAndGet(), "step")));
        a.recordHistory(new HistoryOptions(Enabled.ALL, Context.ALLOC, 100));
        long p = a.malloc(MiB); // the one stack taken
        a.free(p);
        a.emptyCache();
        List<TraceEntry> t = a.snapshot().deviceTraces().getFirst();
        assertThat(t).extracting(e -> e.frames().getFirst().line()).containsOnly(1L);
        assertThat(calls.get()).isEqualTo(1);
    }

    @Test
    void setConfigAppliesToLaterDecisionsAndKeepsTheReportedMaxSplitSize() {
        SimulatedDevice dev = SimulatedDevice.builder().capacity(GiB).build();
        CachingAllocator a = new CachingAllocator(dev);
        a.free(a.malloc(60 * MiB)); // one cached 60 MiB segment
        AllocatorConfig capped = AllocatorConfig.parse("max_split_size_mb:40");
        a.setConfig(capped);
        assertThat(a.config()).isSameAs(capped);
        // a 60 MiB block is now oversize: a 5 MiB request may not split it and takes a segment of its own
        long before = dev.callCount(DeviceOp.MALLOC);
        a.malloc(5 * MiB);
        assertThat(dev.callCount(DeviceOp.MALLOC)).isEqualTo(before + 1);
        // memory_stats reports max_split_size as it was when the allocator was created (unlimited)
        assertThat(a.stats().maxSplitSize())
                .isEqualTo(AllocatorConfig.defaults().maxSplitSizeReported());
        a.internals().checkInvariants();
    }

    @Test
    void anExabyteRequestReportsTheFractionLimitOnlyWhenOneIsSet() {
        CachingAllocator a =
                new CachingAllocator(SimulatedDevice.builder().capacity(GiB).build());
        OomReport unlimited = exabyteOom(a);
        assertThat(unlimited.moreThanOneExabyte()).isTrue();
        assertThat(unlimited.allowedMaximum()).isEqualTo(-1);
        a.setMemoryFraction(0.5);
        assertThat(exabyteOom(a).allowedMaximum()).isEqualTo(GiB / 2);
    }

    private static OomReport exabyteOom(CachingAllocator a) {
        try {
            a.malloc(1L << 61);
        } catch (OutOfMemoryException e) {
            return e.report();
        }
        throw new AssertionError("a malloc of 2 EB succeeded");
    }
}
