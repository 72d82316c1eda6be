package io.gpumem.alloc;

import static io.gpumem.testing.TestSizes.MiB;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.device.Device;
import io.gpumem.device.SimulatedDevice;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** {@link AllocatorInternals#restoreSegment}: rebuilt state behaves and counts like the original allocations. */
class StateImportTest {

    @Test
    void restoredClassicSegmentHasConsistentStatsAndBehaves() {
        SimulatedDevice dev = SimulatedDevice.builder().capacity(4L << 30).build();
        CachingAllocator a = new CachingAllocator(dev);
        long base = a.internals()
                .restoreSegment(
                        Device.NULL,
                        20 * MiB,
                        0,
                        Pool.LARGE,
                        false,
                        List.of(RestoredBlock.allocated(4 * MiB, 4_000_000), RestoredBlock.free(16 * MiB)));
        a.internals().checkInvariants();
        Map<String, Long> s = a.stats().toPyTorchMap();
        assertThat(s.get("segment.large_pool.current")).isEqualTo(1);
        assertThat(s.get("reserved_bytes.all.current")).isEqualTo(20 * MiB);
        assertThat(s.get("allocated_bytes.all.current")).isEqualTo(4 * MiB);
        assertThat(s.get("requested_bytes.all.current")).isEqualTo(4_000_000);
        assertThat(s.get("inactive_split.all.current")).isEqualTo(1);
        assertThat(s.get("inactive_split_bytes.all.current")).isEqualTo(16 * MiB);
        assertThat(s.get("num_device_alloc")).isZero();
        // the free remainder serves the next request, at the next address
        assertThat(a.malloc(8 * MiB)).isEqualTo(base + 4 * MiB);
        a.free(base);
        a.internals().checkInvariants();
    }

    @Test
    void restoredExpandableSegmentGrowsLikeALiveOne() {
        SimulatedDevice dev = SimulatedDevice.builder().capacity(80L << 30).build();
        CachingAllocator a = new CachingAllocator(
                dev,
                AllocatorConfig.defaults().toBuilder().expandableSegments(true).build());
        long base = a.internals()
                .restoreSegment(
                        Device.NULL,
                        0,
                        0,
                        Pool.LARGE,
                        true,
                        List.of(
                                RestoredBlock.allocated(3 * MiB, 3 * MiB),
                                RestoredBlock.free(17 * MiB),
                                RestoredBlock.unmapped(4607 * 20 * MiB)));
        assertThat(a.reservedBytes()).isEqualTo(20 * MiB);
        assertThat(a.stats().toPyTorchMap().get("segment.all.current")).isZero();
        a.internals().checkInvariants();
        long q = a.malloc(30 * MiB); // allocator.md §5.3 step 2 from the restored state
        assertThat(q).isEqualTo(base + 3 * MiB);
        assertThat(a.reservedBytes()).isEqualTo(40 * MiB);
        a.free(base);
        a.free(q);
        a.emptyCache();
        assertThat(a.reservedBytes()).isZero();
        assertThat(dev.reservationCount()).isZero();
        a.internals().checkInvariants();
    }

    @Test
    void inconsistentBlocksAreRejectedBeforeTouchingTheDevice() {
        SimulatedDevice dev = SimulatedDevice.builder().capacity(4L << 30).build();
        CachingAllocator a = new CachingAllocator(dev);
        assertThatThrownBy(() -> a.internals()
                        .restoreSegment(
                                0,
                                20 * MiB,
                                0,
                                Pool.LARGE,
                                false,
                                List.of(RestoredBlock.free(4 * MiB), RestoredBlock.free(16 * MiB))))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("block 1");
        assertThatThrownBy(() -> a.internals()
                        .restoreSegment(
                                0, 20 * MiB, 0, Pool.LARGE, false, List.of(RestoredBlock.allocated(4 * MiB, 1))))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("add up to");
        assertThatThrownBy(() -> a.internals()
                        .restoreSegment(0, 20 * MiB, 0, Pool.LARGE, false, List.of(RestoredBlock.unmapped(20 * MiB))))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("non-expandable");
        assertThat(dev.mallocCount()).isZero();
        assertThat(a.reservedBytes()).isZero();
        a.internals().checkInvariants();
    }

    @Test
    void segmentAtTheWrongAddressIsGivenBack() {
        SimulatedDevice dev = SimulatedDevice.builder().capacity(4L << 30).build();
        CachingAllocator a = new CachingAllocator(dev);
        assertThatThrownBy(() -> a.internals()
                        .restoreSegment(
                                0x1000_0000L,
                                2 * MiB,
                                0,
                                Pool.SMALL,
                                false,
                                List.of(RestoredBlock.allocated(2 * MiB, 100))))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("0x10000000");
        assertThat(dev.mallocCount()).isZero();
        a.internals().checkInvariants();
    }

    @Test
    void anExpandableSegmentTheDeviceCannotMapLeavesNothingBehind() {
        // 60 MiB of device memory, a run of three mapped pages, a gap, then two more: the second run does not fit
        SimulatedDevice dev = SimulatedDevice.builder().capacity(60 * MiB).build();
        CachingAllocator a = new CachingAllocator(dev, AllocatorConfig.parse("expandable_segments:True"));
        List<RestoredBlock> blocks = List.of(
                RestoredBlock.allocated(60 * MiB, 60 * MiB),
                RestoredBlock.unmapped(20 * MiB),
                RestoredBlock.allocated(40 * MiB, 40 * MiB));
        assertThatThrownBy(() -> a.internals().restoreSegment(Device.NULL, 120 * MiB, 0, Pool.LARGE, true, blocks))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("no room to restore 41943040 mapped bytes");
        // the first run was mapped, then given back with the reservation
        assertThat(dev.mappingCount()).isZero();
        assertThat(dev.physicalHandleCount()).isZero();
        assertThat(dev.reservationCount()).isZero();
        assertThat(dev.consumedBytes()).isZero();
        assertThat(a.reservedBytes()).isZero();
        a.internals().checkInvariants();
        // and the allocator works on: the same device takes a segment that fits
        assertThat(a.malloc(40 * MiB)).isNotZero();
        a.internals().checkInvariants();
    }

    @Test
    void badExpandableLayoutsAreRejectedBeforeTouchingTheDevice() {
        SimulatedDevice dev = SimulatedDevice.builder().capacity(4L << 30).build();
        CachingAllocator a = new CachingAllocator(dev, AllocatorConfig.parse("expandable_segments:True"));
        AllocatorInternals in = a.internals();
        assertThatThrownBy(() -> in.restoreSegment(
                        Device.NULL, 30 * MiB, 0, Pool.LARGE, true, List.of(RestoredBlock.allocated(30 * MiB, 1))))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("not a multiple of the 20971520-byte page");
        assertThatThrownBy(() -> in.restoreSegment(
                        Device.NULL,
                        40 * MiB,
                        0,
                        Pool.LARGE,
                        true,
                        List.of(RestoredBlock.allocated(10 * MiB, 1), RestoredBlock.unmapped(30 * MiB))))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("block 1 (offset 10485760): unmapped block not on 20971520-byte page boundaries");
        assertThatThrownBy(() -> in.restoreSegment(
                        Device.NULL,
                        60 * MiB,
                        0,
                        Pool.LARGE,
                        true,
                        List.of(
                                RestoredBlock.allocated(20 * MiB, 1),
                                RestoredBlock.unmapped(20 * MiB),
                                RestoredBlock.unmapped(20 * MiB))))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("block 2 (offset 41943040): two adjacent unmapped blocks");
        assertThatThrownBy(() -> in.restoreSegment(
                        Device.NULL, 20 * MiB, 0, Pool.LARGE, true, List.of(RestoredBlock.allocated(20 * MiB, 0))))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("block 0 (offset 0): requested size 0 outside [1, 20971520]");
        assertThatThrownBy(() -> in.restoreSegment(
                        Device.NULL, 20 * MiB, 0, Pool.LARGE, true, List.of(RestoredBlock.free(20 * MiB - 100))))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("is not a positive multiple of 512");
        assertThatThrownBy(() -> in.restoreSegment(Device.NULL, 20 * MiB, 0, Pool.LARGE, true, List.of()))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("no blocks");
        assertThat(dev.reservationCount()).isZero();
        assertThat(dev.mappingCount()).isZero();
        assertThat(a.reservedBytes()).isZero();
        a.internals().checkInvariants();
    }

    @Test
    void restoredOversizeBlocksAndSegmentsCountAsTheAllocatorCountsItsOwn() {
        // max_split_size_mb:30: blocks and segments of 30 MiB or more are oversize (the boundary included)
        SimulatedDevice dev = SimulatedDevice.builder().capacity(4L << 30).build();
        CachingAllocator a = new CachingAllocator(dev, AllocatorConfig.parse("max_split_size_mb:30"));
        long big = a.internals()
                .restoreSegment(
                        Device.NULL, 30 * MiB, 0, Pool.LARGE, false, List.of(RestoredBlock.allocated(30 * MiB, 1)));
        long small = a.internals()
                .restoreSegment(
                        Device.NULL,
                        28 * MiB,
                        0,
                        Pool.LARGE,
                        false,
                        List.of(RestoredBlock.allocated(20 * MiB, 1), RestoredBlock.free(8 * MiB)));
        Map<String, Long> s = a.stats().toPyTorchMap();
        assertThat(s.get("oversize_allocations.current")).isEqualTo(1);
        assertThat(s.get("oversize_segments.current")).isEqualTo(1);
        // the allocator's own frees and releases take them off again, to zero
        a.free(big);
        a.free(small);
        a.emptyCache();
        s = a.stats().toPyTorchMap();
        assertThat(s.get("oversize_allocations.current")).isZero();
        assertThat(s.get("oversize_segments.current")).isZero();
        assertThat(a.reservedBytes()).isZero();
        a.internals().checkInvariants();
    }
}
