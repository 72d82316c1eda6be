package io.gpumem.cli.sim;

import io.gpumem.alloc.CachingAllocator;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.device.Device;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.history.HistoryOptions;
import io.gpumem.history.MemorySnapshot;
import io.gpumem.oom.OutOfMemoryException;
import io.gpumem.script.ScriptOp;
import io.gpumem.stats.MemoryStats;
import java.util.HashMap;
import java.util.Map;

/**
 * The production {@link SimTarget}: PyTorch's caching allocator ({@link CachingAllocator}) on a device.
 *
 * <p>On a {@link SimulatedDevice} events are held back, so blocks freed after {@code record_stream} stay
 * pending until the script says {@code complete_events} (or something synchronises, like {@code empty_cache}),
 * and script stream numbers are used as stream handles directly. On a real device ({@code --device cuda})
 * {@code complete_events} synchronises the device, and each script stream number other than 0 is mapped to a
 * stream created on first use, since arbitrary numbers are not valid CUDA stream handles.
 */
final class AllocatorSimTarget implements SimTarget {

    /** Device used when a script has no {@code device} line: an 80 GiB GPU with nothing else on it. */
    static final long DEFAULT_CAPACITY = 80L << 30;

    private final Device device;
    private final SimulatedDevice simulated;
    private final CachingAllocator allocator;
    private final Map<Long, Long> realStreams = new HashMap<>();

    private AllocatorSimTarget(Device device, CachingAllocator allocator) {
        this.device = device;
        this.simulated = device instanceof SimulatedDevice s ? s : null;
        this.allocator = allocator;
    }

    /** The allocator on an already opened device (a real GPU); the caller owns and closes the device. */
    static SimTarget onDevice(Device device, AllocatorConfig config) {
        return new AllocatorSimTarget(device, new CachingAllocator(device, config));
    }

    /** The allocator on a simulated device built from the script's {@code device} line (null: the default). */
    static SimTarget onSimulatedDevice(ScriptOp.DeviceSettings spec, AllocatorConfig config) {
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
            return allocator.malloc(size, stream(stream));
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
        allocator.recordStream(ptr, stream(stream));
    }

    private long stream(long scriptStream) {
        if (simulated != null || scriptStream == ScriptOp.DEFAULT_STREAM) {
            return scriptStream;
        }
        return realStreams.computeIfAbsent(scriptStream, n -> device.createStream());
    }

    @Override
    public void apply(ScriptOp op) {
        switch (op) {
            case ScriptOp.Config c -> allocator.setSettings(c.conf());
            case ScriptOp.EmptyCache _ -> allocator.emptyCache();
            case ScriptOp.SetFraction f -> allocator.setMemoryFraction(f.fraction());
            case ScriptOp.ResetPeak _ -> allocator.resetPeakStats();
            case ScriptOp.CompleteEvents _ -> {
                if (simulated != null) {
                    simulated.completeAllEvents();
                } else {
                    device.synchronizeDevice();
                }
            }
            default -> throw new IllegalArgumentException("line " + op.line() + ": not an allocator setting: " + op);
        }
    }

    @Override
    public MemoryStats memoryStats() {
        return allocator.stats();
    }

    @Override
    public void recordHistory() {
        allocator.recordHistory(HistoryOptions.all());
    }

    @Override
    public MemorySnapshot snapshot() {
        return allocator.snapshot();
    }

    @Override
    public int deviceIndex() {
        return device.index();
    }
}
