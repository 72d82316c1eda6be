package io.gpumem.policy;

import io.gpumem.device.Device;
import io.gpumem.device.SimulatedDevice;

/** The policy contract on the simulated device (data kept, so block contents are checked). */
class SimulatedDevicePolicyTest extends PolicyContractTest {
    @Override
    protected Device newDevice(long capacity, boolean holdEvents) {
        return SimulatedDevice.builder()
                .capacity(capacity)
                .backed(true)
                .holdEvents(holdEvents)
                .build();
    }

    @Override
    protected void completeEvents(Device device) {
        ((SimulatedDevice) device).completeAllEvents();
    }

    @Override
    protected boolean keepsData() {
        return true;
    }
}
