package io.gpumem.alloc;

import static io.gpumem.testing.TestConfigs.expandable;
import static io.gpumem.testing.TestConfigs.maxSplit;
import static io.gpumem.testing.TestSizes.GiB;
import static io.gpumem.testing.TestSizes.KiB;
import static io.gpumem.testing.TestSizes.MiB;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.device.Device;
import io.gpumem.device.DeviceOp;
import io.gpumem.history.BlockState;
import io.gpumem.history.Frame;
import io.gpumem.history.HistoryOptions;
import io.gpumem.history.MemorySnapshot;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.oom.OutOfMemoryException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/**
 * Device-independent behaviour of {@link CachingAllocator}: the worked examples of the spec and the rules
 * behind them, on whatever {@link Device} a subclass provides. gpumem-core runs it on the simulated device; the
 * CUDA module runs it on its backend through the published test-jar. Nothing here may use a particular device
 * implementation's extras: only the {@link Device} interface.
 */
public abstract class CachingAllocatorContractTest {

    /** A fresh device with {@code capacityBytes} of memory, nothing allocated, and the default stream 0. */
    protected abstract Device newDevice(long capacityBytes);

    protected CachingAllocator allocator(long capacity) {
        return new CachingAllocator(newDevice(capacity));
    }

    protected CachingAllocator allocator(long capacity, AllocatorConfig config) {
        return new CachingAllocator(newDevice(capacity), config);
    }

    private static List<TraceEntry> trace(CachingAllocator a) {
        return a.snapshot().deviceTraces().getFirst();
    }

    private static List<String> actions(List<TraceEntry> t) {
        List<String> out = new ArrayList<>();
        for (TraceEntry e : t) {
            out.add(e.action().wireName());
        }
        return out;
    }

    // --------------------------------------------------- allocator.md §6.3 / §8.3 worked example

    @Test
    void workedExampleSection6() {
        CachingAllocator a = allocator(8 * GiB);
        long pa = a.malloc(1000);
        long pb = a.malloc(3 * MiB);
        long pc = a.malloc(25_000_000);
        a.internals().checkInvariants();
        Map<String, Long> mid = a.stats().toPyTorchMap();
        assertThat(mid.get("inactive_split.all.current")).isEqualTo(2);
        assertThat(mid.get("inactive_split_bytes.small_pool.current")).isEqualTo(2_096_128);
        assertThat(mid.get("inactive_split_bytes.large_pool.current")).isEqualTo(17 * MiB);
        assertThat(mid.get("allocated_bytes.large_pool.current")).isEqualTo(3 * MiB + 25_165_824);
        a.free(pb);
        a.free(pa);
        a.internals().checkInvariants();
        Map<String, Long> s = a.stats().toPyTorchMap();
        assertThat(a.reservedBytes()).isEqualTo(48_234_496);
        assertThat(a.allocatedBytes()).isEqualTo(25_165_824);
        assertThat(s.get("requested_bytes.all.current")).isEqualTo(25_000_000);
        assertThat(s.get("segment.all.current")).isEqualTo(3);
        assertThat(s.get("segment.large_pool.current")).isEqualTo(2);
        assertThat(s.get("inactive_split.all.peak")).isEqualTo(2);
        assertThat(s.get("inactive_split.all.current")).isZero();
        // the figures behind the allocator.md §8.3 table
        assertThat(s.get("allocated_bytes.all.peak")).isEqualTo(1024 + 3 * MiB + 25_165_824);
        assertThat(s.get("allocated_bytes.all.freed")).isEqualTo(1024 + 3 * MiB);
        assertThat(s.get("allocated_bytes.small_pool.allocated")).isEqualTo(1024);
        assertThat(s.get("requested_bytes.all.peak")).isEqualTo(1000 + 3 * MiB + 25_000_000);
        assertThat(s.get("reserved_bytes.small_pool.current")).isEqualTo(2 * MiB);
        assertThat(s.get("reserved_bytes.all.freed")).isZero();
        assertThat(s.get("inactive_split_bytes.all.peak")).isEqualTo(19_921_920);
        assertThat(s.get("inactive_split_bytes.all.freed")).isEqualTo(19_921_920);
        assertThat(s.get("allocation.all.allocated")).isEqualTo(3);
        assertThat(s.get("allocation.all.freed")).isEqualTo(2);
        assertThat(s.get("active.large_pool.peak")).isEqualTo(2);
        assertThat(s.get("num_device_alloc")).isEqualTo(3);
        assertThat(s.get("oversize_allocations.peak")).isZero();
        assertThat(s.get("max_split_size")).isEqualTo(-1);

        a.emptyCache();
        a.internals().checkInvariants();
        assertThat(a.reservedBytes()).isEqualTo(25_165_824);
        assertThat(a.stats().toPyTorchMap().get("num_device_free")).isEqualTo(2);
        assertThat(a.stats().toPyTorchMap().get("num_sync_all_streams")).isEqualTo(1);
        a.free(pc);
        a.emptyCache();
        assertThat(a.reservedBytes()).isZero();
        a.internals().checkInvariants();
    }

    @Test
    void memoryStatsHasExactlyPyTorchKeysSorted() {
        CachingAllocator a = allocator(GiB);
        Map<String, Long> s = a.stats().toPyTorchMap();
        List<String> keys = new ArrayList<>(s.keySet());
        assertThat(keys).isSorted();
        // 9 array stats x 3 types x 4 fields + 2 single stats x 4 + 6 scalars
        assertThat(keys).hasSize(9 * 3 * 4 + 2 * 4 + 6);
        assertThat(keys)
                .contains(
                        "active.all.current",
                        "requested_bytes.large_pool.freed",
                        "inactive_split_bytes.small_pool.peak",
                        "oversize_segments.allocated",
                        "num_alloc_retries",
                        "num_ooms",
                        "num_sync_all_streams",
                        "num_device_alloc",
                        "num_device_free",
                        "max_split_size");
        assertThat(allocator(GiB, maxSplit(64 * MiB)).stats().toPyTorchMap().get("max_split_size"))
                .isEqualTo(64 * MiB);
    }

    // --------------------------------------------------- allocator.md §1.5 segment sizes

    @Test
    void segmentSizesFollowGetAllocationSize() {
        long[][] cases = {
            {1, 2 * MiB},
            {1000, 2 * MiB},
            {1_048_576, 2 * MiB},
            {1_048_577, 20 * MiB},
            {9 * MiB, 20 * MiB},
            {10 * MiB - 1, 10 * MiB},
            {25_000_000, 25_165_824},
            {250_000_000, 251_658_240}
        };
        for (long[] c : cases) {
            CachingAllocator a = allocator(8 * GiB);
            a.malloc(c[0]);
            assertThat(a.reservedBytes()).as("segment for %d", c[0]).isEqualTo(c[1]);
            a.internals().checkInvariants();
        }
    }

    @Test
    void zeroSizeTouchesNothingAndNegativeSizeIsRejected() {
        CachingAllocator a = allocator(GiB);
        a.recordHistory(HistoryOptions.all());
        assertThat(a.malloc(0)).isZero();
        assertThat(a.stats().toPyTorchMap().get("num_device_alloc")).isZero();
        assertThatThrownBy(() -> a.malloc(-1))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("-1");
        assertThat(trace(a)).isEmpty();
    }

    @Test
    void exabyteRequestsFailWithPyTorchText() {
        CachingAllocator a = allocator(GiB);
        assertThatThrownBy(() -> a.malloc(1L << 60))
                .isInstanceOf(OutOfMemoryException.class)
                .hasMessage("CUDA out of memory. Tried to allocate more than 1EB memory.");
        assertThat(a.stats().toPyTorchMap().get("num_ooms")).isZero();
    }

    // ---------------------------------------------------------------- best fit, splitting, merging

    @Test
    void bestFitPrefersSmallestThenLowestAddress() {
        CachingAllocator a = allocator(8 * GiB);
        long x = a.malloc(12 * MiB); // own 12 MiB segment
        long y = a.malloc(16 * MiB); // own 16 MiB segment
        long z = a.malloc(12 * MiB); // own 12 MiB segment
        a.free(x);
        a.free(y);
        a.free(z);
        long lowest12 = Long.compareUnsigned(x, z) < 0 ? x : z;
        assertThat(a.malloc(11 * MiB)).isEqualTo(lowest12);
        assertThat(a.stats().toPyTorchMap().get("segment.all.current")).isEqualTo(3);
        a.internals().checkInvariants();
    }

    @Test
    void blocksAreNeverSharedAcrossStreams() {
        CachingAllocator a = allocator(8 * GiB);
        long s1 = a.device().createStream();
        long p = a.malloc(4 * MiB, 0);
        a.free(p);
        long q = a.malloc(4 * MiB, s1);
        assertThat(a.stats().toPyTorchMap().get("segment.large_pool.current")).isEqualTo(2);
        assertThat(q).isNotEqualTo(p);
        a.free(q);
        a.internals().checkInvariants();
    }

    @Test
    void largeRemainderOfOneMibOrLessIsNotSplit() {
        CachingAllocator a = allocator(8 * GiB);
        long p = a.malloc(19 * MiB + 512 * KiB); // 20 MiB segment, 0.5 MiB remainder is kept
        assertThat(a.allocatedBytes()).isEqualTo(20 * MiB);
        a.free(p);
        long q = a.malloc(19 * MiB); // remainder exactly 1 MiB: still not split (> 1 MiB needed)
        assertThat(q).isEqualTo(p);
        assertThat(a.allocatedBytes()).isEqualTo(20 * MiB);
        a.free(q);
        long r = a.malloc(18 * MiB + 512 * KiB); // remainder 1.5 MiB: split
        assertThat(a.allocatedBytes()).isEqualTo(18 * MiB + 512 * KiB);
        assertThat(a.stats().toPyTorchMap().get("inactive_split_bytes.large_pool.current"))
                .isEqualTo(MiB + 512 * KiB);
        a.free(r);
        a.internals().checkInvariants();
    }

    @Test
    void smallPoolSplitsAtRemainderOf512() {
        CachingAllocator b = allocator(GiB);
        long q = b.malloc(MiB); // small pool (≤ 1 MiB), 2 MiB segment
        long r = b.malloc(MiB - 512); // leaves exactly 512: split
        assertThat(b.stats().toPyTorchMap().get("allocated_bytes.small_pool.current"))
                .isEqualTo(2 * MiB - 512);
        assertThat(b.stats().toPyTorchMap().get("inactive_split_bytes.small_pool.current"))
                .isEqualTo(512);
        assertThat(r).isEqualTo(q + MiB);
        long t = b.malloc(512); // takes the last 512 bytes whole
        assertThat(t).isEqualTo(r + MiB - 512);
        assertThat(b.stats().toPyTorchMap().get("inactive_split.small_pool.current"))
                .isZero();
        assertThat(b.stats().toPyTorchMap().get("segment.small_pool.current")).isEqualTo(1);
        b.internals().checkInvariants();
    }

    @Test
    void freeMergesWithBothNeighbours() {
        CachingAllocator a = allocator(GiB);
        long p1 = a.malloc(4 * MiB);
        long p2 = a.malloc(4 * MiB);
        long p3 = a.malloc(4 * MiB);
        assertThat(p2).isEqualTo(p1 + 4 * MiB);
        assertThat(p3).isEqualTo(p2 + 4 * MiB);
        a.free(p1);
        a.free(p3);
        assertThat(a.stats().toPyTorchMap().get("inactive_split.large_pool.current"))
                .isEqualTo(2);
        a.free(p2);
        assertThat(a.stats().toPyTorchMap().get("inactive_split.large_pool.current"))
                .isZero();
        MemorySnapshot snap = a.snapshot();
        assertThat(snap.segments()).hasSize(1);
        assertThat(snap.segments().getFirst().blocks()).hasSize(1);
        assertThat(snap.segments().getFirst().blocks().getFirst().size()).isEqualTo(20 * MiB);
        a.internals().checkInvariants();
    }

    // ---------------------------------------------------------------- oversize rules (allocator.md §2.2, §4.3)

    @Test
    void oversizeBlocksServeOnlyLargeRequestsWithinSlack() {
        CachingAllocator a = allocator(8 * GiB, maxSplit(100 * MiB));
        long big = a.malloc(200 * MiB);
        assertThat(a.stats().toPyTorchMap().get("oversize_allocations.current")).isEqualTo(1);
        assertThat(a.stats().toPyTorchMap().get("oversize_segments.current")).isEqualTo(1);
        a.free(big);
        long small = a.malloc(50 * MiB); // below max_split: never served from the 200 MiB block
        assertThat(small).isNotEqualTo(big);
        long tooSmall = a.malloc(150 * MiB); // 200 ≥ 150 + 20: not reused
        assertThat(tooSmall).isNotEqualTo(big);
        long fits = a.malloc(190 * MiB); // within 20 MiB: reused whole, not split
        assertThat(fits).isEqualTo(big);
        assertThat(a.allocatedBytes()).isEqualTo(50 * MiB + 150 * MiB + 200 * MiB);
        a.internals().checkInvariants();
    }

    // ---------------------------------------------------------------- OOM path (allocator.md §3)

    @Test
    void oomRetryReleasesCacheThenCountsRetryAndReportsPyTorchText() {
        CachingAllocator a = allocator(100 * MiB);
        a.recordHistory(HistoryOptions.all());
        long p = a.malloc(40 * MiB);
        long q = a.malloc(40 * MiB);
        a.free(p);
        // 60 MiB does not fit beside q without releasing p's cached segment
        long r = a.malloc(60 * MiB);
        assertThat(a.stats().toPyTorchMap().get("num_alloc_retries")).isEqualTo(1);
        assertThat(a.stats().toPyTorchMap().get("num_sync_all_streams")).isEqualTo(1);
        assertThat(a.reservedBytes()).isEqualTo(100 * MiB);
        List<String> acts = actions(trace(a));
        assertThat(acts.subList(acts.size() - 3, acts.size()))
                .containsExactly("segment_free", "segment_alloc", "alloc");
        a.internals().checkInvariants();

        assertThatThrownBy(() -> a.malloc(30 * MiB)).isInstanceOfSatisfying(OutOfMemoryException.class, e -> {
            assertThat(e.getMessage())
                    .startsWith("CUDA out of memory. Tried to allocate 30.00 MiB. GPU "
                            + a.device().index() + " has a total capacity of 100.00 MiB of which ");
            assertThat(e.getMessage())
                    .contains("Of the allocated memory 100.00 MiB is allocated by PyTorch, and "
                            + "0 bytes is reserved by PyTorch but unallocated. If reserved but unallocated memory is large"
                            + " try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See"
                            + " documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html"
                            + "#environment-variables)");
            assertThat(e.report().roundedSize()).isEqualTo(30 * MiB);
            assertThat(e.report().allocSize()).isEqualTo(30 * MiB);
            assertThat(e.report().requestedBytes()).isEqualTo(30 * MiB);
            assertThat(e.report().reservedBytes()).isEqualTo(100 * MiB);
        });
        Map<String, Long> s = a.stats().toPyTorchMap();
        assertThat(s.get("num_ooms")).isEqualTo(1);
        assertThat(s.get("num_alloc_retries")).isEqualTo(2);
        TraceEntry last = trace(a).getLast();
        assertThat(last.action()).isEqualTo(TraceAction.OOM);
        assertThat(last.size()).isEqualTo(30 * MiB);
        assertThat(last.deviceFree()).isEqualTo(a.device().freeMemory());
        a.internals().checkInvariants();
        a.free(q);
        a.free(r);
        a.internals().checkInvariants();
    }

    @Test
    void memoryFractionCapsReservationWithoutCallingTheDevice() {
        CachingAllocator a = allocator(GiB);
        a.setMemoryFraction(0.25);
        long p = a.malloc(200 * MiB);
        long calls = a.device().callCount(DeviceOp.MALLOC);
        assertThatThrownBy(() -> a.malloc(100 * MiB))
                .isInstanceOfSatisfying(
                        OutOfMemoryException.class,
                        e -> assertThat(e.getMessage()).contains("256.00 MiB allowed; "));
        assertThat(a.device().callCount(DeviceOp.MALLOC)).isEqualTo(calls);
        assertThatThrownBy(() -> a.setMemoryFraction(1.5)).isInstanceOf(IllegalArgumentException.class);
        a.free(p);
        a.internals().checkInvariants();
    }

    @Test
    void garbageCollectionReleasesBlocksOlderThanTheAverageAge() {
        CachingAllocator a = allocator(
                GiB,
                AllocatorConfig.defaults().toBuilder()
                        .garbageCollectionThreshold(0.25)
                        .raw("garbage_collection_threshold:0.25")
                        .build());
        a.setMemoryFraction(1.0); // GC needs a fraction; threshold = 256 MiB
        long s1 = a.device().createStream();
        long blockA = a.malloc(100 * MiB); // GC clock 1
        long blockB = a.malloc(100 * MiB); // 2
        a.free(blockA); // A's age base 2
        a.malloc(12 * MiB, s1); // 3 (miss; 212 MiB reserved, under the threshold)
        a.malloc(12 * MiB, s1); // 4
        a.free(blockB); // B's age base 4
        a.malloc(50 * MiB, s1); // 5 (274 MiB reserved after it)
        assertThat(a.stats().toPyTorchMap().get("num_device_free")).isZero();
        a.malloc(50 * MiB, s1); // 6: GC, ages A=4, B=2, average 3: only A goes
        Map<String, Long> s = a.stats().toPyTorchMap();
        assertThat(s.get("num_device_free")).isEqualTo(1);
        assertThat(a.reservedBytes()).isEqualTo((100 + 12 + 12 + 50 + 50) * MiB);
        assertThat(a.malloc(100 * MiB)).isEqualTo(blockB); // B is still cached
        assertThat(s.get("num_sync_all_streams")).isZero(); // GC does not synchronise
        a.internals().checkInvariants();
    }

    @Test
    void releaseAvailableFreesOversizeBlocksBeforeEmptyingTheCache() {
        CachingAllocator a = allocator(300 * MiB, maxSplit(64 * MiB));
        long big1 = a.malloc(100 * MiB);
        long big2 = a.malloc(80 * MiB);
        long small = a.malloc(30 * MiB);
        a.free(big1);
        a.free(big2);
        a.free(small);
        // 150 MiB fits only after releasing cached oversize blocks: the largest ones go first, the
        // non-oversize 30 MiB segment stays, no empty_cache (no sync, no retry)
        a.malloc(150 * MiB);
        Map<String, Long> s = a.stats().toPyTorchMap();
        assertThat(s.get("num_alloc_retries")).isZero();
        assertThat(s.get("num_sync_all_streams")).isZero();
        assertThat(s.get("num_device_free")).isEqualTo(2);
        assertThat(s.get("oversize_segments.current")).isEqualTo(1);
        assertThat(a.reservedBytes()).isEqualTo(180 * MiB);
        assertThat(a.malloc(30 * MiB)).isEqualTo(small);
        a.internals().checkInvariants();
    }

    // ---------------------------------------------------------------- bad input

    @Test
    void foreignPointerAndDoubleFreeAreRejectedWithoutDamage() {
        CachingAllocator a = allocator(GiB);
        long p = a.malloc(4096);
        Map<String, Long> before = a.stats().toPyTorchMap();
        assertThatThrownBy(() -> a.free(p + 512))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("0x" + Long.toHexString(p + 512));
        assertThat(a.stats().toPyTorchMap()).isEqualTo(before);
        a.free(p);
        Map<String, Long> after = a.stats().toPyTorchMap();
        assertThatThrownBy(() -> a.free(p))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("0x" + Long.toHexString(p));
        assertThat(a.stats().toPyTorchMap()).isEqualTo(after);
        assertThatThrownBy(() -> a.recordStream(p, 3)).isInstanceOf(IllegalArgumentException.class);
        a.internals().checkInvariants();
    }

    // ---------------------------------------------------------------- record_stream (device completes events itself)

    @Test
    void recordStreamDefersReuseUntilEventsAreObserved() {
        CachingAllocator a = allocator(GiB);
        long s1 = a.device().createStream();
        long p = a.malloc(MiB);
        a.recordStream(p, s1);
        a.recordStream(p, 0); // own stream: ignored
        a.free(p);
        Map<String, Long> s = a.stats().toPyTorchMap();
        assertThat(s.get("allocated_bytes.all.current")).isZero();
        assertThat(s.get("active_bytes.all.current")).isEqualTo(MiB);
        a.device().synchronizeDevice();
        a.emptyCache(); // synchronize_and_free_events completes it
        assertThat(a.stats().toPyTorchMap().get("active_bytes.all.current")).isZero();
        assertThat(a.reservedBytes()).isZero();
        a.internals().checkInvariants();
    }

    // ---------------------------------------------------------------- expandable segments (allocator.md §5)

    @Test
    void workedExampleExpandableSegments() {
        Device d = newDevice(80 * GiB);
        assumeTrue(d.supportsVirtualMemory(), "device has no virtual memory management");
        CachingAllocator a = new CachingAllocator(d, expandable());
        a.recordHistory(HistoryOptions.all());
        long p = a.malloc(3 * MiB);
        assertThat(a.reservedBytes()).isEqualTo(20 * MiB);
        assertThat(a.allocatedBytes()).isEqualTo(3 * MiB);
        long q = a.malloc(30 * MiB);
        assertThat(q).isEqualTo(p + 3 * MiB);
        Map<String, Long> s = a.stats().toPyTorchMap();
        assertThat(s.get("reserved_bytes.all.current")).isEqualTo(40 * MiB);
        assertThat(s.get("allocated_bytes.all.current")).isEqualTo(33 * MiB);
        assertThat(s.get("num_device_alloc")).isEqualTo(2);
        assertThat(s.get("segment.all.current")).isZero();
        a.internals().checkInvariants();
        a.free(p);
        a.free(q);
        assertThat(a.stats().toPyTorchMap().get("inactive_split.all.current")).isZero();
        a.emptyCache();
        s = a.stats().toPyTorchMap();
        assertThat(s.get("reserved_bytes.all.current")).isZero();
        assertThat(s.get("num_device_free")).isEqualTo(1);
        assertThat(d.callCount(DeviceOp.FREE_ADDRESS)).isEqualTo(1);
        a.internals().checkInvariants();
        List<TraceEntry> t = trace(a);
        assertThat(actions(t))
                .containsExactly(
                        "segment_map",
                        "alloc",
                        "segment_map",
                        "alloc",
                        "free_requested",
                        "free_completed",
                        "free_requested",
                        "free_completed",
                        "segment_unmap");
        assertThat(t.get(0).addr()).isEqualTo(p);
        assertThat(t.get(0).size()).isEqualTo(20 * MiB);
        assertThat(t.get(2).addr()).isEqualTo(p + 20 * MiB);
        assertThat(t.get(2).size()).isEqualTo(20 * MiB);
        assertThat(t.get(8).addr()).isEqualTo(p);
        assertThat(t.get(8).size()).isEqualTo(40 * MiB);
    }

    @Test
    void expandableSnapshotReportsOneSegmentPerMappedRun() {
        Device d = newDevice(80 * GiB);
        assumeTrue(d.supportsVirtualMemory(), "device has no virtual memory management");
        CachingAllocator a = new CachingAllocator(d, expandable());
        long p1 = a.malloc(20 * MiB);
        long p2 = a.malloc(20 * MiB);
        long p3 = a.malloc(20 * MiB);
        a.free(p2);
        a.emptyCache(); // unmaps the middle page
        assertThat(a.reservedBytes()).isEqualTo(40 * MiB);
        List<SegmentInfo> segs = a.snapshot().segments();
        assertThat(segs).extracting(SegmentInfo::address).containsExactly(p1, p3);
        assertThat(segs).allSatisfy(si -> {
            assertThat(si.expandable()).isTrue();
            assertThat(si.totalSize()).isEqualTo(20 * MiB);
        });
        a.internals().checkInvariants();
        long p4 = a.malloc(20 * MiB); // lowest-address gap is refilled
        assertThat(p4).isEqualTo(p2);
        a.internals().checkInvariants();
    }

    @Test
    void smallPoolExpandableGrowsByTwoMibPages() {
        Device d = newDevice(80 * GiB);
        assumeTrue(d.supportsVirtualMemory(), "device has no virtual memory management");
        CachingAllocator a = new CachingAllocator(d, expandable());
        long p = a.malloc(MiB);
        long q = a.malloc(MiB);
        long r = a.malloc(MiB);
        assertThat(a.stats().toPyTorchMap().get("reserved_bytes.small_pool.current"))
                .isEqualTo(4 * MiB);
        assertThat(q).isEqualTo(p + MiB);
        assertThat(r).isEqualTo(p + 2 * MiB);
        a.internals().checkInvariants();
    }

    @Test
    void turningExpandableOffSkipsExpandableBlocksAndOnAgainReusesThem() {
        Device d = newDevice(80 * GiB);
        assumeTrue(d.supportsVirtualMemory(), "device has no virtual memory management");
        CachingAllocator b = new CachingAllocator(d);
        b.setSettings("expandable_segments:True,max_split_size_mb:200");
        assertThat(b.config().maxSplitSize()).isEqualTo(200 * MiB);
        long x = b.malloc(4 * MiB);
        b.free(x);
        b.setSettings("expandable_segments:False");
        assertThat(b.config().maxSplitSize()).isEqualTo(AllocatorConfig.UNLIMITED); // reset on every parse
        long y = b.malloc(4 * MiB); // a cudaMalloc'd segment, not the expandable block
        assertThat(y).isNotEqualTo(x);
        assertThat(b.stats().toPyTorchMap().get("segment.all.current")).isEqualTo(1);
        b.free(y);
        b.setSettings("expandable_segments:True");
        // both free blocks are 20 MiB; whichever address order, the classic one wins: it is either first, or the
        // expandable block in front of its huge unmapped tail makes best fit walk on to it (allocator.md §2.2)
        long z = b.malloc(4 * MiB);
        assertThat(z).isEqualTo(y);
        b.internals().checkInvariants();
        assertThatThrownBy(() -> b.setSettings("expandable_segments:maybe"))
                .isInstanceOf(io.gpumem.config.ConfigException.class);
        assertThat(b.config().expandableSegments()).isTrue();
        assertThat(b.stats().toPyTorchMap().get("max_split_size")).isEqualTo(-1); // fixed at creation
    }

    // ---------------------------------------------------------------- history (allocator.md §10)

    @Test
    void historyRingKeepsMostRecentEntriesWithInjectedClockAndFrames() {
        CachingAllocator a = allocator(GiB);
        AtomicLong clock = new AtomicLong(1000);
        a.internals().setClock(clock::incrementAndGet);
        List<Frame> frames = List.of(new Frame("model.py", 12, "forward"));
        a.setContextSupplier(() -> frames);
        a.recordHistory(HistoryOptions.all(3));
        long p = a.malloc(100);
        a.free(p);
        long q = a.malloc(200);
        List<TraceEntry> t = trace(a);
        assertThat(actions(t)).containsExactly("free_requested", "free_completed", "alloc");
        assertThat(t.getLast().size()).isEqualTo(200);
        assertThat(t.getLast().frames()).isEqualTo(frames);
        assertThat(t).extracting(TraceEntry::timeUs).isSorted();
        // the snapshot entry of the first snapshot shows up in the next one
        assertThat(actions(trace(a))).containsExactly("free_completed", "alloc", "snapshot");
        MemorySnapshot snap = a.snapshot();
        assertThat(snap.segments().getFirst().blocks().getFirst().state()).isEqualTo(BlockState.ACTIVE_ALLOCATED);
        assertThat(snap.segments().getFirst().blocks().getFirst().frames()).isEqualTo(frames);
        assertThat(snap.allocatorSettings())
                .containsEntry("max_split_size", -1L)
                .containsEntry("expandable_segments", false)
                .containsKey("roundup_power2_divisions");
        a.recordHistory(HistoryOptions.off());
        a.recordHistory(new HistoryOptions(HistoryOptions.Enabled.ALL, HistoryOptions.Context.NONE, 10));
        a.free(q);
        assertThat(trace(a)).hasSize(2).allSatisfy(e -> assertThat(e.frames()).isNull());
    }
}
