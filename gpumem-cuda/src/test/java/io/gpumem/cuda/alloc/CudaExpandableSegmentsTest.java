package io.gpumem.cuda.alloc;

import static io.gpumem.testing.TestSizes.GiB;
import static io.gpumem.testing.TestSizes.MiB;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.alloc.CachingAllocator;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.cuda.CudaDevice;
import io.gpumem.cuda.fake.FakeCuda;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Expandable segments on {@code CudaDevice}: the driver calls they make, page by page, as the fake driver
 * counts them, and the bytes that live in them.
 */
class CudaExpandableSegmentsTest {
    /** The large pool's expandable page (kLargeBuffer). */
    private static final long LARGE_PAGE = 20 * MiB;

    static final AllocatorConfig EXPANDABLE = AllocatorConfig.defaults().toBuilder()
            .raw("expandable_segments:True")
            .expandableSegments(true)
            .build();

    private CudaDevice device;
    private CachingAllocator allocator;

    @BeforeEach
    void open() {
        FakeCuda.reset(8 * GiB);
        device = FakeCuda.open();
        allocator = new CachingAllocator(device, EXPANDABLE);
    }

    @AfterEach
    void close() {
        device.close();
    }

    /** The allocator's reserved bytes are exactly the physical memory the driver holds. */
    private void assertDriverAgrees() {
        allocator.internals().checkInvariants();
        assertThat(FakeCuda.physicalBytes() + FakeCuda.classicBytes()).isEqualTo(allocator.reservedBytes());
        assertThat(device.totalMemory() - device.freeMemory()).isEqualTo(allocator.reservedBytes());
        assertThat(FakeCuda.liveHandles()).isEqualTo(FakeCuda.liveMappings());
    }

    @Test
    void growsOnePageHandleAtATimeAndGivesEverythingBack() {
        long a = allocator.malloc(3 * MiB);
        assertThat(FakeCuda.calls("cuMemAddressReserve")).isEqualTo(1);
        assertThat(FakeCuda.calls("cuMemCreate")).isEqualTo(1);
        assertThat(FakeCuda.calls("cuMemMap")).isEqualTo(1);
        assertThat(FakeCuda.calls("cuMemSetAccess")).isGreaterThanOrEqualTo(1);
        assertThat(allocator.reservedBytes()).isEqualTo(LARGE_PAGE);
        assertDriverAgrees();

        long b = allocator.malloc(30 * MiB); // 17 MiB free in front of the tail: one more page
        assertThat(FakeCuda.calls("cuMemAddressReserve")).isEqualTo(1);
        assertThat(FakeCuda.calls("cuMemCreate")).isEqualTo(2);
        assertThat(FakeCuda.calls("cuMemMap")).isEqualTo(2);
        assertThat(allocator.reservedBytes()).isEqualTo(2 * LARGE_PAGE);
        assertThat(FakeCuda.calls("cuMemAlloc_v2")).isZero();
        assertDriverAgrees();

        allocator.free(a);
        allocator.free(b);
        allocator.emptyCache();
        assertThat(FakeCuda.calls("cuMemUnmap")).isEqualTo(2); // one per page handle
        assertThat(FakeCuda.calls("cuMemRelease")).isEqualTo(2);
        assertThat(FakeCuda.calls("cuMemAddressFree")).isEqualTo(1);
        assertThat(FakeCuda.liveReservations()).isZero();
        assertThat(allocator.reservedBytes()).isZero();
        assertDriverAgrees();
    }

    @Test
    void bytesWrittenThroughBlocksThatSpanPagesReadBack() {
        long a = allocator.malloc(3 * MiB);
        long b = allocator.malloc(30 * MiB); // spans the page boundary at base + 20 MiB
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment host = arena.allocate(30 * MiB);
            for (long i = 0; i < host.byteSize(); i += 8) {
                host.set(JAVA_LONG, i, i * 0x9E3779B97F4A7C15L);
            }
            device.copyToDevice(b, host, host.byteSize());
            MemorySegment back = arena.allocate(30 * MiB);
            device.copyToHost(back, b, back.byteSize());
            assertThat(back.mismatch(host)).isEqualTo(-1);
        }
        allocator.free(a);
        allocator.free(b);
    }

    @Test
    void freeingTheMiddleUnmapsOnlyItsWholePagesAndNeighboursKeepTheirBytes() {
        long[] blocks = new long[3];
        for (int i = 0; i < 3; i++) {
            blocks[i] = allocator.malloc(2 * LARGE_PAGE);
        }
        assertThat(allocator.reservedBytes()).isEqualTo(6 * LARGE_PAGE);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment v = arena.allocate(JAVA_LONG);
            v.set(JAVA_LONG, 0, 0xC0FFEEL);
            device.copyToDevice(blocks[2] + 2 * LARGE_PAGE - 8, v, 8);
            allocator.free(blocks[1]);
            long unmaps = FakeCuda.calls("cuMemUnmap");
            allocator.emptyCache();
            assertThat(FakeCuda.calls("cuMemUnmap") - unmaps).isEqualTo(2);
            assertThat(allocator.reservedBytes()).isEqualTo(4 * LARGE_PAGE);
            assertDriverAgrees();
            v.set(JAVA_LONG, 0, 0);
            device.copyToHost(v, blocks[2] + 2 * LARGE_PAGE - 8, 8);
            assertThat(v.get(JAVA_LONG, 0)).isEqualTo(0xC0FFEEL);
        }
        // The hole is mapped again for a request that fits it.
        long again = allocator.malloc(2 * LARGE_PAGE);
        assertThat(again).isEqualTo(blocks[1]);
        assertDriverAgrees();
    }

    @Test
    void withoutVirtualMemoryExpandableFallsBackToClassicAllocation() {
        device.close();
        FakeCuda.reset(8 * GiB);
        FakeCuda.setVirtualMemorySupported(false);
        device = FakeCuda.open();
        allocator = new CachingAllocator(device, EXPANDABLE);
        long a = allocator.malloc(3 * MiB);
        long b = allocator.malloc(30 * MiB);
        assertThat(FakeCuda.calls("cuMemAlloc_v2")).isEqualTo(2);
        assertThat(FakeCuda.calls("cuMemAddressReserve")).isZero();
        assertThat(FakeCuda.calls("cuMemCreate")).isZero();
        assertDriverAgrees();
        allocator.free(a);
        allocator.free(b);
        allocator.emptyCache();
        assertThat(FakeCuda.liveAllocations()).isZero();
        assertDriverAgrees();
    }
}
