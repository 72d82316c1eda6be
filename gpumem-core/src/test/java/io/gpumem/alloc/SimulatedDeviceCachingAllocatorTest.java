package io.gpumem.alloc;

import io.gpumem.device.Device;
import io.gpumem.device.SimulatedDevice;

/** Runs the allocator contract on the simulated device. */
class SimulatedDeviceCachingAllocatorTest extends CachingAllocatorContractTest {
    @Override
    protected Device newDevice(long capacityBytes) {
        return SimulatedDevice.builder().capacity(capacityBytes).build();
    }
}
