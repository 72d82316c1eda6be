package io.gpumem.cli.policy;

import io.gpumem.alloc.GpuAllocator;
import io.gpumem.alloc.GpuAllocatorInternals;
import io.gpumem.device.Device;
import io.gpumem.history.Frame;
import io.gpumem.history.HistoryOptions;
import io.gpumem.history.MemorySnapshot;
import io.gpumem.oom.OomReport;
import io.gpumem.oom.OutOfMemoryException;
import io.gpumem.stats.MemoryStats;
import io.gpumem.stats.StatKind;
import io.gpumem.stats.StatType;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.LongSupplier;
import java.util.function.Supplier;

/**
 * A toy allocation policy for the acceptance test of issue 18 ("adding a policy is one class plus one registry
 * line"): first fit, by address, in one segment as large as the device's free memory, reserved at the first
 * request and never given back. Requests are rounded up to 512 bytes; freed ranges merge with free neighbours.
 * Streams are ignored. Invariant: the free ranges and the live blocks tile the segment.
 */
public final class FirstFitAllocator implements GpuAllocator, GpuAllocatorInternals {

    public static final String NAME = "first-fit";
    private static final long ROUND = 512;
    private static final long GRANULE = 2L << 20;

    private final Device device;
    private final TreeMap<Long, Long> free = new TreeMap<>();
    private final Map<Long, Long> live = new HashMap<>();
    private long segment;
    private long segmentSize;
    private long allocated;
    private long peakAllocated;
    private long allocations;
    private long frees;
    private long ooms;

    public FirstFitAllocator(Device device) {
        this.device = device;
    }

    @Override
    public synchronized long malloc(long sizeBytes, long streamId) {
        if (sizeBytes < 0) {
            throw new IllegalArgumentException("negative size " + sizeBytes);
        }
        if (sizeBytes == 0) {
            return Device.NULL;
        }
        long size = Math.ceilDiv(sizeBytes, ROUND) * ROUND;
        if (segment == 0) {
            long bytes = device.freeMemory() / GRANULE * GRANULE;
            segment = bytes == 0 ? Device.NULL : device.malloc(bytes);
            if (segment == Device.NULL) {
                throw oom(sizeBytes, size);
            }
            segmentSize = bytes;
            free.put(segment, bytes);
        }
        Map.Entry<Long, Long> fit = null;
        for (Map.Entry<Long, Long> f : free.entrySet()) {
            if (f.getValue() >= size) {
                fit = f;
                break;
            }
        }
        if (fit == null) {
            throw oom(sizeBytes, size);
        }
        long at = fit.getKey();
        long length = fit.getValue();
        free.remove(at);
        if (length > size) {
            free.put(at + size, length - size);
        }
        live.put(at, size);
        allocated += size;
        peakAllocated = Math.max(peakAllocated, allocated);
        allocations++;
        return at;
    }

    private OutOfMemoryException oom(long requested, long rounded) {
        ooms++;
        return new OutOfMemoryException(new OomReport(
                requested,
                rounded,
                rounded,
                device.index(),
                device.totalMemory(),
                device.freeMemory(),
                device.totalMemory(),
                allocated,
                segmentSize,
                List.of(),
                false));
    }

    @Override
    public synchronized void free(long address) {
        if (address == Device.NULL) {
            return;
        }
        Long size = live.remove(address);
        if (size == null) {
            throw new IllegalArgumentException("address 0x" + Long.toHexString(address) + " is not allocated");
        }
        allocated -= size;
        frees++;
        long start = address;
        long length = size;
        Map.Entry<Long, Long> before = free.floorEntry(address);
        if (before != null && before.getKey() + before.getValue() == address) {
            start = before.getKey();
            length += before.getValue();
            free.remove(start);
        }
        Long after = free.remove(address + size);
        if (after != null) {
            length += after;
        }
        free.put(start, length);
    }

    @Override
    public void recordStream(long address, long streamId) {
        // one segment, no per-stream pools: nothing to wait for
    }

    @Override
    public void emptyCache() {
        // the one segment is kept for the allocator's life
    }

    @Override
    public synchronized MemoryStats stats() {
        return MemoryStats.builder()
                .stat(StatKind.ALLOCATED_BYTES, StatType.ALL, new MemoryStats.Stat(allocated, peakAllocated, 0, 0))
                .stat(
                        StatKind.RESERVED_BYTES,
                        StatType.ALL,
                        new MemoryStats.Stat(segmentSize, segmentSize, segmentSize, 0))
                .stat(StatKind.ALLOCATION, StatType.ALL, new MemoryStats.Stat(live.size(), 0, allocations, frees))
                .numOoms(ooms)
                .numDeviceAlloc(segment == 0 ? 0 : 1)
                .build();
    }

    @Override
    public MemorySnapshot snapshot() {
        return new MemorySnapshot(List.of(), List.of(List.of()), Map.of());
    }

    @Override
    public Device device() {
        return device;
    }

    @Override
    public GpuAllocatorInternals internals() {
        return this;
    }

    @Override
    public void close() {}

    @Override
    public void recordHistory(HistoryOptions options) {}

    @Override
    public void setContextSupplier(Supplier<List<Frame>> frames) {}

    @Override
    public void setClock(LongSupplier timeMicros) {}

    @Override
    public synchronized void checkInvariants() {
        long tiled = allocated;
        for (long f : free.values()) {
            tiled += f;
        }
        if (tiled != segmentSize) {
            throw new IllegalStateException("free ranges and live blocks cover " + tiled + " of " + segmentSize);
        }
    }
}
