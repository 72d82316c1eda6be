package io.gpumem.kvcache.memory;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.alloc.CachingAllocator;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.kvcache.KvCacheException;
import io.gpumem.kvcache.KvCacheSpec;
import io.gpumem.kvcache.manager.KvCacheManager;
import org.junit.jupiter.api.Test;

class KvMemoryTest {
    private static final KvCacheSpec SPEC = KvCacheSpec.builder()
            .layers(4)
            .kvHeads(2)
            .headSize(64)
            .elementSize(2)
            .blockSize(16)
            .numBlocks(256)
            .maxModelLen(1024)
            .build();

    @Test
    void onTheCachingAllocatorTheCacheShowsUpInItsStatistics() {
        SimulatedDevice device = SimulatedDevice.builder().capacity(256L << 20).build();
        CachingAllocator allocator = new CachingAllocator(device);
        try (KvCacheManager m = new KvCacheManager(SPEC, KvMemory.cachingAllocator(allocator))) {
            assertThat(allocator.allocatedBytes()).isEqualTo(4 * SPEC.layerBytes());
            assertThat(allocator.stats().toPyTorchMap().get("allocation.all.current"))
                    .isEqualTo(4L);
            assertThat(m.pages().pageAddress(3, 255) + SPEC.pageBytes())
                    .isEqualTo(m.pages().layerAddress(3) + SPEC.layerBytes());
            allocator.internals().checkInvariants();
            // each layer region is an allocated block of the snapshot, at the address the pages use
            var blocks = allocator.snapshot().segments().stream()
                    .flatMap(seg -> seg.blocks().stream())
                    .filter(b -> b.requestedSize() == SPEC.layerBytes())
                    .map(b -> b.address())
                    .toList();
            assertThat(blocks)
                    .containsExactlyInAnyOrder(
                            m.pages().layerAddress(0),
                            m.pages().layerAddress(1),
                            m.pages().layerAddress(2),
                            m.pages().layerAddress(3));
        }
        assertThat(allocator.allocatedBytes()).isZero();
        allocator.internals().checkInvariants();
    }

    @Test
    void anAllocatorOutOfMemoryIsAClearErrorAndLeavesNothingAllocated() {
        // room for two of the four 2 MiB layer regions
        SimulatedDevice device = SimulatedDevice.builder()
                .capacity(SPEC.layerBytes() * 2 + (1 << 20))
                .build();
        CachingAllocator allocator = new CachingAllocator(device);
        assertThatThrownBy(() -> new KvCacheManager(SPEC, KvMemory.cachingAllocator(allocator)))
                .isInstanceOf(KvCacheException.class)
                .hasMessageContaining("caching allocator cannot provide a " + SPEC.layerBytes() + "-byte layer region");
        assertThat(allocator.allocatedBytes()).isZero();
        allocator.internals().checkInvariants();
    }

    @Test
    void aDeviceOutOfMemoryIsAClearErrorAndLeavesNothingAllocated() {
        SimulatedDevice device =
                SimulatedDevice.builder().capacity(SPEC.layerBytes() * 3).build();
        long free = device.freeMemory();
        assertThatThrownBy(() -> new KvCacheManager(SPEC, KvMemory.direct(device)))
                .isInstanceOf(KvCacheException.class)
                .hasMessageContaining("has no room for a " + SPEC.layerBytes() + "-byte layer region");
        assertThat(device.freeMemory()).isEqualTo(free);
    }
}
