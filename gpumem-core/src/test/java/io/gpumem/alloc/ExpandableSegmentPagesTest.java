package io.gpumem.alloc;

import static io.gpumem.testing.TestSizes.GiB;
import static io.gpumem.testing.TestSizes.MiB;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.device.DeviceOp;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.history.SegmentInfo;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The page table of an expandable segment (allocator.md §5) as a user of the allocator sees it: a segment that maps
 * more pages than its first handle table holds, unmapping that waits for the segment's stream (the spec: "unmapping
 * first synchronises the segment's stream"), a device whose granularity the page size does not fit, and whether
 * the allocator reports expandable segments as in effect, and a restored segment the device will not place where
 * the recording had it. Each was a surviving PIT mutant (docs/testing.md).
 */
class ExpandableSegmentPagesTest {

    private static final AllocatorConfig EXPANDABLE = AllocatorConfig.parse("expandable_segments:True");

    @Test
    void aSegmentMapsAndUnmapsMorePagesThanItsFirstHandleTableHolds() {
        SimulatedDevice dev = SimulatedDevice.builder().capacity(2 * GiB).build();
        CachingAllocator a = new CachingAllocator(dev, EXPANDABLE);
        // 400 MiB in one request: 20 large pages of 20 MiB mapped at once (the handle table starts at 16)
        long big = a.malloc(400 * MiB);
        assertThat(dev.callCount(DeviceOp.MAP)).isEqualTo(20);
        // then 30 more pages, one request at a time, in the same reservation
        for (int i = 0; i < 30; i++) {
            a.malloc(20 * MiB);
        }
        assertThat(a.snapshot().segments()).hasSize(1);
        assertThat(a.snapshot().segments().getFirst().totalSize()).isEqualTo(1000 * MiB);
        a.internals().checkInvariants();

        a.free(big);
        long syncsBefore = dev.callCount(DeviceOp.SYNCHRONIZE_STREAM);
        a.emptyCache();
        assertThat(dev.callCount(DeviceOp.UNMAP)).isEqualTo(20);
        assertThat(dev.callCount(DeviceOp.RELEASE_PHYSICAL)).isEqualTo(20);
        assertThat(dev.callCount(DeviceOp.SYNCHRONIZE_STREAM))
                .as("the segment's stream is synchronised before its pages are unmapped")
                .isGreaterThan(syncsBefore);
        assertThat(a.reservedBytes()).isEqualTo(600 * MiB);
        a.internals().checkInvariants();

        // the unmapped front pages are mapped again for a request that needs them
        long again = a.malloc(400 * MiB);
        assertThat(again).isEqualTo(big);
        assertThat(dev.callCount(DeviceOp.MAP)).isEqualTo(70);
        a.internals().checkInvariants();
    }

    @Test
    void aDeviceGranularityThePageSizeDoesNotFitIsRefusedWithoutReservingAnything() {
        // 2 MiB small-pool pages on a device whose granularity is 4 MiB
        SimulatedDevice dev =
                SimulatedDevice.builder().capacity(GiB).granularity(4 * MiB).build();
        CachingAllocator a = new CachingAllocator(dev, EXPANDABLE);
        assertThatThrownBy(() -> a.malloc(MiB))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("granularity");
        assertThat(dev.callCount(DeviceOp.RESERVE_ADDRESS)).isZero();
        assertThat(a.snapshot().segments()).isEmpty();
        a.internals().checkInvariants();
        // nor is such a segment restored from a recorded state
        assertThatThrownBy(() -> a.internals()
                        .restoreSegment(
                                0,
                                4 * MiB,
                                0,
                                Pool.SMALL,
                                true,
                                List.of(RestoredBlock.allocated(2 * MiB, MiB), RestoredBlock.unmapped(2 * MiB))))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("granularity");
        assertThat(dev.callCount(DeviceOp.RESERVE_ADDRESS)).isZero();
        // 20 MiB large-pool pages are a multiple of 4 MiB: the large pool works
        long p = a.malloc(30 * MiB);
        assertThat(a.snapshot().segments()).extracting(SegmentInfo::address).containsExactly(p);
        a.internals().checkInvariants();
    }

    @Test
    void expandableSegmentsAreInEffectOnlyWhereTheDeviceHasVirtualMemory() {
        SimulatedDevice withVm = SimulatedDevice.builder().capacity(GiB).build();
        SimulatedDevice withoutVm =
                SimulatedDevice.builder().capacity(GiB).virtualMemory(false).build();
        assertThat(new CachingAllocator(withVm, EXPANDABLE).internals().expandableSegments())
                .isTrue();
        assertThat(new CachingAllocator(withoutVm, EXPANDABLE).internals().expandableSegments())
                .isFalse();
        assertThat(new CachingAllocator(withVm).internals().expandableSegments())
                .isFalse();
    }

    @Test
    void aRestoredSegmentTheDevicePutsElsewhereIsRefusedAndItsRangeGivenBack() {
        SimulatedDevice dev = SimulatedDevice.builder().capacity(GiB).build();
        CachingAllocator a = new CachingAllocator(dev, EXPANDABLE);
        long wanted = 0x7000_0000_0000L; // not where the simulated device reserves
        assertThatThrownBy(() -> a.internals()
                        .restoreSegment(
                                wanted,
                                40 * MiB,
                                0,
                                Pool.LARGE,
                                true,
                                List.of(RestoredBlock.allocated(20 * MiB, 20 * MiB), RestoredBlock.unmapped(20 * MiB))))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("instead of the restored segment address 0x" + Long.toHexString(wanted));
        assertThat(dev.callCount(DeviceOp.FREE_ADDRESS)).isEqualTo(dev.callCount(DeviceOp.RESERVE_ADDRESS));
        assertThat(a.snapshot().segments()).isEmpty();
        assertThat(a.reservedBytes()).isZero();
        a.internals().checkInvariants();
    }
}
