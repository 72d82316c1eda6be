package io.gpumem.cuda.alloc;

import io.gpumem.alloc.CachingAllocatorContractTest;
import io.gpumem.cuda.fake.FakeCuda;
import io.gpumem.device.Device;
import org.junit.jupiter.api.BeforeEach;

/**
 * The allocator contract on a driver without virtual memory management (device attribute 102 = 0): the
 * classic path must behave the same, and the expandable-only checks are skipped by the contract itself.
 */
class CudaDeviceWithoutVirtualMemoryCachingAllocatorTest extends CachingAllocatorContractTest {

    @BeforeEach
    void resetFake() {
        FakeCuda.reset();
        FakeCuda.setVirtualMemorySupported(false);
    }

    @Override
    protected Device newDevice(long capacityBytes) {
        FakeCuda.setTotal(capacityBytes + FakeCuda.classicBytes());
        return FakeCuda.open();
    }
}
