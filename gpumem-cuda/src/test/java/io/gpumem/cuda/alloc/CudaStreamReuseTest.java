package io.gpumem.cuda.alloc;

import static io.gpumem.testing.TestSizes.MiB;
import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.alloc.CachingAllocator;
import io.gpumem.cuda.CudaDevice;
import io.gpumem.cuda.fake.FakeCuda;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Cross-stream reuse through real driver events: with the fake holding work back, a block used on another
 * stream is not handed out again until that stream's recorded work completes ({@code cuEventQuery} stops
 * returning {@code CUDA_ERROR_NOT_READY}).
 */
class CudaStreamReuseTest {

    private CudaDevice device;

    @BeforeEach
    void open() {
        FakeCuda.reset(1L << 30);
        FakeCuda.holdEvents(true);
        device = FakeCuda.open();
    }

    @AfterEach
    void close() {
        device.close();
    }

    @Test
    void aBlockUsedOnAnotherStreamWaitsForThatStreamsWork() {
        CachingAllocator allocator = new CachingAllocator(device);
        long side = device.createStream();
        long p = allocator.malloc(MiB);
        allocator.recordStream(p, side);
        allocator.free(p);
        assertThat(FakeCuda.calls("cuEventRecord")).isEqualTo(1);

        long q = allocator.malloc(MiB); // p's event is pending: p is not reused
        assertThat(q).isNotEqualTo(p);
        assertThat(FakeCuda.calls("cuEventQuery")).isGreaterThanOrEqualTo(1);
        assertThat(allocator.stats().toPyTorchMap().get("active_bytes.all.current"))
                .isEqualTo(2 * MiB);

        FakeCuda.completeStream(side);
        long r = allocator.malloc(MiB); // the event is now observed complete: p comes back
        assertThat(r).isEqualTo(p);
        allocator.free(q);
        allocator.free(r);
        allocator.emptyCache();
        assertThat(allocator.reservedBytes()).isZero();
        assertThat(FakeCuda.classicBytes()).isZero();
        allocator.internals().checkInvariants();
        device.destroyStream(side);
    }
}
