package io.gpumem.kvcache.memory;

import io.gpumem.alloc.CachingAllocator;
import io.gpumem.device.Device;

/**
 * Where the KV cache's per-layer regions come from. Small on purpose so the cache can sit directly on
 * a {@link Device} or on top of a caching allocator (so its memory shows up in the allocator's
 * statistics and snapshots like any other allocation).
 */
public interface KvMemory {

    /** The device the regions live on (used for copies). */
    Device device();

    /**
     * Allocates one region of {@code bytes} device bytes.
     *
     * @throws io.gpumem.kvcache.KvCacheException if the memory is not available
     */
    long allocate(long bytes);

    /** Frees a region returned by {@link #allocate}. */
    void free(long address);

    /** Regions from gpumem's caching allocator (the default in the simulator and CLI). */
    static KvMemory cachingAllocator(CachingAllocator allocator) {
        return new AllocatorKvMemory(allocator);
    }

    /** Regions straight from {@link Device#malloc}. */
    static KvMemory direct(Device device) {
        return new DeviceKvMemory(device);
    }
}
