package io.gpumem.cuda.policy;

import io.gpumem.cuda.fake.FakeCuda;
import io.gpumem.device.Device;
import io.gpumem.policy.PolicyContractTest;
import org.junit.jupiter.api.BeforeEach;

/**
 * The stitch and planned policy contract on {@code CudaDevice} over the fake driver: pages are memfd mappings, a
 * stitched page is unmapped at one address and mapped at another through the real FFM bindings, and the data the
 * tests write into live blocks is read back through the driver's copies.
 */
class CudaDevicePolicyTest extends PolicyContractTest {

    @BeforeEach
    void resetFake() {
        FakeCuda.reset();
    }

    @Override
    protected Device newDevice(long capacity, boolean holdEvents) {
        FakeCuda.setTotal(capacity + FakeCuda.classicBytes() + FakeCuda.physicalBytes());
        FakeCuda.holdEvents(holdEvents);
        return FakeCuda.open();
    }

    @Override
    protected void completeEvents(Device device) {
        FakeCuda.completeAll();
    }

    @Override
    protected boolean keepsData() {
        return true;
    }
}
