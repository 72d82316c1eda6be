package io.gpumem.cuda.alloc;

import io.gpumem.alloc.CachingAllocatorContractTest;
import io.gpumem.cuda.fake.FakeCuda;
import io.gpumem.device.Device;
import org.junit.jupiter.api.BeforeEach;

/**
 * The whole caching allocator contract (native and expandable segments) on {@code CudaDevice} over the fake
 * driver: every driver call the allocator makes goes through the FFM bindings and the fake's rule checks.
 *
 * <p>The fake is reset once per test. A test may open several devices; later ones get a total of
 * {@code capacity} plus whatever earlier devices of the same test still hold, so each sees
 * {@code capacityBytes} free and earlier devices stay valid.
 */
class CudaDeviceCachingAllocatorTest extends CachingAllocatorContractTest {

    @BeforeEach
    void resetFake() {
        FakeCuda.reset();
    }

    @Override
    protected Device newDevice(long capacityBytes) {
        FakeCuda.setTotal(capacityBytes + FakeCuda.classicBytes() + FakeCuda.physicalBytes());
        return FakeCuda.open();
    }
}
