package io.gpumem.kvcache.memory;

import io.gpumem.alloc.CachingAllocator;
import io.gpumem.device.Device;
import io.gpumem.kvcache.KvCacheException;
import io.gpumem.oom.OutOfMemoryException;
import java.util.Objects;

/**
 * {@link KvMemory} on gpumem's caching allocator: each layer region is one allocator block, so the KV
 * cache appears in {@code memoryStats()}, {@code memorySummary()} and snapshots like any other tensor.
 * An allocator out-of-memory becomes a {@link KvCacheException} carrying the allocator's own report.
 */
final class AllocatorKvMemory implements KvMemory {
    private final CachingAllocator allocator;

    AllocatorKvMemory(CachingAllocator allocator) {
        this.allocator = Objects.requireNonNull(allocator, "allocator");
    }

    @Override
    public Device device() {
        return allocator.device();
    }

    @Override
    public long allocate(long bytes) {
        try {
            return allocator.malloc(bytes);
        } catch (OutOfMemoryException e) {
            throw new KvCacheException(
                    "KV cache: the caching allocator cannot provide a " + bytes + "-byte layer region: "
                            + e.getMessage(),
                    e);
        }
    }

    @Override
    public void free(long address) {
        allocator.free(address);
    }
}
