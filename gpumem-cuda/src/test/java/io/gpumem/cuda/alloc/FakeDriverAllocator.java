package io.gpumem.cuda.alloc;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.alloc.CachingAllocator;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.cuda.CudaDevice;
import io.gpumem.cuda.fake.FakeCuda;

/**
 * Test fixture: a caching allocator over a freshly reset fake libcuda, in either segment mode, with the checks the
 * fault tests share. Consistency means: the allocator's invariant checker passes, its reserved bytes equal the bytes
 * the driver holds for it (cuMemAlloc_v2 plus cuMemCreate), and every physical handle is mapped (none leaked).
 * Opening resets the whole fake, so only one fixture may be open at a time; {@link #close()} closes the device.
 */
final class FakeDriverAllocator implements AutoCloseable {

    final CudaDevice device;
    final CachingAllocator allocator;

    private FakeDriverAllocator(CudaDevice device, CachingAllocator allocator) {
        this.device = device;
        this.allocator = allocator;
    }

    /** Resets the fake to a device of {@code total} bytes and opens an allocator over it. */
    static FakeDriverAllocator open(boolean expandable, long total) {
        FakeCuda.reset(total);
        CudaDevice device = FakeCuda.open();
        return new FakeDriverAllocator(
                device,
                new CachingAllocator(
                        device, expandable ? CudaExpandableSegmentsTest.EXPANDABLE : AllocatorConfig.defaults()));
    }

    /** The driver call that obtains memory in each mode. */
    static String growCall(boolean expandable) {
        return expandable ? "cuMemCreate" : "cuMemAlloc_v2";
    }

    void assertConsistent() {
        assertConsistent("", 0, 0);
    }

    /**
     * As {@link #assertConsistent()}, allowing for {@code lostHandles} physical handles of {@code lostBytes} that the
     * allocator gave up on: when cuMemRelease fails after its page was unmapped, the allocator (like PyTorch) drops
     * the handle and the driver keeps it.
     */
    void assertConsistent(String context, long lostBytes, long lostHandles) {
        allocator.internals().checkInvariants();
        assertThat(FakeCuda.physicalBytes() + FakeCuda.classicBytes())
                .as("driver bytes = reserved bytes %s", context)
                .isEqualTo(allocator.reservedBytes() + lostBytes);
        assertThat(FakeCuda.liveHandles())
                .as("handles without a mapping leaked %s", context)
                .isEqualTo(FakeCuda.liveMappings() + lostHandles);
    }

    /** After everything was freed, the cache emptied and the allocator closed: nothing reserved or left in the driver. */
    void assertDriverEmpty(String context, long lostBytes, long lostHandles) {
        assertConsistent(context, lostBytes, lostHandles);
        assertThat(allocator.reservedBytes()).as("reserved bytes (%s)", context).isZero();
        assertThat(FakeCuda.liveAllocations())
                .as("cuMemAlloc_v2 allocations left (%s)", context)
                .isZero();
        assertThat(FakeCuda.liveReservations())
                .as("address ranges left reserved (%s)", context)
                .isZero();
        assertThat(FakeCuda.liveHandles())
                .as("physical handles left (%s)", context)
                .isEqualTo(lostHandles);
        assertThat(FakeCuda.liveMappings()).as("mappings left (%s)", context).isZero();
    }

    @Override
    public void close() {
        device.close();
    }
}
