package io.gpumem.policy;

import io.gpumem.alloc.CachingAllocator;
import io.gpumem.device.Device;
import java.util.HashMap;
import java.util.Map;

/**
 * The PyTorch-exact {@link CachingAllocator} seen through {@link AllocatorPolicy} (policy name {@code pytorch});
 * it only forwards, so its decisions stay exactly PyTorch's. {@code num_device_maps} is the device's map plus unmap
 * call count (non-zero only with expandable segments).
 */
public final class CachingPolicy implements AllocatorPolicy {

    private final CachingAllocator allocator;
    private final long mapsAtStart;

    public CachingPolicy(CachingAllocator allocator) {
        this.allocator = allocator;
        this.mapsAtStart = maps(allocator.device());
    }

    private static long maps(Device d) {
        return d.callCount(io.gpumem.device.DeviceOp.MAP) + d.callCount(io.gpumem.device.DeviceOp.UNMAP);
    }

    public CachingAllocator allocator() {
        return allocator;
    }

    @Override
    public String name() {
        return "pytorch";
    }

    @Override
    public Device device() {
        return allocator.device();
    }

    @Override
    public long malloc(long size, long stream) {
        return allocator.malloc(size, stream);
    }

    @Override
    public void free(long ptr) {
        allocator.free(ptr);
    }

    @Override
    public void recordStream(long ptr, long stream) {
        allocator.recordStream(ptr, stream);
    }

    @Override
    public void emptyCache() {
        allocator.emptyCache();
    }

    @Override
    public Map<String, Long> memoryStats() {
        Map<String, Long> m = new HashMap<>(allocator.memoryStats());
        m.put("num_device_maps", maps(allocator.device()) - mapsAtStart);
        return m;
    }

    @Override
    public io.gpumem.stats.MemoryStats stats() {
        return allocator.stats();
    }

    @Override
    public io.gpumem.history.MemorySnapshot snapshot() {
        return allocator.snapshot();
    }

    @Override
    public void close() {
        allocator.close();
    }

    @Override
    public long allocatedBytes() {
        return allocator.allocatedBytes();
    }

    @Override
    public long reservedBytes() {
        return allocator.reservedBytes();
    }

    @Override
    public void recordHistory(io.gpumem.history.HistoryOptions options) {
        allocator.recordHistory(options);
    }

    @Override
    public void setContextSupplier(java.util.function.Supplier<java.util.List<io.gpumem.history.Frame>> frames) {
        allocator.setContextSupplier(frames);
    }

    @Override
    public void setHistoryClock(java.util.function.LongSupplier micros) {
        allocator.internals().setClock(micros);
    }

    @Override
    public void checkInvariants() {
        allocator.internals().checkInvariants();
    }
}
