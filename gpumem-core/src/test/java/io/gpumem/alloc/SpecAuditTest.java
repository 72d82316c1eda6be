package io.gpumem.alloc;

import static io.gpumem.alloc.SpecAuditSupport.*;
import static io.gpumem.testing.TestConfigs.maxSplit;
import static io.gpumem.testing.TestSizes.GiB;
import static io.gpumem.testing.TestSizes.KiB;
import static io.gpumem.testing.TestSizes.MiB;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.device.DeviceOp;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.history.HistoryOptions;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.oom.OutOfMemoryException;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * An audit of {@link CachingAllocator} against docs/allocator.md, rule by rule, for the rules
 * that real-trace replays (default config, plus expandable segments) never exercise and that the other test
 * classes do not pin. Every expected figure is worked out by hand from the rules in the comments next to it;
 * the section of docs/allocator.md each test pins is in the comment above it. Expandable segments
 * (allocator.md §5) are audited in {@link SpecAuditExpandableTest}.
 */
class SpecAuditTest {
    // --------------------------------------------------- allocator.md §1.2/§1.3 roundup divisions through malloc

    @Test
    void roundupDivisionsDecideTheBlockSizes() {
        int[] four = new int[AllocatorConfig.ROUNDUP_INTERVALS];
        Arrays.fill(four, 4);
        CachingAllocator a = new CachingAllocator(
                device(GiB),
                cfg().roundupPower2Divisions(four)
                        .raw("roundup_power2_divisions:4")
                        .build());
        // 1200 is not above 512·4 = 2048: plain 512 rounding gives 1536 (not the 1280 of the division helper)
        long p1 = a.malloc(1200);
        assertThat(a.internals().blockSize(p1)).isEqualTo(1536);
        // 3000 > 2048: F = 2048, step 2048 >> 2 = 512 → 3072
        long p2 = a.malloc(3000);
        assertThat(a.internals().blockSize(p2)).isEqualTo(3072);
        // 1,200,000: F = 1 MiB, step 256 KiB → 5 steps = 1,310,720 (large pool, split off a 20 MiB segment)
        long p3 = a.malloc(1_200_000);
        assertThat(a.internals().blockSize(p3)).isEqualTo(1_310_720);
        Map<String, Long> s = a.stats().toPyTorchMap();
        assertThat(s.get("requested_bytes.all.current")).isEqualTo(1200 + 3000 + 1_200_000);
        assertThat(s.get("allocated_bytes.all.current")).isEqualTo(1536 + 3072 + 1_310_720);
        assertThat(s.get("reserved_bytes.small_pool.current")).isEqualTo(2 * MiB);
        assertThat(s.get("reserved_bytes.large_pool.current")).isEqualTo(20 * MiB);
        a.internals().checkInvariants();
    }

    @Test
    void roundupDivisionsApplyPerPowerOfTwoInterval() {
        int[] table = new int[AllocatorConfig.ROUNDUP_INTERVALS];
        table[2] = 4; // index 2 = [4, 8) MiB
        table[8] = 2; // index 8 = [256, 512) MiB
        CachingAllocator a = new CachingAllocator(
                device(4 * GiB),
                cfg().roundupPower2Divisions(table)
                        .raw("roundup_power2_divisions:[4:4,256:2]")
                        .build());
        // 5 MiB + 1 in [4, 8) MiB: F = 4 MiB, step 1 MiB → 6 MiB; a 20 MiB segment (6 MiB < 10 MiB)
        long p = a.malloc(5 * MiB + 1);
        assertThat(a.internals().blockSize(p)).isEqualTo(6 * MiB);
        // 3 MiB + 1 in [2, 4) MiB where the table says 0: plain 512 rounding
        long q = a.malloc(3 * MiB + 1);
        assertThat(a.internals().blockSize(q)).isEqualTo(3 * MiB + 512);
        // (300 MiB + 1) with d = 2: F = 256 MiB, step 128 MiB → 384 MiB, its own 384 MiB segment
        long r = a.malloc(300 * MiB + 1);
        assertThat(a.internals().blockSize(r)).isEqualTo(384 * MiB);
        assertThat(a.reservedBytes()).isEqualTo(20 * MiB + 384 * MiB);
        a.internals().checkInvariants();
    }

    @Test
    void aRoundedMebibyteIsSmallAndOneMoreGoesLarge() {
        CachingAllocator a = new CachingAllocator(device(GiB));
        a.malloc(MiB); // rounded 1,048,576 ≤ 1 MiB: small pool, 2 MiB segment
        Map<String, Long> s = a.stats().toPyTorchMap();
        assertThat(s.get("reserved_bytes.small_pool.current")).isEqualTo(2 * MiB);
        assertThat(s.get("allocation.small_pool.current")).isEqualTo(1);
        a.malloc(MiB + 1); // rounded 1,049,088: large pool, 20 MiB segment
        s = a.stats().toPyTorchMap();
        assertThat(s.get("reserved_bytes.large_pool.current")).isEqualTo(20 * MiB);
        assertThat(s.get("allocation.large_pool.current")).isEqualTo(1);
        a.internals().checkInvariants();
    }

    // --------------------------------------------------- allocator.md §2.2 oversize rule boundaries

    @Test
    void oversizeSlackIsExclusiveAtTwentyMib() {
        CachingAllocator a = new CachingAllocator(device(4 * GiB), maxSplit(100 * MiB));
        long big = a.malloc(200 * MiB);
        a.free(big);
        // request 180 MiB ≥ max_split; block 200 ≥ 180 + 20: refused, a new 180 MiB segment is made
        long p = a.malloc(180 * MiB);
        assertThat(p).isNotEqualTo(big);
        // request 180.5 MiB: 200 ≥ 200.5 is false, so the 200 MiB block serves it whole (no split: ≥ max_split)
        long q = a.malloc(180 * MiB + 512 * KiB);
        assertThat(q).isEqualTo(big);
        assertThat(a.internals().blockSize(q)).isEqualTo(200 * MiB);
        assertThat(a.stats().toPyTorchMap().get("inactive_split.all.current")).isZero();
        a.internals().checkInvariants();
    }

    @Test
    void maxNonSplitRoundingWidensTheSlack() {
        AllocatorConfig c = cfg().maxSplitSize(100 * MiB)
                .maxNonSplitRounding(60 * MiB)
                .raw("max_split_size_mb:100,max_non_split_rounding_mb:60")
                .build();
        CachingAllocator a = new CachingAllocator(device(4 * GiB), c);
        long big = a.malloc(200 * MiB);
        a.free(big);
        long p = a.malloc(140 * MiB); // 200 ≥ 140 + 60: refused
        assertThat(p).isNotEqualTo(big);
        long q = a.malloc(140 * MiB + 512 * KiB); // 200 ≥ 200.5 false: reused whole
        assertThat(q).isEqualTo(big);
        assertThat(a.allocatedBytes()).isEqualTo(140 * MiB + 200 * MiB);
        a.internals().checkInvariants();
    }

    @Test
    void requestOfExactlyMaxSplitIsOversizeAndTakesACachedBlockWhole() {
        CachingAllocator a = new CachingAllocator(device(4 * GiB), maxSplit(100 * MiB));
        long big = a.malloc(110 * MiB);
        a.free(big);
        // 100 MiB is not < max_split, so the "small request" rule does not apply; 110 ≥ 120 is false
        long p = a.malloc(100 * MiB);
        assertThat(p).isEqualTo(big);
        assertThat(a.internals().blockSize(p)).isEqualTo(110 * MiB);
        Map<String, Long> s = a.stats().toPyTorchMap();
        assertThat(s.get("allocated_bytes.all.current")).isEqualTo(110 * MiB);
        assertThat(s.get("requested_bytes.all.current")).isEqualTo(100 * MiB);
        assertThat(s.get("oversize_allocations.current")).isEqualTo(1);
        a.internals().checkInvariants();
    }

    // --------------------------------------------------- allocator.md §2.4/§4.1/§4.2/§6.2 oversize stats

    @Test
    void oversizeStatsFollowBlockAndSegmentSizesAtFreeAndRelease() {
        CachingAllocator a = new CachingAllocator(device(4 * GiB), maxSplit(100 * MiB));
        long p = a.malloc(100 * MiB); // segment 100 MiB ≥ max_split; block 100 MiB ≥ max_split
        // 99 MiB < max_split, but its segment is 100 MiB (2 MiB rounding) and the 1 MiB remainder is not
        // > 1 MiB: the whole 100 MiB block is taken, so it is an oversize allocation too
        long q = a.malloc(99 * MiB);
        assertThat(a.internals().blockSize(q)).isEqualTo(100 * MiB);
        Map<String, Long> s = a.stats().toPyTorchMap();
        assertThat(s.get("oversize_allocations.current")).isEqualTo(2);
        assertThat(s.get("oversize_segments.current")).isEqualTo(2);
        a.free(p);
        a.free(q);
        s = a.stats().toPyTorchMap();
        assertThat(s.get("oversize_allocations.current")).isZero();
        assertThat(s.get("oversize_allocations.freed")).isEqualTo(2);
        assertThat(s.get("oversize_segments.current")).isEqualTo(2); // cached segments still count
        a.emptyCache();
        s = a.stats().toPyTorchMap();
        assertThat(s.get("oversize_segments.current")).isZero();
        assertThat(s.get("oversize_segments.peak")).isEqualTo(2);
        assertThat(s.get("oversize_segments.allocated")).isEqualTo(2);
        assertThat(s.get("oversize_segments.freed")).isEqualTo(2);
        a.internals().checkInvariants();
    }

    // --------------------------------------------------- allocator.md §4.3 release_available_cached_blocks

    @Test
    void releaseAvailableFreesOnlyTheFirstBigEnoughBlock() {
        SimulatedDevice dev = device(400 * MiB);
        CachingAllocator a = new CachingAllocator(dev, maxSplit(64 * MiB));
        long x = a.malloc(100 * MiB);
        long y = a.malloc(300 * MiB); // the device is now full
        a.free(x);
        a.free(y);
        List<TraceEntry> t = tracked(a);
        // 150 MiB: best fit finds y (300 ≥ 150 + 20: refused); cudaMalloc fails; key = max(150, 64) = 150 MiB,
        // the first block ≥ 150 MiB is y: only y is released, true, and the second alloc succeeds
        a.malloc(150 * MiB);
        Map<String, Long> s = a.stats().toPyTorchMap();
        assertThat(s.get("num_device_free")).isEqualTo(1);
        assertThat(s.get("num_alloc_retries")).isZero();
        assertThat(s.get("num_sync_all_streams")).isZero();
        assertThat(a.reservedBytes()).isEqualTo(250 * MiB);
        assertThat(dev.callCount(DeviceOp.MALLOC)).isEqualTo(4); // x, y, the failed try, the good one
        assertThat(actions(t)).containsExactly("segment_free", "segment_alloc", "alloc");
        assertThat(t.getFirst().addr()).isEqualTo(y);
        assertThat(t.getFirst().size()).isEqualTo(300 * MiB);
        assertThat(a.malloc(100 * MiB)).isEqualTo(x); // x stayed cached
        a.internals().checkInvariants();
    }

    @Test
    void releaseAvailableKeepsWhatItReleasedWhenItReturnsFalse() {
        SimulatedDevice dev = device(300 * MiB);
        CachingAllocator a = new CachingAllocator(dev, maxSplit(64 * MiB));
        long x = a.malloc(70 * MiB);
        long y = a.malloc(80 * MiB);
        long z = a.malloc(30 * MiB);
        a.malloc(100 * MiB); // live; 280 MiB of 300 in use
        a.free(x);
        a.free(y);
        a.free(z);
        List<TraceEntry> t = tracked(a);
        // 200 MiB: nothing ≥ 200 is cached; cudaMalloc fails (20 MiB free). key = 200 MiB, no block ≥ key:
        // walk down from the largest: y (80, total 80), x (70, total 150), then z = 30 < max_split stops the walk.
        // 150 < 200: false, so alloc_block is NOT tried again; empty_cache frees z; the counted retry succeeds.
        a.malloc(200 * MiB);
        assertThat(actions(t))
                .containsExactly("segment_free", "segment_free", "segment_free", "segment_alloc", "alloc");
        assertThat(t.subList(0, 3)).extracting(TraceEntry::addr).containsExactly(y, x, z);
        Map<String, Long> s = a.stats().toPyTorchMap();
        assertThat(s.get("num_alloc_retries")).isEqualTo(1);
        assertThat(s.get("num_sync_all_streams")).isEqualTo(1);
        assertThat(s.get("num_device_free")).isEqualTo(3);
        // 4 allocations + first try + the retry: no try between the false return and empty_cache
        assertThat(dev.callCount(DeviceOp.MALLOC)).isEqualTo(6);
        assertThat(a.reservedBytes()).isEqualTo(300 * MiB);
        a.internals().checkInvariants();
    }

    @Test
    void releaseAvailableNeverTouchesAnotherStreamsBlocks() {
        SimulatedDevice dev = device(300 * MiB);
        CachingAllocator a = new CachingAllocator(dev, maxSplit(64 * MiB));
        long s1 = dev.createStream();
        long other = a.malloc(200 * MiB, s1);
        a.malloc(80 * MiB);
        a.free(other);
        List<TraceEntry> t = tracked(a);
        // 100 MiB on stream 0: the 200 MiB block is on s1, so the walk starts before it and finds nothing on
        // stream 0 → false; empty_cache then frees the s1 block and the retry succeeds
        a.malloc(100 * MiB);
        assertThat(a.stats().toPyTorchMap().get("num_alloc_retries")).isEqualTo(1);
        assertThat(actions(t)).containsExactly("segment_free", "segment_alloc", "alloc");
        a.internals().checkInvariants();
    }

    @Test
    void releaseAvailableWalksDownTheRequestStreamFromAnotherStreamsBlock() {
        SimulatedDevice dev = device(400 * MiB);
        CachingAllocator a = new CachingAllocator(dev, maxSplit(64 * MiB));
        long s1 = dev.createStream(); // a higher handle than the default stream 0
        long w = a.malloc(200 * MiB, s1);
        long x = a.malloc(70 * MiB);
        long y = a.malloc(80 * MiB);
        a.malloc(40 * MiB); // live; 390 MiB of 400 in use
        a.free(w);
        a.free(x);
        a.free(y);
        List<TraceEntry> t = tracked(a);
        // 100 MiB on stream 0: the first block ≥ (0, 100 MiB) is w on s1, so the walk starts just before it,
        // at stream 0's largest block: y (80), then x (70): 150 ≥ 100, true, and the second alloc succeeds
        a.malloc(100 * MiB);
        assertThat(actions(t)).containsExactly("segment_free", "segment_free", "segment_alloc", "alloc");
        assertThat(t.subList(0, 2)).extracting(TraceEntry::addr).containsExactly(y, x);
        assertThat(a.stats().toPyTorchMap().get("num_alloc_retries")).isZero();
        assertThat(a.malloc(200 * MiB, s1)).isEqualTo(w); // s1's block stayed cached
        a.internals().checkInvariants();

        // the mirror case: the request's stream sorts last and has no block ≥ key, so the walk starts at the
        // very last block of the pool, which is the request stream's largest
        SimulatedDevice dev2 = device(400 * MiB);
        CachingAllocator b = new CachingAllocator(dev2, maxSplit(64 * MiB));
        long t1 = dev2.createStream();
        long big = b.malloc(200 * MiB);
        long x1 = b.malloc(70 * MiB, t1);
        long y1 = b.malloc(80 * MiB, t1);
        b.malloc(40 * MiB, t1);
        b.free(big);
        b.free(x1);
        b.free(y1);
        List<TraceEntry> t2 = tracked(b);
        b.malloc(100 * MiB, t1);
        assertThat(t2.subList(0, 2)).extracting(TraceEntry::addr).containsExactly(y1, x1);
        assertThat(actions(t2)).containsExactly("segment_free", "segment_free", "segment_alloc", "alloc");
        assertThat(b.malloc(200 * MiB)).isEqualTo(big);
        b.internals().checkInvariants();
    }

    @Test
    void releaseAvailableSkipsAnOversizeBlockThatIsNotAWholeSegment() {
        SimulatedDevice dev = device(100 * MiB);
        CachingAllocator a = new CachingAllocator(
                dev, cfg().maxSplitSize(20 * MiB).maxNonSplitRounding(40 * MiB).build());
        long x = a.malloc(100 * MiB); // a cudaMalloc'd segment; the device is full
        a.free(x);
        a.setConfig(a.config().toBuilder().expandableSegments(true).build());
        a.malloc(70 * MiB); // takes x (100 < 70 + 40) and splits: the flag is on (allocator.md §2.3)
        List<TraceEntry> t = tracked(a);
        // 40 MiB: no cached block fits and growing an expandable segment fails (no memory). The free 30 MiB tail
        // of x is oversize but not a whole segment: PyTorch would cudaFree it (allocator.md §11); gpumem skips it,
        // and empty_cache cannot release it either, so the request runs out of memory.
        assertThatThrownBy(() -> a.malloc(40 * MiB)).isInstanceOf(OutOfMemoryException.class);
        assertThat(actions(t)).doesNotContain("segment_free");
        Map<String, Long> s = a.stats().toPyTorchMap();
        assertThat(s.get("num_device_free")).isZero();
        assertThat(s.get("segment.all.current")).isEqualTo(1);
        assertThat(a.reservedBytes()).isEqualTo(100 * MiB);
        a.internals().checkInvariants();
    }

    // --------------------------------------------------- allocator.md §4.4 garbage collection

    private static AllocatorConfig gc(double threshold) {
        return cfg().garbageCollectionThreshold(threshold)
                .raw("garbage_collection_threshold:" + threshold)
                .build();
    }

    @Test
    void gcAgeThresholdIsAFloatingPointAverage() {
        CachingAllocator a = new CachingAllocator(device(GiB), gc(0.25));
        a.setMemoryFraction(1.0); // allowed 1 GiB, gc_threshold 256 MiB
        SimulatedDevice dev = (SimulatedDevice) a.device();
        long s1 = dev.createStream();
        long small = a.malloc(1000); // small pool: never a GC candidate
        a.free(small); // total 2 MiB
        long blockA = a.malloc(100 * MiB); // large clock 1; total 102
        long blockB = a.malloc(100 * MiB); // clock 2; total 202
        a.free(blockA); // A's base 2
        a.malloc(12 * MiB, s1); // clock 3; 202 ≤ 256: no GC; total 214
        a.free(blockB); // B's base 3
        a.malloc(50 * MiB, s1); // clock 4; 214 ≤ 256: no GC; total 264
        assertThat(a.stats().toPyTorchMap().get("num_device_free")).isZero();
        // clock 5; 264 > 256, target 8 MiB. Ages A = 3, B = 2: average 2.5 (an integer average would be 2 and
        // free both). Only A goes.
        a.malloc(50 * MiB, s1);
        assertThat(a.stats().toPyTorchMap().get("num_device_free")).isEqualTo(1);
        assertThat(a.reservedBytes()).isEqualTo((2 + 100 + 12 + 50 + 50) * MiB);
        assertThat(a.malloc(100 * MiB)).isEqualTo(blockB);
        assertThat(a.malloc(1000)).isEqualTo(small);
        a.internals().checkInvariants();
    }

    @Test
    void gcPassDoesNotStopAtTheTarget() {
        CachingAllocator a = new CachingAllocator(device(GiB), gc(0.25));
        a.setMemoryFraction(1.0);
        long s1 = ((SimulatedDevice) a.device()).createStream();
        long blockA = a.malloc(100 * MiB); // clock 1
        long blockB = a.malloc(100 * MiB); // clock 2
        a.free(blockA); // base 2
        a.free(blockB); // base 2
        a.malloc(50 * MiB, s1); // clock 3; total 200 → 250
        a.malloc(50 * MiB, s1); // clock 4; total 250 ≤ 256 → 300
        List<TraceEntry> t = tracked(a);
        // clock 5: 300 > 256, target 44 MiB; ages 3 and 3, average 3: A alone meets the target but the pass
        // goes on and frees B as well (in pool order: same size, lower address first)
        a.malloc(50 * MiB, s1);
        assertThat(a.stats().toPyTorchMap().get("num_device_free")).isEqualTo(2);
        // allocator.md §3 order of trace entries: GC's releases, then the new segment, then the alloc
        assertThat(actions(t)).containsExactly("segment_free", "segment_free", "segment_alloc", "alloc");
        assertThat(t.subList(0, 2))
                .extracting(TraceEntry::addr)
                .containsExactly(Math.min(blockA, blockB), Math.max(blockA, blockB));
        assertThat(a.reservedBytes()).isEqualTo(150 * MiB);
        a.internals().checkInvariants();
    }

    @Test
    void gcNeverRunsWithoutAMemoryFraction() {
        CachingAllocator a = new CachingAllocator(device(GiB), gc(0.25));
        long s1 = ((SimulatedDevice) a.device()).createStream();
        long blockA = a.malloc(100 * MiB);
        long blockB = a.malloc(100 * MiB);
        a.free(blockA);
        a.free(blockB);
        a.malloc(50 * MiB, s1);
        a.malloc(50 * MiB, s1);
        a.malloc(50 * MiB, s1); // the same steps as above, but no fraction: nothing is collected
        assertThat(a.stats().toPyTorchMap().get("num_device_free")).isZero();
        assertThat(a.reservedBytes()).isEqualTo(350 * MiB);
        a.internals().checkInvariants();
    }

    // --------------------------------------------------- allocator.md §3 step 4.2 / §4.5 memory fraction

    @Test
    void fractionComparesTotalAllocatedMemoryPlusAllocSize() {
        SimulatedDevice dev = device(GiB);
        CachingAllocator a = new CachingAllocator(dev);
        a.setMemoryFraction(0.25); // allowed 256 MiB
        long p = a.malloc(254 * MiB); // total 254
        a.malloc(1); // alloc_size 2 MiB: 254 + 2 = 256 is not > 256: allowed
        assertThat(a.reservedBytes()).isEqualTo(256 * MiB);
        List<TraceEntry> t = tracked(a);
        // 2 MiB request is large: alloc_size 20 MiB, 276 > 256 on every try; nothing releasable: OOM
        assertThatThrownBy(() -> a.malloc(2 * MiB)).isInstanceOfSatisfying(OutOfMemoryException.class, e -> {
            assertThat(e.getMessage()).startsWith("CUDA out of memory. Tried to allocate 20.00 MiB.");
            assertThat(e.getMessage()).contains(" 256.00 MiB allowed; Of the allocated memory 254.00 MiB");
        });
        assertThat(dev.callCount(DeviceOp.MALLOC)).isEqualTo(2); // the cap never reached the device
        Map<String, Long> s = a.stats().toPyTorchMap();
        assertThat(s.get("num_alloc_retries")).isEqualTo(1); // the failed third try counts
        assertThat(s.get("num_ooms")).isEqualTo(1);
        assertThat(actions(t)).containsExactly("oom");
        assertThat(t.getFirst().size()).isEqualTo(2 * MiB); // rounded request, not alloc_size
        // cached (free) segments count against the cap: 2 MiB on another stream fails until empty_cache in the
        // retry path frees p's cached segment
        a.free(p);
        long s1 = dev.createStream();
        a.malloc(2 * MiB, s1);
        s = a.stats().toPyTorchMap();
        assertThat(s.get("num_alloc_retries")).isEqualTo(2);
        assertThat(a.reservedBytes()).isEqualTo(2 * MiB + 20 * MiB);
        a.internals().checkInvariants();
    }

    // --------------------------------------------------- allocator.md §7 OOM message and oom trace entry

    @Test
    void oomReportsAllocSizeInTextAndRoundedSizeInTrace() {
        SimulatedDevice dev = device(GiB);
        CachingAllocator a = new CachingAllocator(dev);
        a.recordHistory(HistoryOptions.all());
        a.setMemoryFraction(0.0); // allowed 0: every new segment is refused
        assertThatThrownBy(() -> a.malloc(1))
                .isInstanceOfSatisfying(
                        OutOfMemoryException.class,
                        e -> assertThat(e.getMessage())
                                .startsWith("CUDA out of memory. Tried to allocate 2.00 MiB. GPU "
                                        + dev.index()
                                        + " has a total capacity of 1024.00 MiB of which 1024.00 MiB is free. 0 bytes"
                                        + " allowed; Of the allocated memory 0 bytes is allocated by PyTorch, and 0 bytes is reserved"
                                        + " by PyTorch but unallocated. If reserved"));
        // request 30 MiB + 1: rounded 30 MiB + 512 (the trace), alloc_size 32 MiB (the text)
        assertThatThrownBy(() -> a.malloc(30 * MiB + 1))
                .isInstanceOfSatisfying(
                        OutOfMemoryException.class,
                        e -> assertThat(e.getMessage()).startsWith("CUDA out of memory. Tried to allocate 32.00 MiB."));
        List<TraceEntry> t = a.snapshot().deviceTraces().getFirst();
        assertThat(actions(t)).containsExactly("oom", "oom"); // nothing to release: no other entry
        assertThat(t).extracting(TraceEntry::size).containsExactly(512L, 30 * MiB + 512);
        assertThat(t).extracting(TraceEntry::deviceFree).containsOnly(GiB);
        assertThat(a.stats().toPyTorchMap().get("num_ooms")).isEqualTo(2);
        assertThat(a.stats().toPyTorchMap().get("num_alloc_retries")).isEqualTo(2);
        assertThat(a.stats().toPyTorchMap().get("num_sync_all_streams")).isEqualTo(2);
    }

    @Test
    void justBelowOneExabyteGoesThroughTheAllocator() {
        CachingAllocator a = new CachingAllocator(device(GiB));
        // 2^60 − 1 rounds to 2^60 (alloc_size 2^60): an ordinary OOM, counted, with format_size in GiB
        assertThatThrownBy(() -> a.malloc((1L << 60) - 1))
                .isInstanceOfSatisfying(
                        OutOfMemoryException.class,
                        e -> assertThat(e.getMessage())
                                .startsWith("CUDA out of memory. Tried to allocate 1073741824.00 GiB."));
        assertThat(a.stats().toPyTorchMap().get("num_ooms")).isEqualTo(1);
        assertThatThrownBy(() -> a.malloc(1L << 60))
                .hasMessage("CUDA out of memory. Tried to allocate more than 1EB memory.");
        assertThat(a.stats().toPyTorchMap().get("num_ooms")).isEqualTo(1); // the 1EB check touches nothing
    }

    // --------------------------------------------------- allocator.md §2.4/§4.1 inactive_split, every case

    @Test
    void inactiveSplitAccountingInEveryCase() {
        CachingAllocator a = new CachingAllocator(device(GiB));
        // a: unsplit 2 MiB segment split: +1 block, +remainder 1 MiB
        long pa = a.malloc(MiB);
        assertSplit(a, 1, MiB);
        // b: the remainder was already split and is split again: bytes −1024, count unchanged
        long pb = a.malloc(1024);
        assertSplit(a, 1, MiB - 1024);
        // c: the 1,047,552 B remainder (small: ≤ 1 MiB) is taken whole: −1 block, −its size
        long pc = a.malloc(MiB - 1024);
        assertThat(a.internals().blockSize(pc)).isEqualTo(MiB - 1024);
        assertSplit(a, 0, 0);
        // free b: neighbours allocated, no merge; the block is split: +1, +1024
        a.free(pb);
        assertSplit(a, 1, 1024);
        // free a: absorbs b (−1, −1024) and is still split (+1, +1,049,600): net 0 blocks, +1 MiB bytes,
        // applied as one net increase (update_stat), not as a decrease plus an increase
        a.free(pa);
        assertSplit(a, 1, MiB + 1024);
        // free c: absorbs the 1,049,600 B block (−1, −1,049,600); the segment is whole again
        a.free(pc);
        assertSplit(a, 0, 0);
        Map<String, Long> s = a.stats().toPyTorchMap();
        assertThat(s.get("inactive_split.small_pool.allocated")).isEqualTo(2); // a, free b
        assertThat(s.get("inactive_split.small_pool.freed")).isEqualTo(2); // c, free c
        assertThat(s.get("inactive_split.small_pool.peak")).isEqualTo(1);
        // allocated: 1 MiB (a) + 1024 (free b) + 1 MiB (free a, net) = 2,098,176
        assertThat(s.get("inactive_split_bytes.small_pool.allocated")).isEqualTo(2 * MiB + 1024);
        // freed: 1024 (b) + 1,047,552 (c) + 1,049,600 (free c) = 2,098,176
        assertThat(s.get("inactive_split_bytes.small_pool.freed")).isEqualTo(2 * MiB + 1024);
        assertThat(s.get("inactive_split_bytes.small_pool.peak")).isEqualTo(MiB + 1024);
        assertThat(s.get("inactive_split_bytes.all.allocated")).isEqualTo(2 * MiB + 1024);
        assertThat(s.get("inactive_split_bytes.large_pool.allocated")).isZero();
        a.internals().checkInvariants();
    }

    private static void assertSplit(CachingAllocator a, long blocks, long bytes) {
        Map<String, Long> s = a.stats().toPyTorchMap();
        assertThat(s.get("inactive_split.all.current")).isEqualTo(blocks);
        assertThat(s.get("inactive_split.small_pool.current")).isEqualTo(blocks);
        assertThat(s.get("inactive_split_bytes.all.current")).isEqualTo(bytes);
        assertThat(s.get("inactive_split_bytes.small_pool.current")).isEqualTo(bytes);
        a.internals().checkInvariants();
    }

    // --------------------------------------------------- allocator.md §4.2 release order

    @Test
    void emptyCacheReleasesLargePoolThenSmallPoolInSizeOrder() {
        CachingAllocator a = new CachingAllocator(device(GiB));
        long small = a.malloc(1000);
        long big = a.malloc(30 * MiB);
        long mid = a.malloc(3 * MiB); // 20 MiB segment
        a.free(small);
        a.free(big);
        a.free(mid);
        List<TraceEntry> t = tracked(a);
        a.emptyCache();
        assertThat(actions(t)).containsExactly("segment_free", "segment_free", "segment_free");
        assertThat(t).extracting(TraceEntry::size).containsExactly(20 * MiB, 30 * MiB, 2 * MiB);
        assertThat(a.stats().toPyTorchMap().get("num_sync_all_streams")).isEqualTo(1);
    }

    // --------------------------------------------------- allocator.md §10.5 trace entry contents

    @Test
    void traceEntriesCarryRequestedSizesAndSegmentSizes() {
        SimulatedDevice dev = device(GiB);
        CachingAllocator a = new CachingAllocator(dev);
        long s1 = dev.createStream();
        a.recordHistory(HistoryOptions.all());
        long p = a.malloc(1000, s1);
        a.free(p);
        a.emptyCache();
        List<TraceEntry> t = a.snapshot().deviceTraces().getFirst();
        assertThat(actions(t))
                .containsExactly("segment_alloc", "alloc", "free_requested", "free_completed", "segment_free");
        assertThat(t).extracting(TraceEntry::addr).containsExactly(p, p, p, p, p);
        // segment entries: the 2 MiB segment; block entries: the unrounded 1000, not the 1024 block
        assertThat(t).extracting(TraceEntry::size).containsExactly(2 * MiB, 1000L, 1000L, 1000L, 2 * MiB);
        assertThat(t).extracting(TraceEntry::stream).containsOnly(s1);
    }

    @Test
    void snapshotEntryHasAddressZeroStreamZeroAndShowsInTheNextSnapshot() {
        SimulatedDevice dev = device(GiB);
        CachingAllocator a = new CachingAllocator(dev);
        long s1 = dev.createStream();
        a.recordHistory(HistoryOptions.all());
        a.malloc(1000, s1); // active 1024 in the small pool
        a.malloc(3 * MiB); // active 3 MiB in the large pool
        List<TraceEntry> first = a.snapshot().deviceTraces().getFirst();
        assertThat(actions(first)).doesNotContain("snapshot");
        TraceEntry e = a.snapshot().deviceTraces().getFirst().getLast();
        assertThat(e.action()).isEqualTo(TraceAction.SNAPSHOT);
        assertThat(e.addr()).isZero();
        assertThat(e.stream()).isZero();
        assertThat(e.size()).isEqualTo(1024 + 3 * MiB);
    }

    // --------------------------------------------------- allocator.md §10.1 ring buffer

    @Test
    void historyOffClearsAndStateKeepsOneEntry() {
        CachingAllocator a = new CachingAllocator(device(GiB));
        a.recordHistory(HistoryOptions.all());
        long p = a.malloc(1000);
        a.recordHistory(HistoryOptions.off());
        assertThat(a.snapshot().deviceTraces().getFirst()).isEmpty(); // cleared, and nothing recorded now
        a.free(p);
        assertThat(a.snapshot().deviceTraces().getFirst()).isEmpty();
        a.recordHistory(new HistoryOptions(HistoryOptions.Enabled.STATE, HistoryOptions.Context.STATE, 1000));
        long q = a.malloc(1000);
        a.free(q);
        List<TraceEntry> t = a.snapshot().deviceTraces().getFirst();
        assertThat(actions(t)).containsExactly("free_completed"); // a ring of one: the latest entry
        assertThat(actions(a.snapshot().deviceTraces().getFirst())).containsExactly("snapshot");
    }

    @Test
    void ringBufferReturnsTheMostRecentEntriesOldestFirstAfterWrapping() {
        CachingAllocator a = new CachingAllocator(device(GiB));
        a.recordHistory(HistoryOptions.all(3));
        long p = a.malloc(1000); // segment_alloc, alloc
        a.free(p); // free_requested, free_completed
        a.emptyCache(); // segment_free: 5 entries, the ring keeps the last 3
        assertThat(actions(a.snapshot().deviceTraces().getFirst()))
                .containsExactly("free_requested", "free_completed", "segment_free");
    }

    // --------------------------------------------------- allocator.md §6.2 max_split_size stat, §9.1 re-parse

    @Test
    void maxSplitSizeStatIsFixedAtCreationWhileReparseResetsTheRule() {
        CachingAllocator a = new CachingAllocator(device(4 * GiB), maxSplit(100 * MiB));
        assertThat(a.stats().toPyTorchMap().get("max_split_size")).isEqualTo(100 * MiB);
        long big = a.malloc(200 * MiB);
        a.free(big);
        // every parse resets max_split_size to unlimited; the stat keeps the creation value
        a.setSettings("garbage_collection_threshold:0.5");
        assertThat(a.stats().toPyTorchMap().get("max_split_size")).isEqualTo(100 * MiB);
        long p = a.malloc(50 * MiB); // no oversize rule now: best fit splits the 200 MiB block
        assertThat(p).isEqualTo(big);
        assertThat(a.internals().blockSize(p)).isEqualTo(50 * MiB);

        CachingAllocator b = new CachingAllocator(device(4 * GiB));
        b.setSettings("max_split_size_mb:100");
        assertThat(b.stats().toPyTorchMap().get("max_split_size")).isEqualTo(-1);
        long big2 = b.malloc(200 * MiB);
        b.free(big2);
        assertThat(b.malloc(50 * MiB)).isNotEqualTo(big2); // but the rule applies
        a.internals().checkInvariants();
        b.internals().checkInvariants();
    }

    // --------------------------------------------------- allocator.md §2.5/§10.3/§10.4 snapshot contents

    @Test
    void snapshotShowsStaleRequestedSizesAndSumsRequestedOverActiveBlocksOnly() {
        CachingAllocator a = new CachingAllocator(device(GiB));
        long p = a.malloc(1000); // [0, 1024), requested 1000
        long q = a.malloc(2000); // [1024, 3072), requested 2000; the remainder starts with 0
        a.free(p); // p keeps its stale requested_size: free does not reset it
        SegmentInfo seg = a.snapshot().segments().getFirst();
        assertThat(seg.totalSize()).isEqualTo(2 * MiB);
        assertThat(seg.allocatedSize()).isEqualTo(2048);
        assertThat(seg.activeSize()).isEqualTo(2048);
        assertThat(seg.requestedSize()).isEqualTo(2000); // inactive blocks do not count
        assertThat(seg.blocks()).extracting(b -> b.address()).containsExactly(p, q, q + 2048);
        assertThat(seg.blocks()).extracting(b -> b.requestedSize()).containsExactly(1000L, 2000L, 0L);
        assertThat(seg.blocks())
                .extracting(b -> b.state().name())
                .containsExactly("INACTIVE", "ACTIVE_ALLOCATED", "INACTIVE");
    }

    @Test
    void snapshotSettingsFollowTheLatestParseWhileTheStatKeepsTheCreationValue() {
        CachingAllocator a = new CachingAllocator(device(GiB), maxSplit(100 * MiB));
        a.setSettings("expandable_segments:False");
        Map<String, Object> settings = a.snapshot().allocatorSettings();
        assertThat(settings.get("PYTORCH_CUDA_ALLOC_CONF")).isEqualTo("expandable_segments:False");
        assertThat(settings.get("max_split_size")).isEqualTo(-1L); // reset by the parse
        assertThat(a.stats().toPyTorchMap().get("max_split_size")).isEqualTo(100 * MiB);
        @SuppressWarnings("unchecked")
        Map<String, Long> roundup = (Map<String, Long>) settings.get("roundup_power2_divisions");
        assertThat(roundup.keySet())
                .containsExactly(
                        "1", "2", "4", "8", "16", "32", "64", "128", "256", "512", "1024", "2048", "4096", "8192",
                        "16384", "32768");
        assertThat(roundup.values()).containsOnly(0L);
    }

    // --------------------------------------------------- allocator.md §6.2 resets

    @Test
    void resetsCoverOversizeStatsAndTheCounters() {
        CachingAllocator a = new CachingAllocator(device(4 * GiB), maxSplit(100 * MiB));
        a.malloc(200 * MiB);
        long q = a.malloc(200 * MiB);
        a.free(q);
        Map<String, Long> s = a.stats().toPyTorchMap();
        assertThat(s.get("oversize_allocations.peak")).isEqualTo(2);
        a.resetPeakStats();
        s = a.stats().toPyTorchMap();
        assertThat(s.get("oversize_allocations.peak")).isEqualTo(1);
        assertThat(s.get("oversize_segments.peak")).isEqualTo(2); // both segments still cached
        assertThat(s.get("allocated_bytes.all.peak")).isEqualTo(200 * MiB);
        a.resetAccumulatedStats();
        s = a.stats().toPyTorchMap();
        assertThat(s.get("oversize_allocations.allocated")).isZero();
        assertThat(s.get("oversize_allocations.freed")).isZero();
        assertThat(s.get("oversize_allocations.current")).isEqualTo(1);
        assertThat(s.get("allocated_bytes.all.allocated")).isZero();
        assertThat(s.get("allocated_bytes.all.current")).isEqualTo(200 * MiB);
        assertThat(s.get("num_device_alloc")).isZero();
    }
}
