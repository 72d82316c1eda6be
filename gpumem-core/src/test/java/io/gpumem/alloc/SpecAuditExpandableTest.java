package io.gpumem.alloc;

import static io.gpumem.alloc.SpecAuditSupport.*;
import static io.gpumem.testing.TestConfigs.expandable;
import static io.gpumem.testing.TestSizes.GiB;
import static io.gpumem.testing.TestSizes.KiB;
import static io.gpumem.testing.TestSizes.MiB;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.device.DeviceOp;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceEntry;
import io.gpumem.oom.OutOfMemoryException;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The spec audit of {@link CachingAllocator} (see {@link SpecAuditTest}) for expandable segments
 * (allocator.md §5) and the global expandable flag's reach into splitting (allocator.md §2.3): page-granular
 * growth and unmapping, the lowest-address run of find_expandable_block, the best-fit walk past the tail
 * block, the stats that mapping must not move, segment destruction and the trace order of an OOM retry.
 * Expected figures are worked out in the comments.
 */
class SpecAuditExpandableTest {

    // --------------------------------------------------- allocator.md §1.5/§7 alloc_size in an expandable OOM

    @Test
    void expandableOomStillReportsGetAllocationSize() {
        CachingAllocator a = new CachingAllocator(device(30 * MiB), expandable());
        List<TraceEntry> t = tracked(a);
        // 25 MiB needs two 20 MiB pages (40 MiB > 30 MiB of device): the second page cannot be created, the
        // first is given back, the retry fails the same way. The text names alloc_size (25 MiB rounded up to
        // 2 MiB = 26 MiB), not the 40 MiB of pages; the oom entry names the rounded request
        assertThatThrownBy(() -> a.malloc(25 * MiB))
                .isInstanceOfSatisfying(
                        OutOfMemoryException.class,
                        e -> assertThat(e.getMessage()).startsWith("CUDA out of memory. Tried to allocate 26.00 MiB."));
        assertThat(actions(t)).containsExactly("oom");
        assertThat(t.getFirst().size()).isEqualTo(25 * MiB);
        assertThat(a.reservedBytes()).isZero();
        assertThat(a.stats().toPyTorchMap().get("num_alloc_retries")).isEqualTo(1);
        a.internals().checkInvariants();
    }

    // --------------------------------------------------- allocator.md §2.3 the global expandable flag

    @Test
    void expandableFlagMakesClassicLargeBlocksSplitAt512() {
        SimulatedDevice dev = device(GiB);
        CachingAllocator a = new CachingAllocator(dev);
        long p = a.malloc(19 * MiB + 512 * KiB); // 20 MiB segment, 0.5 MiB remainder not > 1 MiB: whole
        assertThat(a.internals().blockSize(p)).isEqualTo(20 * MiB);
        a.free(p);
        a.setSettings("expandable_segments:True");
        // the cached classic block serves again, but with the flag on the 0.5 MiB remainder (≥ 512) splits off,
        // and since the block is not expandable it counts as inactive split
        long q = a.malloc(19 * MiB + 512 * KiB);
        assertThat(q).isEqualTo(p);
        assertThat(a.internals().blockSize(q)).isEqualTo(19 * MiB + 512 * KiB);
        Map<String, Long> s = a.stats().toPyTorchMap();
        assertThat(s.get("inactive_split.large_pool.current")).isEqualTo(1);
        assertThat(s.get("inactive_split_bytes.large_pool.current")).isEqualTo(512 * KiB);
        assertThat(dev.callCount(DeviceOp.MALLOC)).isEqualTo(1);
        a.internals().checkInvariants();
    }

    @Test
    void withoutVirtualMemoryTheFlagIsIgnoredEverywhere() {
        SimulatedDevice dev =
                SimulatedDevice.builder().capacity(GiB).virtualMemory(false).build();
        CachingAllocator a = new CachingAllocator(dev, expandable());
        // allocator.md §5.5: such builds ignore expandable_segments, so §2.3 sees the flag off: a 0.5 MiB large
        // remainder
        // is not split, and the segment is an ordinary cudaMalloc'd one
        long p = a.malloc(19 * MiB + 512 * KiB);
        assertThat(a.internals().blockSize(p)).isEqualTo(20 * MiB);
        Map<String, Long> s = a.stats().toPyTorchMap();
        assertThat(s.get("segment.all.current")).isEqualTo(1);
        assertThat(dev.callCount(DeviceOp.MALLOC)).isEqualTo(1);
        assertThat(a.snapshot().allocatorSettings().get("expandable_segments")).isEqualTo(false);
        a.internals().checkInvariants();
    }

    // --------------------------------------------------- allocator.md §5.2 stats that expandable segments leave alone

    @Test
    void expandableMappingMovesNeitherSegmentNorOversizeSegmentNorInactiveSplit() {
        AllocatorConfig c = cfg().expandableSegments(true)
                .maxSplitSize(40 * MiB)
                .raw("expandable_segments:True,max_split_size_mb:40")
                .build();
        CachingAllocator a = new CachingAllocator(device(GiB), c);
        // 50 MiB: one map_block of 3 pages (60 MiB); split (flag on) leaves 10 MiB free in the segment
        long p = a.malloc(50 * MiB);
        Map<String, Long> s = a.stats().toPyTorchMap();
        assertThat(s.get("reserved_bytes.large_pool.current")).isEqualTo(60 * MiB);
        assertThat(s.get("num_device_alloc")).isEqualTo(1);
        assertThat(s.get("oversize_allocations.current")).isEqualTo(1); // block 50 ≥ 40: still counted
        assertThat(s.get("oversize_segments.allocated")).isZero();
        assertThat(s.get("segment.all.allocated")).isZero();
        assertThat(s.get("inactive_split.all.allocated")).isZero();
        assertThat(s.get("inactive_split_bytes.all.allocated")).isZero();
        a.free(p);
        a.emptyCache();
        s = a.stats().toPyTorchMap();
        assertThat(s.get("reserved_bytes.all.current")).isZero();
        assertThat(s.get("num_device_free")).isEqualTo(1);
        assertThat(s.get("oversize_allocations.freed")).isEqualTo(1);
        assertThat(s.get("segment.all.freed")).isZero();
        assertThat(s.get("oversize_segments.freed")).isZero();
        assertThat(s.get("inactive_split_bytes.all.freed")).isZero();
        a.internals().checkInvariants();
    }

    // --------------------------------------------------- allocator.md §5.4 unmapping partial pages, destruction

    @Test
    void unmapTakesOnlyWholePagesAndTheEmptySegmentIsDestroyed() {
        SimulatedDevice dev = device(GiB);
        CachingAllocator a = new CachingAllocator(dev, expandable());
        List<TraceEntry> t = tracked(a);
        long pa = a.malloc(10 * MiB); // page 0 mapped: a = [0, 10), free [10, 20)
        long base = pa;
        long pb = a.malloc(15 * MiB); // free 10 MiB + map page 1: b = [10, 25), free [25, 40)
        long pc = a.malloc(10 * MiB); // c = [25, 35), free [35, 40)
        assertThat(pb).isEqualTo(base + 10 * MiB);
        assertThat(pc).isEqualTo(base + 25 * MiB);
        a.free(pb);
        // free [10, 25) holds no whole page (first boundary ≥ 10 is 20, last ≤ 25 is 20); nor does [35, 40)
        a.emptyCache();
        assertThat(a.reservedBytes()).isEqualTo(40 * MiB);
        assertThat(a.stats().toPyTorchMap().get("num_device_free")).isZero();
        a.free(pa); // free [0, 25)
        t.clear();
        // page 0 is unmapped; [20, 25) stays a free mapped block in front of c
        a.emptyCache();
        assertThat(actions(t)).containsExactly("segment_unmap");
        assertThat(t.getFirst().addr()).isEqualTo(base);
        assertThat(t.getFirst().size()).isEqualTo(20 * MiB);
        assertThat(a.reservedBytes()).isEqualTo(20 * MiB);
        List<SegmentInfo> segs = a.snapshot().segments();
        assertThat(segs).hasSize(1); // one reported segment per mapped run: [20, 40)
        assertThat(segs.getFirst().address()).isEqualTo(base + 20 * MiB);
        assertThat(segs.getFirst().totalSize()).isEqualTo(20 * MiB);
        assertThat(segs.getFirst().blocks()).extracting(b -> b.size()).containsExactly(5 * MiB, 10 * MiB, 5 * MiB);
        a.internals().checkInvariants();
        a.free(pc);
        t.clear();
        // page 1 goes; the block merges with the unmapped head and tail and the reservation is destroyed
        // without a trace entry or a stat
        a.emptyCache();
        assertThat(actions(t)).containsExactly("segment_unmap");
        assertThat(t.getFirst().addr()).isEqualTo(base + 20 * MiB);
        assertThat(a.stats().toPyTorchMap().get("num_device_free")).isEqualTo(2);
        assertThat(dev.reservationCount()).isZero();
        assertThat(a.reservedBytes()).isZero();
        a.internals().checkInvariants();
    }

    // --------------------------------------------------- allocator.md §5.2 find_expandable_block, §2.2 walk

    @Test
    void expandableGrowthFillsTheLowestUnmappedGapFirst() {
        CachingAllocator a = new CachingAllocator(device(GiB), expandable());
        long pa = a.malloc(20 * MiB); // page 0
        long pb = a.malloc(20 * MiB); // page 1
        a.malloc(20 * MiB); // page 2
        a.free(pb);
        a.emptyCache(); // page 1 unmapped: a gap between a and c
        assertThat(a.reservedBytes()).isEqualTo(40 * MiB);
        List<TraceEntry> t = tracked(a);
        long pd = a.malloc(20 * MiB); // the gap is the lowest unmapped block that fits
        assertThat(pd).isEqualTo(pa + 20 * MiB);
        assertThat(actions(t)).containsExactly("segment_map", "alloc");
        assertThat(t.getFirst().addr()).isEqualTo(pa + 20 * MiB);
        assertThat(t.getFirst().size()).isEqualTo(20 * MiB);
        a.internals().checkInvariants();
    }

    @Test
    void expandableRunSpansAGapAFreeBlockAndTheTail() {
        CachingAllocator a = new CachingAllocator(device(GiB), expandable());
        long base = a.malloc(20 * MiB); // page 0
        long pb = a.malloc(20 * MiB); // page 1
        long pc = a.malloc(20 * MiB); // page 2
        a.free(pb);
        a.emptyCache(); // page 1 unmapped: [20, 40) is a gap
        a.free(pc); // [40, 60) free and mapped, before the unmapped tail
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
        Map<String, Long> s = a.stats().toPyTorchMap();
        assertThat(s.get("reserved_bytes.all.current")).isEqualTo(80 * MiB);
        assertThat(s.get("num_device_alloc")).isEqualTo(3 + 2); // one per map_block call
        assertThat(a.internals().blockSize(p)).isEqualTo(50 * MiB); // [70, 80) stays free
        a.internals().checkInvariants();
    }

    @Test
    void bestFitSkipsTheBlockInFrontOfTheUnmappedTail() {
        CachingAllocator a = new CachingAllocator(device(GiB), expandable());
        long pa = a.malloc(5 * MiB); // [0, 5), free [5, 20)
        long pb = a.malloc(7 * MiB); // [5, 12), free [12, 20)
        a.malloc(8 * MiB); // [12, 20) whole (remainder 0)
        a.malloc(15 * MiB); // maps page 1: [20, 35), free X = [35, 40) before the tail
        a.free(pb); // free Y = [5, 12), 7 MiB, between live blocks
        // 4 MiB: smallest fit is X (5 MiB) but its expandable size (5 MiB + the unmapped tail) is larger than
        // Y's (7 MiB), so the walk moves on to Y
        long p = a.malloc(4 * MiB);
        assertThat(p).isEqualTo(pa + 5 * MiB);
        a.internals().checkInvariants();
    }

    @Test
    void bestFitKeepsTheBlockInFrontOfAnUnmappedGapWhenTheNextCanGrowNoFurther() {
        CachingAllocator a = new CachingAllocator(device(GiB), expandable());
        long x1 = a.malloc(20 * MiB); // page 0
        long x2 = a.malloc(40 * MiB); // pages 1-2
        a.malloc(20 * MiB); // page 3
        long x4 = a.malloc(60 * MiB); // pages 4-6
        a.malloc(20 * MiB); // page 7
        a.free(x2);
        a.emptyCache(); // unmaps pages 1-2: a 40 MiB unmapped gap after page 0
        a.free(x1); // free [0, 20) in front of the gap: can grow to 60 MiB
        a.free(x4); // free [80, 140) between live blocks: 60 MiB
        // 20 MiB: the smallest fit is [0, 20); the next block's expandable size (60 MiB) is not smaller than its
        // (20 MiB + the 40 MiB gap), so the walk stays (get_free_block moves on only while it is strictly smaller)
        assertThat(a.malloc(20 * MiB)).isEqualTo(x1);
        a.internals().checkInvariants();
    }

    // --------------------------------------------------- allocator.md §3 "Order of trace entries" (expandable)

    @Test
    void oomRetryUnmapsThenMapsThenAllocs() {
        SimulatedDevice dev = device(60 * MiB);
        CachingAllocator a = new CachingAllocator(dev, expandable());
        long s1 = dev.createStream();
        long pa = a.malloc(20 * MiB);
        long pb = a.malloc(20 * MiB);
        a.malloc(20 * MiB); // all 60 MiB mapped
        a.free(pa);
        a.free(pb); // [0, 40) free but mapped, on stream 0
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
        assertThat(a.stats().toPyTorchMap().get("num_alloc_retries")).isEqualTo(1);
        assertThat(a.reservedBytes()).isEqualTo(60 * MiB);
        a.internals().checkInvariants();
    }

    // --------------------------------------------------- allocator.md §5.2 find_expandable_block vs §2.2 oversize

    @Test
    void aSmallRequestRefusedByBestFitIsStillServedByTheExpandableWalk() {
        AllocatorConfig c = cfg().expandableSegments(true)
                .maxSplitSize(40 * MiB)
                .raw("expandable_segments:True,max_split_size_mb:40")
                .build();
        CachingAllocator a = new CachingAllocator(device(GiB), c);
        long p = a.malloc(50 * MiB); // 3 pages mapped
        a.free(p); // one free 60 MiB block in front of the unmapped tail
        // best fit refuses it (10 MiB < max_split, block 60 MiB ≥ max_split); alloc_block's
        // find_expandable_block starts from the free block before the tail, which already holds 10 MiB,
        // so nothing is mapped and the low 10 MiB is carved from it
        long q = a.malloc(10 * MiB);
        assertThat(q).isEqualTo(p);
        Map<String, Long> s = a.stats().toPyTorchMap();
        assertThat(s.get("num_device_alloc")).isEqualTo(1);
        assertThat(s.get("reserved_bytes.all.current")).isEqualTo(60 * MiB);
        a.internals().checkInvariants();
    }
}
