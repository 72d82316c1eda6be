package io.gpumem.cli.sim;

import io.gpumem.alloc.CachingAllocator;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.oom.OutOfMemoryException;
import io.gpumem.script.ScriptOp;
import java.util.Map;

/**
 * The production {@link SimTarget}: PyTorch's caching allocator ({@link CachingAllocator}) on a
 * {@link SimulatedDevice} whose events are held back, so blocks freed after {@code record_stream} stay
 * pending until the script says {@code complete_events} (or something synchronises, like {@code empty_cache}).
 */
final class AllocatorSimTarget implements SimTarget {

    /** Device used when a script has no {@code device} line: an 80 GiB GPU with nothing else on it. */
    static final long DEFAULT_CAPACITY = 80L << 30;

    private final SimulatedDevice device;
    private final CachingAllocator allocator;

    private AllocatorSimTarget(SimulatedDevice device, CachingAllocator allocator) {
        this.device = device;
        this.allocator = allocator;
    }

    static SimTarget create(ScriptOp.Device spec, AllocatorConfig config) {
        SimulatedDevice.Builder b = SimulatedDevice.builder().holdEvents(true);
        if (spec == null) {
            b.capacity(DEFAULT_CAPACITY);
        } else {
            b.capacity(spec.capacity()).heldOutside(spec.held());
            if (spec.granularity() > 0) {
                b.granularity(spec.granularity());
            }
        }
        SimulatedDevice device = b.build();
        return new AllocatorSimTarget(device, new CachingAllocator(device, config));
    }

    @Override
    public long malloc(long size, long stream) {
        try {
            return allocator.malloc(size, stream);
        } catch (OutOfMemoryException e) {
            throw new OutOfMemory(e.getMessage(), e);
        }
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
    public void completeEvents() {
        device.completeAllEvents();
    }

    @Override
    public void emptyCache() {
        allocator.emptyCache();
    }

    @Override
    public void setMemoryFraction(double fraction) {
        allocator.setMemoryFraction(fraction);
    }

    @Override
    public void setSettings(String conf) {
        allocator.setSettings(conf);
    }

    @Override
    public void resetPeakStats() {
        allocator.resetPeakStats();
    }

    @Override
    public Map<String, Long> memoryStats() {
        return allocator.memoryStats();
    }

    @Override
    public int deviceIndex() {
        return device.index();
    }
}
