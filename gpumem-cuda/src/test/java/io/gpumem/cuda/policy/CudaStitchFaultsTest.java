package io.gpumem.cuda.policy;

import static io.gpumem.testing.TestSizes.GiB;
import static io.gpumem.testing.TestSizes.MiB;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.cuda.CudaDevice;
import io.gpumem.cuda.fake.FakeCuda;
import io.gpumem.device.DeviceException;
import io.gpumem.policy.StitchAllocator;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A driver failure while policy stitch maps a handle leaves nothing behind in the fake driver: a failed
 * {@code cuMemMap} releases the handle just created, a failed {@code cuMemSetAccess} unmaps it first, so the
 * driver holds exactly the pages the allocator reserves and the same pages can be mapped by the next request.
 */
class CudaStitchFaultsTest {

    private CudaDevice device;

    @BeforeEach
    void open() {
        FakeCuda.reset(GiB);
        device = FakeCuda.open();
    }

    @AfterEach
    void close() {
        device.close();
    }

    @ParameterizedTest
    @ValueSource(strings = {"cuMemMap", "cuMemSetAccess"})
    void aFailedMapOrSetAccessLeavesNoHandleOrMappingBehind(String failing) {
        StitchAllocator allocator = new StitchAllocator(device);
        FakeCuda.failNth(failing, 1, FakeCuda.UNKNOWN);

        assertThatThrownBy(() -> allocator.malloc(8 * MiB, 0)).isInstanceOf(DeviceException.class);

        allocator.internals().checkInvariants();
        assertThat(FakeCuda.physicalBytes())
                .as("driver bytes after the failure")
                .isEqualTo(allocator.stats().reservedBytes());
        assertThat(FakeCuda.liveHandles()).as("handles").isEqualTo(FakeCuda.liveMappings());
        Map<String, Long> stats = allocator.stats().toPyTorchMap();
        assertThat(stats.get("reserved_bytes.all.allocated") - stats.get("reserved_bytes.all.freed"))
                .as("reserved bytes created minus released")
                .isEqualTo(stats.get("reserved_bytes.all.current"));

        long p = allocator.malloc(8 * MiB, 0); // the same pages map now
        assertThat(FakeCuda.physicalBytes()).isEqualTo(8 * MiB);
        allocator.free(p);
        allocator.emptyCache();
        assertThat(FakeCuda.liveHandles()).isZero();
        assertThat(FakeCuda.liveMappings()).isZero();
        assertThat(FakeCuda.physicalBytes()).isZero();
        allocator.close();
    }
}
