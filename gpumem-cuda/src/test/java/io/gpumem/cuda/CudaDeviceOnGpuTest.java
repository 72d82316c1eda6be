package io.gpumem.cuda;

import static io.gpumem.testing.TestSizes.MiB;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.device.DeviceOp;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Random;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * {@link CudaDevice} on a real NVIDIA GPU. Excluded by default (tag {@code gpu}); run with
 * {@code mvn verify -pl gpumem-cuda -am -Dgpumem.test.excludedGroups= -Dgpumem.cuda.test.library=libcuda.so.1
 * -Dtest=CudaDeviceOnGpuTest -Dsurefire.failIfNoSpecifiedTests=false}.
 */
@Tag("gpu")
class CudaDeviceOnGpuTest {

    private CudaDevice device;

    @BeforeEach
    void open() {
        device = CudaDevice.open();
        System.out.println(device);
    }

    @AfterEach
    void close() {
        device.close();
    }

    @Test
    void isARealDevice() {
        assertThat(device.name()).doesNotContain("fake");
        assertThat(device.totalMemory()).isGreaterThan(1L << 30);
        assertThat(device.freeMemory()).isPositive().isLessThanOrEqualTo(device.totalMemory());
    }

    @Test
    void classicAllocationRoundTripsBytes() {
        long seed = System.nanoTime();
        System.out.println("seed=" + seed);
        byte[] data = new byte[(int) (3 * MiB)];
        new Random(seed).nextBytes(data);
        long a = device.malloc(data.length);
        assertThat(a).isNotZero();
        device.copyToDevice(a, MemorySegment.ofArray(data), data.length);
        long b = device.malloc(data.length);
        device.copyDeviceToDevice(b, a, data.length);
        byte[] back = new byte[data.length];
        device.copyToHost(MemorySegment.ofArray(back), b, back.length);
        assertThat(back).isEqualTo(data);
        device.free(a);
        device.free(b);
    }

    @Test
    void mappedPagesRoundTripBytesAndAreReturned() {
        if (!device.supportsVirtualMemory()) {
            System.out.println("no virtual memory management on " + device.name() + "; nothing to check here");
            return;
        }
        long g = device.allocationGranularity();
        long free0 = device.freeMemory();
        long base = device.reserveAddressRange(4 * g);
        long h0 = device.createPhysical(g);
        long h1 = device.createPhysical(g);
        device.map(base, g, h0);
        device.map(base + g, g, h1);
        device.setAccess(base, 2 * g);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment pattern = arena.allocate(2 * g);
            for (long i = 0; i < 2 * g; i++) {
                pattern.set(JAVA_BYTE, i, (byte) (i * 31 + 7));
            }
            device.copyToDevice(base, pattern, 2 * g);
            MemorySegment back = arena.allocate(2 * g);
            device.copyToHost(back, base, 2 * g);
            assertThat(back.mismatch(pattern)).isEqualTo(-1);
        }
        assertThat(free0 - device.freeMemory()).isGreaterThanOrEqualTo(2 * g);
        device.unmap(base, g);
        device.unmap(base + g, g);
        device.releasePhysical(h0);
        device.releasePhysical(h1);
        device.freeAddressRange(base, 4 * g);
        assertThat(device.callCount(DeviceOp.MAP)).isEqualTo(2);
    }
}
