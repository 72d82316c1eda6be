package io.gpumem.alloc;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.device.DeviceOp;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.history.HistoryOptions;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.oom.OutOfMemoryException;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * An audit of {@link CachingAllocator} against docs/pytorch-caching-allocator.md, rule by rule, for the rules
 * that real-trace replays (default config, plus expandable segments) never exercise and that the other test
 * classes do not pin. Every expected figure is worked out by hand from the spec in the comments next to it;
 * the section of the spec each test pins is in its name's comment.
 */
class SpecAuditTest {
    private static final long KiB = 1L << 10;
    private static final long MiB = 1L << 20;
    private static final long GiB = 1L << 30;

    private static SimulatedDevice device(long capacity) {
        return SimulatedDevice.builder().capacity(capacity).build();
    }

    private static AllocatorConfig.Builder cfg() {
        return AllocatorConfig.defaults().toBuilder();
    }

    private static AllocatorConfig maxSplit(long bytes) {
        return cfg().maxSplitSize(bytes).raw("max_split_size_mb:" + (bytes >> 20)).build();
    }

    private static AllocatorConfig expandable() {
        return cfg().expandableSegments(true).raw("expandable_segments:True").build();
    }

    /** Records every trace entry from now on, history on or off. */
    private static List<TraceEntry> tracked(CachingAllocator a) {
        List<TraceEntry> seen = new ArrayList<>();
        a.attachTraceTracker(seen::add);
        return seen;
    }

    private static List<String> actions(List<TraceEntry> t) {
        return t.stream().map(e -> e.action().wireName()).toList();
    }

    // ---------------------------------------------------------------- §1.2/§1.3 roundup divisions through malloc

    @Test
    void roundupDivisionsDecideTheBlockSizes() {
        int[] four = new int[AllocatorConfig.ROUNDUP_INTERVALS];
        Arrays.fill(four, 4);
        CachingAllocator a = new CachingAllocator(device(GiB),
                cfg().roundupPower2Divisions(four).raw("roundup_power2_divisions:4").build());
        // 1200 is not above 512·4 = 2048: plain 512 rounding gives 1536 (not the 1280 of the division helper)
        long p1 = a.malloc(1200);
        assertThat(a.blockSize(p1)).isEqualTo(1536);
        // 3000 > 2048: F = 2048, step 2048 >> 2 = 512 → 3072
        long p2 = a.malloc(3000);
        assertThat(a.blockSize(p2)).isEqualTo(3072);
        // 1,200,000: F = 1 MiB, step 256 KiB → 5 steps = 1,310,720 (large pool, split off a 20 MiB segment)
        long p3 = a.malloc(1_200_000);
        assertThat(a.blockSize(p3)).isEqualTo(1_310_720);
        Map<String, Long> s = a.memoryStats();
        assertThat(s.get("requested_bytes.all.current")).isEqualTo(1200 + 3000 + 1_200_000);
        assertThat(s.get("allocated_bytes.all.current")).isEqualTo(1536 + 3072 + 1_310_720);
        assertThat(s.get("reserved_bytes.small_pool.current")).isEqualTo(2 * MiB);
        assertThat(s.get("reserved_bytes.large_pool.current")).isEqualTo(20 * MiB);
        a.checkInvariants();
    }

    @Test
    void roundupDivisionsApplyPerPowerOfTwoInterval() {
        int[] table = new int[AllocatorConfig.ROUNDUP_INTERVALS];
        table[2] = 4;                         // index 2 = [4, 8) MiB
        table[8] = 2;                         // index 8 = [256, 512) MiB
        CachingAllocator a = new CachingAllocator(device(4 * GiB),
                cfg().roundupPower2Divisions(table).raw("roundup_power2_divisions:[4:4,256:2]").build());
        // 5 MiB + 1 in [4, 8) MiB: F = 4 MiB, step 1 MiB → 6 MiB; a 20 MiB segment (6 MiB < 10 MiB)
        long p = a.malloc(5 * MiB + 1);
        assertThat(a.blockSize(p)).isEqualTo(6 * MiB);
        // 3 MiB + 1 in [2, 4) MiB where the table says 0: plain 512 rounding
        long q = a.malloc(3 * MiB + 1);
        assertThat(a.blockSize(q)).isEqualTo(3 * MiB + 512);
        // (300 MiB + 1) with d = 2: F = 256 MiB, step 128 MiB → 384 MiB, its own 384 MiB segment
        long r = a.malloc(300 * MiB + 1);
        assertThat(a.blockSize(r)).isEqualTo(384 * MiB);
        assertThat(a.reservedBytes()).isEqualTo(20 * MiB + 384 * MiB);
        a.checkInvariants();
    }

    @Test
    void aRoundedMebibyteIsSmallAndOneMoreGoesLarge() {
        CachingAllocator a = new CachingAllocator(device(GiB));
        a.malloc(MiB);                        // rounded 1,048,576 ≤ 1 MiB: small pool, 2 MiB segment
        Map<String, Long> s = a.memoryStats();
        assertThat(s.get("reserved_bytes.small_pool.current")).isEqualTo(2 * MiB);
        assertThat(s.get("allocation.small_pool.current")).isEqualTo(1);
        a.malloc(MiB + 1);                    // rounded 1,049,088: large pool, 20 MiB segment
        s = a.memoryStats();
        assertThat(s.get("reserved_bytes.large_pool.current")).isEqualTo(20 * MiB);
        assertThat(s.get("allocation.large_pool.current")).isEqualTo(1);
        a.checkInvariants();
    }

    // ---------------------------------------------------------------- §2.2 oversize rule boundaries

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
        assertThat(a.blockSize(q)).isEqualTo(200 * MiB);
        assertThat(a.memoryStats().get("inactive_split.all.current")).isZero();
        a.checkInvariants();
    }

    @Test
    void maxNonSplitRoundingWidensTheSlack() {
        AllocatorConfig c = cfg().maxSplitSize(100 * MiB).maxNonSplitRounding(60 * MiB)
                .raw("max_split_size_mb:100,max_non_split_rounding_mb:60").build();
        CachingAllocator a = new CachingAllocator(device(4 * GiB), c);
        long big = a.malloc(200 * MiB);
        a.free(big);
        long p = a.malloc(140 * MiB);                // 200 ≥ 140 + 60: refused
        assertThat(p).isNotEqualTo(big);
        long q = a.malloc(140 * MiB + 512 * KiB);    // 200 ≥ 200.5 false: reused whole
        assertThat(q).isEqualTo(big);
        assertThat(a.allocatedBytes()).isEqualTo(140 * MiB + 200 * MiB);
        a.checkInvariants();
    }

    @Test
    void requestOfExactlyMaxSplitIsOversizeAndTakesACachedBlockWhole() {
        CachingAllocator a = new CachingAllocator(device(4 * GiB), maxSplit(100 * MiB));
        long big = a.malloc(110 * MiB);
        a.free(big);
        // 100 MiB is not < max_split, so the "small request" rule does not apply; 110 ≥ 120 is false
        long p = a.malloc(100 * MiB);
        assertThat(p).isEqualTo(big);
        assertThat(a.blockSize(p)).isEqualTo(110 * MiB);
        Map<String, Long> s = a.memoryStats();
        assertThat(s.get("allocated_bytes.all.current")).isEqualTo(110 * MiB);
        assertThat(s.get("requested_bytes.all.current")).isEqualTo(100 * MiB);
        assertThat(s.get("oversize_allocations.current")).isEqualTo(1);
        a.checkInvariants();
    }

    // ---------------------------------------------------------------- §2.4/§4.1/§4.2/§6.2 oversize stats

    @Test
    void oversizeStatsFollowBlockAndSegmentSizesAtFreeAndRelease() {
        CachingAllocator a = new CachingAllocator(device(4 * GiB), maxSplit(100 * MiB));
        long p = a.malloc(100 * MiB);     // segment 100 MiB ≥ max_split; block 100 MiB ≥ max_split
        // 99 MiB < max_split, but its segment is 100 MiB (2 MiB rounding) and the 1 MiB remainder is not
        // > 1 MiB: the whole 100 MiB block is taken, so it is an oversize allocation too
        long q = a.malloc(99 * MiB);
        assertThat(a.blockSize(q)).isEqualTo(100 * MiB);
        Map<String, Long> s = a.memoryStats();
        assertThat(s.get("oversize_allocations.current")).isEqualTo(2);
        assertThat(s.get("oversize_segments.current")).isEqualTo(2);
        a.free(p);
        a.free(q);
        s = a.memoryStats();
        assertThat(s.get("oversize_allocations.current")).isZero();
        assertThat(s.get("oversize_allocations.freed")).isEqualTo(2);
        assertThat(s.get("oversize_segments.current")).isEqualTo(2);   // cached segments still count
        a.emptyCache();
        s = a.memoryStats();
        assertThat(s.get("oversize_segments.current")).isZero();
        assertThat(s.get("oversize_segments.peak")).isEqualTo(2);
        assertThat(s.get("oversize_segments.allocated")).isEqualTo(2);
        assertThat(s.get("oversize_segments.freed")).isEqualTo(2);
        a.checkInvariants();
    }

    // ---------------------------------------------------------------- §4.3 release_available_cached_blocks

    @Test
    void releaseAvailableFreesOnlyTheFirstBigEnoughBlock() {
        SimulatedDevice dev = device(400 * MiB);
        CachingAllocator a = new CachingAllocator(dev, maxSplit(64 * MiB));
        long x = a.malloc(100 * MiB);
        long y = a.malloc(300 * MiB);     // the device is now full
        a.free(x);
        a.free(y);
        List<TraceEntry> t = tracked(a);
        // 150 MiB: best fit finds y (300 ≥ 150 + 20: refused); cudaMalloc fails; key = max(150, 64) = 150 MiB,
        // the first block ≥ 150 MiB is y: only y is released, true, and the second alloc succeeds
        a.malloc(150 * MiB);
        Map<String, Long> s = a.memoryStats();
        assertThat(s.get("num_device_free")).isEqualTo(1);
        assertThat(s.get("num_alloc_retries")).isZero();
        assertThat(s.get("num_sync_all_streams")).isZero();
        assertThat(a.reservedBytes()).isEqualTo(250 * MiB);
        assertThat(dev.callCount(DeviceOp.MALLOC)).isEqualTo(4);   // x, y, the failed try, the good one
        assertThat(actions(t)).containsExactly("segment_free", "segment_alloc", "alloc");
        assertThat(t.getFirst().addr()).isEqualTo(y);
        assertThat(t.getFirst().size()).isEqualTo(300 * MiB);
        assertThat(a.malloc(100 * MiB)).isEqualTo(x);              // x stayed cached
        a.checkInvariants();
    }

    @Test
    void releaseAvailableKeepsWhatItReleasedWhenItReturnsFalse() {
        SimulatedDevice dev = device(300 * MiB);
        CachingAllocator a = new CachingAllocator(dev, maxSplit(64 * MiB));
        long x = a.malloc(70 * MiB);
        long y = a.malloc(80 * MiB);
        long z = a.malloc(30 * MiB);
        a.malloc(100 * MiB);              // live; 280 MiB of 300 in use
        a.free(x);
        a.free(y);
        a.free(z);
        List<TraceEntry> t = tracked(a);
        // 200 MiB: nothing ≥ 200 is cached; cudaMalloc fails (20 MiB free). key = 200 MiB, no block ≥ key:
        // walk down from the largest: y (80, total 80), x (70, total 150), then z = 30 < max_split stops the walk.
        // 150 < 200: false, so alloc_block is NOT tried again; empty_cache frees z; the counted retry succeeds.
        a.malloc(200 * MiB);
        assertThat(actions(t)).containsExactly("segment_free", "segment_free", "segment_free", "segment_alloc",
                "alloc");
        assertThat(t.subList(0, 3)).extracting(TraceEntry::addr).containsExactly(y, x, z);
        Map<String, Long> s = a.memoryStats();
        assertThat(s.get("num_alloc_retries")).isEqualTo(1);
        assertThat(s.get("num_sync_all_streams")).isEqualTo(1);
        assertThat(s.get("num_device_free")).isEqualTo(3);
        // 4 allocations + first try + the retry: no try between the false return and empty_cache
        assertThat(dev.callCount(DeviceOp.MALLOC)).isEqualTo(6);
        assertThat(a.reservedBytes()).isEqualTo(300 * MiB);
        a.checkInvariants();
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
        assertThat(a.memoryStats().get("num_alloc_retries")).isEqualTo(1);
        assertThat(actions(t)).containsExactly("segment_free", "segment_alloc", "alloc");
        a.checkInvariants();
    }

    @Test
    void releaseAvailableWalksDownTheRequestStreamFromAnotherStreamsBlock() {
        SimulatedDevice dev = device(400 * MiB);
        CachingAllocator a = new CachingAllocator(dev, maxSplit(64 * MiB));
        long s1 = dev.createStream();         // a higher handle than the default stream 0
        long w = a.malloc(200 * MiB, s1);
        long x = a.malloc(70 * MiB);
        long y = a.malloc(80 * MiB);
        a.malloc(40 * MiB);                   // live; 390 MiB of 400 in use
        a.free(w);
        a.free(x);
        a.free(y);
        List<TraceEntry> t = tracked(a);
        // 100 MiB on stream 0: the first block ≥ (0, 100 MiB) is w on s1, so the walk starts just before it,
        // at stream 0's largest block: y (80), then x (70): 150 ≥ 100, true, and the second alloc succeeds
        a.malloc(100 * MiB);
        assertThat(actions(t)).containsExactly("segment_free", "segment_free", "segment_alloc", "alloc");
        assertThat(t.subList(0, 2)).extracting(TraceEntry::addr).containsExactly(y, x);
        assertThat(a.memoryStats().get("num_alloc_retries")).isZero();
        assertThat(a.malloc(200 * MiB, s1)).isEqualTo(w);         // s1's block stayed cached
        a.checkInvariants();

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
        b.checkInvariants();
    }

    // ---------------------------------------------------------------- §4.4 garbage collection

    private static AllocatorConfig gc(double threshold) {
        return cfg().garbageCollectionThreshold(threshold).raw("garbage_collection_threshold:" + threshold).build();
    }

    @Test
    void gcAgeThresholdIsAFloatingPointAverage() {
        CachingAllocator a = new CachingAllocator(device(GiB), gc(0.25));
        a.setMemoryFraction(1.0);             // allowed 1 GiB, gc_threshold 256 MiB
        SimulatedDevice dev = (SimulatedDevice) a.device();
        long s1 = dev.createStream();
        long small = a.malloc(1000);          // small pool: never a GC candidate
        a.free(small);                        // total 2 MiB
        long blockA = a.malloc(100 * MiB);    // large clock 1; total 102
        long blockB = a.malloc(100 * MiB);    // clock 2; total 202
        a.free(blockA);                       // A's base 2
        a.malloc(12 * MiB, s1);               // clock 3; 202 ≤ 256: no GC; total 214
        a.free(blockB);                       // B's base 3
        a.malloc(50 * MiB, s1);               // clock 4; 214 ≤ 256: no GC; total 264
        assertThat(a.memoryStats().get("num_device_free")).isZero();
        // clock 5; 264 > 256, target 8 MiB. Ages A = 3, B = 2: average 2.5 (an integer average would be 2 and
        // free both). Only A goes.
        a.malloc(50 * MiB, s1);
        assertThat(a.memoryStats().get("num_device_free")).isEqualTo(1);
        assertThat(a.reservedBytes()).isEqualTo((2 + 100 + 12 + 50 + 50) * MiB);
        assertThat(a.malloc(100 * MiB)).isEqualTo(blockB);
        assertThat(a.malloc(1000)).isEqualTo(small);
        a.checkInvariants();
    }

    @Test
    void gcPassDoesNotStopAtTheTarget() {
        CachingAllocator a = new CachingAllocator(device(GiB), gc(0.25));
        a.setMemoryFraction(1.0);
        long s1 = ((SimulatedDevice) a.device()).createStream();
        long blockA = a.malloc(100 * MiB);    // clock 1
        long blockB = a.malloc(100 * MiB);    // clock 2
        a.free(blockA);                       // base 2
        a.free(blockB);                       // base 2
        a.malloc(50 * MiB, s1);               // clock 3; total 200 → 250
        a.malloc(50 * MiB, s1);               // clock 4; total 250 ≤ 256 → 300
        List<TraceEntry> t = tracked(a);
        // clock 5: 300 > 256, target 44 MiB; ages 3 and 3, average 3: A alone meets the target but the pass
        // goes on and frees B as well (in pool order: same size, lower address first)
        a.malloc(50 * MiB, s1);
        assertThat(a.memoryStats().get("num_device_free")).isEqualTo(2);
        // §3 order of trace entries: GC's releases, then the new segment, then the alloc
        assertThat(actions(t)).containsExactly("segment_free", "segment_free", "segment_alloc", "alloc");
        assertThat(t.subList(0, 2)).extracting(TraceEntry::addr)
                .containsExactly(Math.min(blockA, blockB), Math.max(blockA, blockB));
        assertThat(a.reservedBytes()).isEqualTo(150 * MiB);
        a.checkInvariants();
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
        a.malloc(50 * MiB, s1);               // the same steps as above, but no fraction: nothing is collected
        assertThat(a.memoryStats().get("num_device_free")).isZero();
        assertThat(a.reservedBytes()).isEqualTo(350 * MiB);
        a.checkInvariants();
    }

    // ---------------------------------------------------------------- §3 step 4.2 / §4.5 memory fraction

    @Test
    void fractionComparesTotalAllocatedMemoryPlusAllocSize() {
        SimulatedDevice dev = device(GiB);
        CachingAllocator a = new CachingAllocator(dev);
        a.setMemoryFraction(0.25);            // allowed 256 MiB
        long p = a.malloc(254 * MiB);         // total 254
        a.malloc(1);                          // alloc_size 2 MiB: 254 + 2 = 256 is not > 256: allowed
        assertThat(a.reservedBytes()).isEqualTo(256 * MiB);
        List<TraceEntry> t = tracked(a);
        // 2 MiB request is large: alloc_size 20 MiB, 276 > 256 on every try; nothing releasable: OOM
        assertThatThrownBy(() -> a.malloc(2 * MiB)).isInstanceOfSatisfying(OutOfMemoryException.class, e -> {
            assertThat(e.getMessage()).startsWith("CUDA out of memory. Tried to allocate 20.00 MiB.");
            assertThat(e.getMessage()).contains(" 256.00 MiB allowed; Of the allocated memory 254.00 MiB");
        });
        assertThat(dev.callCount(DeviceOp.MALLOC)).isEqualTo(2);   // the cap never reached the device
        Map<String, Long> s = a.memoryStats();
        assertThat(s.get("num_alloc_retries")).isEqualTo(1);       // the failed third try counts
        assertThat(s.get("num_ooms")).isEqualTo(1);
        assertThat(actions(t)).containsExactly("oom");
        assertThat(t.getFirst().size()).isEqualTo(2 * MiB);        // rounded request, not alloc_size
        // cached (free) segments count against the cap: 2 MiB on another stream fails until empty_cache in the
        // retry path frees p's cached segment
        a.free(p);
        long s1 = dev.createStream();
        a.malloc(2 * MiB, s1);
        s = a.memoryStats();
        assertThat(s.get("num_alloc_retries")).isEqualTo(2);
        assertThat(a.reservedBytes()).isEqualTo(2 * MiB + 20 * MiB);
        a.checkInvariants();
    }

    // ---------------------------------------------------------------- §7 OOM message and oom trace entry

    @Test
    void oomReportsAllocSizeInTextAndRoundedSizeInTrace() {
        SimulatedDevice dev = device(GiB);
        CachingAllocator a = new CachingAllocator(dev);
        a.recordHistory(HistoryOptions.all());
        a.setMemoryFraction(0.0);             // allowed 0: every new segment is refused
        assertThatThrownBy(() -> a.malloc(1)).isInstanceOfSatisfying(OutOfMemoryException.class,
                e -> assertThat(e.getMessage()).startsWith("CUDA out of memory. Tried to allocate 2.00 MiB. GPU "
                        + dev.index() + " has a total capacity of 1024.00 MiB of which 1024.00 MiB is free. 0 bytes"
                        + " allowed; Of the allocated memory 0 bytes is allocated by PyTorch, and 0 bytes is reserved"
                        + " by PyTorch but unallocated. If reserved"));
        // request 30 MiB + 1: rounded 30 MiB + 512 (the trace), alloc_size 32 MiB (the text)
        assertThatThrownBy(() -> a.malloc(30 * MiB + 1)).isInstanceOfSatisfying(OutOfMemoryException.class,
                e -> assertThat(e.getMessage()).startsWith("CUDA out of memory. Tried to allocate 32.00 MiB."));
        List<TraceEntry> t = a.snapshot().deviceTraces().getFirst();
        assertThat(actions(t)).containsExactly("oom", "oom");   // nothing to release: no other entry
        assertThat(t).extracting(TraceEntry::size).containsExactly(512L, 30 * MiB + 512);
        assertThat(t).extracting(TraceEntry::deviceFree).containsOnly(GiB);
        assertThat(a.memoryStats().get("num_ooms")).isEqualTo(2);
        assertThat(a.memoryStats().get("num_alloc_retries")).isEqualTo(2);
        assertThat(a.memoryStats().get("num_sync_all_streams")).isEqualTo(2);
    }

    @Test
    void expandableOomStillReportsGetAllocationSize() {
        CachingAllocator a = new CachingAllocator(device(30 * MiB), expandable());
        List<TraceEntry> t = tracked(a);
        // 25 MiB needs two 20 MiB pages (40 MiB > 30 MiB of device): the second page cannot be created, the
        // first is given back, the retry fails the same way. The text names alloc_size (25 MiB rounded up to
        // 2 MiB = 26 MiB), not the 40 MiB of pages; the oom entry names the rounded request
        assertThatThrownBy(() -> a.malloc(25 * MiB)).isInstanceOfSatisfying(OutOfMemoryException.class,
                e -> assertThat(e.getMessage()).startsWith("CUDA out of memory. Tried to allocate 26.00 MiB."));
        assertThat(actions(t)).containsExactly("oom");
        assertThat(t.getFirst().size()).isEqualTo(25 * MiB);
        assertThat(a.reservedBytes()).isZero();
        assertThat(a.memoryStats().get("num_alloc_retries")).isEqualTo(1);
        a.checkInvariants();
    }

    @Test
    void justBelowOneExabyteGoesThroughTheAllocator() {
        CachingAllocator a = new CachingAllocator(device(GiB));
        // 2^60 − 1 rounds to 2^60 (alloc_size 2^60): an ordinary OOM, counted, with format_size in GiB
        assertThatThrownBy(() -> a.malloc((1L << 60) - 1)).isInstanceOfSatisfying(OutOfMemoryException.class,
                e -> assertThat(e.getMessage()).startsWith("CUDA out of memory. Tried to allocate 1073741824.00 GiB."));
        assertThat(a.memoryStats().get("num_ooms")).isEqualTo(1);
        assertThatThrownBy(() -> a.malloc(1L << 60)).hasMessage(
                "CUDA out of memory. Tried to allocate more than 1EB memory.");
        assertThat(a.memoryStats().get("num_ooms")).isEqualTo(1);    // the 1EB check touches nothing
    }

    // ---------------------------------------------------------------- §2.4/§4.1 inactive_split, every case

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
        assertThat(a.blockSize(pc)).isEqualTo(MiB - 1024);
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
        Map<String, Long> s = a.memoryStats();
        assertThat(s.get("inactive_split.small_pool.allocated")).isEqualTo(2);     // a, free b
        assertThat(s.get("inactive_split.small_pool.freed")).isEqualTo(2);         // c, free c
        assertThat(s.get("inactive_split.small_pool.peak")).isEqualTo(1);
        // allocated: 1 MiB (a) + 1024 (free b) + 1 MiB (free a, net) = 2,098,176
        assertThat(s.get("inactive_split_bytes.small_pool.allocated")).isEqualTo(2 * MiB + 1024);
        // freed: 1024 (b) + 1,047,552 (c) + 1,049,600 (free c) = 2,098,176
        assertThat(s.get("inactive_split_bytes.small_pool.freed")).isEqualTo(2 * MiB + 1024);
        assertThat(s.get("inactive_split_bytes.small_pool.peak")).isEqualTo(MiB + 1024);
        assertThat(s.get("inactive_split_bytes.all.allocated")).isEqualTo(2 * MiB + 1024);
        assertThat(s.get("inactive_split_bytes.large_pool.allocated")).isZero();
        a.checkInvariants();
    }

    private static void assertSplit(CachingAllocator a, long blocks, long bytes) {
        Map<String, Long> s = a.memoryStats();
        assertThat(s.get("inactive_split.all.current")).isEqualTo(blocks);
        assertThat(s.get("inactive_split.small_pool.current")).isEqualTo(blocks);
        assertThat(s.get("inactive_split_bytes.all.current")).isEqualTo(bytes);
        assertThat(s.get("inactive_split_bytes.small_pool.current")).isEqualTo(bytes);
        a.checkInvariants();
    }

    // ---------------------------------------------------------------- §2.3 the global expandable flag

    @Test
    void expandableFlagMakesClassicLargeBlocksSplitAt512() {
        SimulatedDevice dev = device(GiB);
        CachingAllocator a = new CachingAllocator(dev);
        long p = a.malloc(19 * MiB + 512 * KiB);     // 20 MiB segment, 0.5 MiB remainder not > 1 MiB: whole
        assertThat(a.blockSize(p)).isEqualTo(20 * MiB);
        a.free(p);
        a.setSettings("expandable_segments:True");
        // the cached classic block serves again, but with the flag on the 0.5 MiB remainder (≥ 512) splits off,
        // and since the block is not expandable it counts as inactive split
        long q = a.malloc(19 * MiB + 512 * KiB);
        assertThat(q).isEqualTo(p);
        assertThat(a.blockSize(q)).isEqualTo(19 * MiB + 512 * KiB);
        Map<String, Long> s = a.memoryStats();
        assertThat(s.get("inactive_split.large_pool.current")).isEqualTo(1);
        assertThat(s.get("inactive_split_bytes.large_pool.current")).isEqualTo(512 * KiB);
        assertThat(dev.callCount(DeviceOp.MALLOC)).isEqualTo(1);
        a.checkInvariants();
    }

    @Test
    void withoutVirtualMemoryTheFlagIsIgnoredEverywhere() {
        SimulatedDevice dev = SimulatedDevice.builder().capacity(GiB).virtualMemory(false).build();
        CachingAllocator a = new CachingAllocator(dev, expandable());
        // §5.5: such builds ignore expandable_segments, so §2.3 sees the flag off: a 0.5 MiB large remainder
        // is not split, and the segment is an ordinary cudaMalloc'd one
        long p = a.malloc(19 * MiB + 512 * KiB);
        assertThat(a.blockSize(p)).isEqualTo(20 * MiB);
        Map<String, Long> s = a.memoryStats();
        assertThat(s.get("segment.all.current")).isEqualTo(1);
        assertThat(dev.callCount(DeviceOp.MALLOC)).isEqualTo(1);
        assertThat(a.snapshot().allocatorSettings().get("expandable_segments")).isEqualTo(false);
        a.checkInvariants();
    }

    // ---------------------------------------------------------------- §5.2 stats that expandable segments leave alone

    @Test
    void expandableMappingMovesNeitherSegmentNorOversizeSegmentNorInactiveSplit() {
        AllocatorConfig c = cfg().expandableSegments(true).maxSplitSize(40 * MiB)
                .raw("expandable_segments:True,max_split_size_mb:40").build();
        CachingAllocator a = new CachingAllocator(device(GiB), c);
        // 50 MiB: one map_block of 3 pages (60 MiB); split (flag on) leaves 10 MiB free in the segment
        long p = a.malloc(50 * MiB);
        Map<String, Long> s = a.memoryStats();
        assertThat(s.get("reserved_bytes.large_pool.current")).isEqualTo(60 * MiB);
        assertThat(s.get("num_device_alloc")).isEqualTo(1);
        assertThat(s.get("oversize_allocations.current")).isEqualTo(1);   // block 50 ≥ 40: still counted
        assertThat(s.get("oversize_segments.allocated")).isZero();
        assertThat(s.get("segment.all.allocated")).isZero();
        assertThat(s.get("inactive_split.all.allocated")).isZero();
        assertThat(s.get("inactive_split_bytes.all.allocated")).isZero();
        a.free(p);
        a.emptyCache();
        s = a.memoryStats();
        assertThat(s.get("reserved_bytes.all.current")).isZero();
        assertThat(s.get("num_device_free")).isEqualTo(1);
        assertThat(s.get("oversize_allocations.freed")).isEqualTo(1);
        assertThat(s.get("segment.all.freed")).isZero();
        assertThat(s.get("oversize_segments.freed")).isZero();
        assertThat(s.get("inactive_split_bytes.all.freed")).isZero();
        a.checkInvariants();
    }

    // ---------------------------------------------------------------- §5.4 unmapping partial pages, destruction

    @Test
    void unmapTakesOnlyWholePagesAndTheEmptySegmentIsDestroyed() {
        SimulatedDevice dev = device(GiB);
        CachingAllocator a = new CachingAllocator(dev, expandable());
        List<TraceEntry> t = tracked(a);
        long pa = a.malloc(10 * MiB);         // page 0 mapped: a = [0, 10), free [10, 20)
        long base = pa;
        long pb = a.malloc(15 * MiB);         // free 10 MiB + map page 1: b = [10, 25), free [25, 40)
        long pc = a.malloc(10 * MiB);         // c = [25, 35), free [35, 40)
        assertThat(pb).isEqualTo(base + 10 * MiB);
        assertThat(pc).isEqualTo(base + 25 * MiB);
        a.free(pb);
        // free [10, 25) holds no whole page (first boundary ≥ 10 is 20, last ≤ 25 is 20); nor does [35, 40)
        a.emptyCache();
        assertThat(a.reservedBytes()).isEqualTo(40 * MiB);
        assertThat(a.memoryStats().get("num_device_free")).isZero();
        a.free(pa);                           // free [0, 25)
        t.clear();
        // page 0 is unmapped; [20, 25) stays a free mapped block in front of c
        a.emptyCache();
        assertThat(actions(t)).containsExactly("segment_unmap");
        assertThat(t.getFirst().addr()).isEqualTo(base);
        assertThat(t.getFirst().size()).isEqualTo(20 * MiB);
        assertThat(a.reservedBytes()).isEqualTo(20 * MiB);
        List<SegmentInfo> segs = a.snapshot().segments();
        assertThat(segs).hasSize(1);          // one reported segment per mapped run: [20, 40)
        assertThat(segs.getFirst().address()).isEqualTo(base + 20 * MiB);
        assertThat(segs.getFirst().totalSize()).isEqualTo(20 * MiB);
        assertThat(segs.getFirst().blocks()).extracting(b -> b.size())
                .containsExactly(5 * MiB, 10 * MiB, 5 * MiB);
        a.checkInvariants();
        a.free(pc);
        t.clear();
        // page 1 goes; the block merges with the unmapped head and tail and the reservation is destroyed
        // without a trace entry or a stat
        a.emptyCache();
        assertThat(actions(t)).containsExactly("segment_unmap");
        assertThat(t.getFirst().addr()).isEqualTo(base + 20 * MiB);
        assertThat(a.memoryStats().get("num_device_free")).isEqualTo(2);
        assertThat(dev.reservationCount()).isZero();
        assertThat(a.reservedBytes()).isZero();
        a.checkInvariants();
    }

    // ---------------------------------------------------------------- §5.2 find_expandable_block, §2.2 walk

    @Test
    void expandableGrowthFillsTheLowestUnmappedGapFirst() {
        CachingAllocator a = new CachingAllocator(device(GiB), expandable());
        long pa = a.malloc(20 * MiB);         // page 0
        long pb = a.malloc(20 * MiB);         // page 1
        a.malloc(20 * MiB);                   // page 2
        a.free(pb);
        a.emptyCache();                       // page 1 unmapped: a gap between a and c
        assertThat(a.reservedBytes()).isEqualTo(40 * MiB);
        List<TraceEntry> t = tracked(a);
        long pd = a.malloc(20 * MiB);         // the gap is the lowest unmapped block that fits
        assertThat(pd).isEqualTo(pa + 20 * MiB);
        assertThat(actions(t)).containsExactly("segment_map", "alloc");
        assertThat(t.getFirst().addr()).isEqualTo(pa + 20 * MiB);
        assertThat(t.getFirst().size()).isEqualTo(20 * MiB);
        a.checkInvariants();
    }

    @Test
    void expandableRunSpansAGapAFreeBlockAndTheTail() {
        CachingAllocator a = new CachingAllocator(device(GiB), expandable());
        long base = a.malloc(20 * MiB);       // page 0
        long pb = a.malloc(20 * MiB);         // page 1
        long pc = a.malloc(20 * MiB);         // page 2
        a.free(pb);
        a.emptyCache();                       // page 1 unmapped: [20, 40) is a gap
        a.free(pc);                           // [40, 60) free and mapped, before the unmapped tail
        assertThat(a.reservedBytes()).isEqualTo(40 * MiB);
        List<TraceEntry> t = tracked(a);
        // 50 MiB: no free block is big enough. The lowest unmapped block is the gap; its prev is live, so the
        // run starts at the gap: gap 20 + free 20 + tail ≥ 50. map_block(gap, 20 MiB) merges with the free
        // block (40 MiB); the 10 MiB shortfall maps one more page from the tail (growth ceil(10/20)·20 = 20).
        long p = a.malloc(50 * MiB);
        assertThat(p).isEqualTo(base + 20 * MiB);
        assertThat(actions(t)).containsExactly("segment_map", "segment_map", "alloc");
        assertThat(t).extracting(TraceEntry::addr).containsExactly(base + 20 * MiB, base + 60 * MiB, p);
        assertThat(t).extracting(TraceEntry::size).containsExactly(20 * MiB, 20 * MiB, 50 * MiB);
        Map<String, Long> s = a.memoryStats();
        assertThat(s.get("reserved_bytes.all.current")).isEqualTo(80 * MiB);
        assertThat(s.get("num_device_alloc")).isEqualTo(3 + 2);    // one per map_block call
        assertThat(a.blockSize(p)).isEqualTo(50 * MiB);             // [70, 80) stays free
        a.checkInvariants();
    }

    @Test
    void bestFitSkipsTheBlockInFrontOfTheUnmappedTail() {
        CachingAllocator a = new CachingAllocator(device(GiB), expandable());
        long pa = a.malloc(5 * MiB);          // [0, 5), free [5, 20)
        long pb = a.malloc(7 * MiB);          // [5, 12), free [12, 20)
        a.malloc(8 * MiB);                    // [12, 20) whole (remainder 0)
        a.malloc(15 * MiB);                   // maps page 1: [20, 35), free X = [35, 40) before the tail
        a.free(pb);                           // free Y = [5, 12), 7 MiB, between live blocks
        // 4 MiB: smallest fit is X (5 MiB) but its expandable size (5 MiB + the unmapped tail) is larger than
        // Y's (7 MiB), so the walk moves on to Y
        long p = a.malloc(4 * MiB);
        assertThat(p).isEqualTo(pa + 5 * MiB);
        a.checkInvariants();
    }

    // ---------------------------------------------------------------- §3 "Order of trace entries" (expandable)

    @Test
    void oomRetryUnmapsThenMapsThenAllocs() {
        SimulatedDevice dev = device(60 * MiB);
        CachingAllocator a = new CachingAllocator(dev, expandable());
        long s1 = dev.createStream();
        long pa = a.malloc(20 * MiB);
        long pb = a.malloc(20 * MiB);
        a.malloc(20 * MiB);                   // all 60 MiB mapped
        a.free(pa);
        a.free(pb);                           // [0, 40) free but mapped, on stream 0
        List<TraceEntry> t = tracked(a);
        // 40 MiB on s1: new s1 segment, its pages cannot be created; empty_cache unmaps stream 0's 40 MiB;
        // the counted retry maps 2 pages of the s1 segment
        long p = a.malloc(40 * MiB, s1);
        assertThat(actions(t)).containsExactly("segment_unmap", "segment_map", "alloc");
        assertThat(t.get(0).addr()).isEqualTo(pa);
        assertThat(t.get(0).size()).isEqualTo(40 * MiB);
        assertThat(t.get(1).addr()).isEqualTo(p);
        assertThat(t.get(1).size()).isEqualTo(40 * MiB);
        assertThat(t.get(1).stream()).isEqualTo(s1);
        assertThat(a.memoryStats().get("num_alloc_retries")).isEqualTo(1);
        assertThat(a.reservedBytes()).isEqualTo(60 * MiB);
        a.checkInvariants();
    }

    // ---------------------------------------------------------------- §4.2 release order

    @Test
    void emptyCacheReleasesLargePoolThenSmallPoolInSizeOrder() {
        CachingAllocator a = new CachingAllocator(device(GiB));
        long small = a.malloc(1000);
        long big = a.malloc(30 * MiB);
        long mid = a.malloc(3 * MiB);          // 20 MiB segment
        a.free(small);
        a.free(big);
        a.free(mid);
        List<TraceEntry> t = tracked(a);
        a.emptyCache();
        assertThat(actions(t)).containsExactly("segment_free", "segment_free", "segment_free");
        assertThat(t).extracting(TraceEntry::size).containsExactly(20 * MiB, 30 * MiB, 2 * MiB);
        assertThat(a.memoryStats().get("num_sync_all_streams")).isEqualTo(1);
    }

    // ---------------------------------------------------------------- §10.5 trace entry contents

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
        assertThat(actions(t)).containsExactly("segment_alloc", "alloc", "free_requested", "free_completed",
                "segment_free");
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
        a.malloc(1000, s1);                   // active 1024 in the small pool
        a.malloc(3 * MiB);                    // active 3 MiB in the large pool
        List<TraceEntry> first = a.snapshot().deviceTraces().getFirst();
        assertThat(actions(first)).doesNotContain("snapshot");
        TraceEntry e = a.snapshot().deviceTraces().getFirst().getLast();
        assertThat(e.action()).isEqualTo(TraceAction.SNAPSHOT);
        assertThat(e.addr()).isZero();
        assertThat(e.stream()).isZero();
        assertThat(e.size()).isEqualTo(1024 + 3 * MiB);
    }

    // ---------------------------------------------------------------- §10.1 ring buffer

    @Test
    void historyOffClearsAndStateKeepsOneEntry() {
        CachingAllocator a = new CachingAllocator(device(GiB));
        a.recordHistory(HistoryOptions.all());
        long p = a.malloc(1000);
        a.recordHistory(HistoryOptions.off());
        assertThat(a.snapshot().deviceTraces().getFirst()).isEmpty();   // cleared, and nothing recorded now
        a.free(p);
        assertThat(a.snapshot().deviceTraces().getFirst()).isEmpty();
        a.recordHistory(new HistoryOptions(HistoryOptions.Enabled.STATE, HistoryOptions.Context.STATE, 1000));
        long q = a.malloc(1000);
        a.free(q);
        List<TraceEntry> t = a.snapshot().deviceTraces().getFirst();
        assertThat(actions(t)).containsExactly("free_completed");        // a ring of one: the latest entry
        assertThat(actions(a.snapshot().deviceTraces().getFirst())).containsExactly("snapshot");
    }

    @Test
    void ringBufferReturnsTheMostRecentEntriesOldestFirstAfterWrapping() {
        CachingAllocator a = new CachingAllocator(device(GiB));
        a.recordHistory(HistoryOptions.all(3));
        long p = a.malloc(1000);              // segment_alloc, alloc
        a.free(p);                            // free_requested, free_completed
        a.emptyCache();                       // segment_free: 5 entries, the ring keeps the last 3
        assertThat(actions(a.snapshot().deviceTraces().getFirst()))
                .containsExactly("free_requested", "free_completed", "segment_free");
    }

    // ---------------------------------------------------------------- §6.2 max_split_size stat, §9.1 re-parse

    @Test
    void maxSplitSizeStatIsFixedAtCreationWhileReparseResetsTheRule() {
        CachingAllocator a = new CachingAllocator(device(4 * GiB), maxSplit(100 * MiB));
        assertThat(a.memoryStats().get("max_split_size")).isEqualTo(100 * MiB);
        long big = a.malloc(200 * MiB);
        a.free(big);
        // every parse resets max_split_size to unlimited; the stat keeps the creation value
        a.setSettings("garbage_collection_threshold:0.5");
        assertThat(a.memoryStats().get("max_split_size")).isEqualTo(100 * MiB);
        long p = a.malloc(50 * MiB);          // no oversize rule now: best fit splits the 200 MiB block
        assertThat(p).isEqualTo(big);
        assertThat(a.blockSize(p)).isEqualTo(50 * MiB);

        CachingAllocator b = new CachingAllocator(device(4 * GiB));
        b.setSettings("max_split_size_mb:100");
        assertThat(b.memoryStats().get("max_split_size")).isEqualTo(-1);
        long big2 = b.malloc(200 * MiB);
        b.free(big2);
        assertThat(b.malloc(50 * MiB)).isNotEqualTo(big2);  // but the rule applies
        a.checkInvariants();
        b.checkInvariants();
    }

    // ---------------------------------------------------------------- §2.5/§10.3/§10.4 snapshot contents

    @Test
    void snapshotShowsStaleRequestedSizesAndSumsRequestedOverActiveBlocksOnly() {
        CachingAllocator a = new CachingAllocator(device(GiB));
        long p = a.malloc(1000);              // [0, 1024), requested 1000
        long q = a.malloc(2000);              // [1024, 3072), requested 2000; the remainder starts with 0
        a.free(p);                            // p keeps its stale requested_size: free does not reset it
        SegmentInfo seg = a.snapshot().segments().getFirst();
        assertThat(seg.totalSize()).isEqualTo(2 * MiB);
        assertThat(seg.allocatedSize()).isEqualTo(2048);
        assertThat(seg.activeSize()).isEqualTo(2048);
        assertThat(seg.requestedSize()).isEqualTo(2000);            // inactive blocks do not count
        assertThat(seg.blocks()).extracting(b -> b.address()).containsExactly(p, q, q + 2048);
        assertThat(seg.blocks()).extracting(b -> b.requestedSize()).containsExactly(1000L, 2000L, 0L);
        assertThat(seg.blocks()).extracting(b -> b.state().name())
                .containsExactly("INACTIVE", "ACTIVE_ALLOCATED", "INACTIVE");
    }

    @Test
    void snapshotSettingsFollowTheLatestParseWhileTheStatKeepsTheCreationValue() {
        CachingAllocator a = new CachingAllocator(device(GiB), maxSplit(100 * MiB));
        a.setSettings("expandable_segments:False");
        Map<String, Object> settings = a.snapshot().allocatorSettings();
        assertThat(settings.get("PYTORCH_CUDA_ALLOC_CONF")).isEqualTo("expandable_segments:False");
        assertThat(settings.get("max_split_size")).isEqualTo(-1L);   // reset by the parse
        assertThat(a.memoryStats().get("max_split_size")).isEqualTo(100 * MiB);
        @SuppressWarnings("unchecked")
        Map<String, Long> roundup = (Map<String, Long>) settings.get("roundup_power2_divisions");
        assertThat(roundup.keySet()).containsExactly("1", "2", "4", "8", "16", "32", "64", "128", "256", "512",
                "1024", "2048", "4096", "8192", "16384", "32768");
        assertThat(roundup.values()).containsOnly(0L);
    }

    // ---------------------------------------------------------------- §5.2 find_expandable_block vs §2.2 oversize

    @Test
    void aSmallRequestRefusedByBestFitIsStillServedByTheExpandableWalk() {
        AllocatorConfig c = cfg().expandableSegments(true).maxSplitSize(40 * MiB)
                .raw("expandable_segments:True,max_split_size_mb:40").build();
        CachingAllocator a = new CachingAllocator(device(GiB), c);
        long p = a.malloc(50 * MiB);          // 3 pages mapped
        a.free(p);                            // one free 60 MiB block in front of the unmapped tail
        // best fit refuses it (10 MiB < max_split, block 60 MiB ≥ max_split); alloc_block's
        // find_expandable_block starts from the free block before the tail, which already holds 10 MiB,
        // so nothing is mapped and the low 10 MiB is carved from it
        long q = a.malloc(10 * MiB);
        assertThat(q).isEqualTo(p);
        Map<String, Long> s = a.memoryStats();
        assertThat(s.get("num_device_alloc")).isEqualTo(1);
        assertThat(s.get("reserved_bytes.all.current")).isEqualTo(60 * MiB);
        a.checkInvariants();
    }

    // ---------------------------------------------------------------- §6.2 resets

    @Test
    void resetsCoverOversizeStatsAndTheCounters() {
        CachingAllocator a = new CachingAllocator(device(4 * GiB), maxSplit(100 * MiB));
        a.malloc(200 * MiB);
        long q = a.malloc(200 * MiB);
        a.free(q);
        Map<String, Long> s = a.memoryStats();
        assertThat(s.get("oversize_allocations.peak")).isEqualTo(2);
        a.resetPeakStats();
        s = a.memoryStats();
        assertThat(s.get("oversize_allocations.peak")).isEqualTo(1);
        assertThat(s.get("oversize_segments.peak")).isEqualTo(2);    // both segments still cached
        assertThat(s.get("allocated_bytes.all.peak")).isEqualTo(200 * MiB);
        a.resetAccumulatedStats();
        s = a.memoryStats();
        assertThat(s.get("oversize_allocations.allocated")).isZero();
        assertThat(s.get("oversize_allocations.freed")).isZero();
        assertThat(s.get("oversize_allocations.current")).isEqualTo(1);
        assertThat(s.get("allocated_bytes.all.allocated")).isZero();
        assertThat(s.get("allocated_bytes.all.current")).isEqualTo(200 * MiB);
        assertThat(s.get("num_device_alloc")).isZero();
    }
}
