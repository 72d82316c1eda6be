package io.gpumem.policy;

import io.gpumem.alloc.TraceRecorder;
import io.gpumem.device.Device;
import io.gpumem.history.Frame;
import io.gpumem.history.TraceAction;
import io.gpumem.oom.OomReport;
import io.gpumem.oom.OutOfMemoryException;
import io.gpumem.stats.MemoryStats;
import io.gpumem.stats.StatKind;
import io.gpumem.stats.StatType;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * The figures every policy counts as PyTorch counts them over all pools: allocated bytes (now, peak, in total, freed
 * in total), allocations (live now, peak, made, freed), retries and out-of-memory errors. A policy adds its reserved
 * bytes, device calls and own extras in {@link #builder}. Its allocator's lock guards it; the counting methods
 * allocate nothing.
 *
 * <p>Invariants: {@code allocated} is the sum of the live blocks' sizes and {@code live} their number (each policy's
 * invariant check holds its blocks to them); peaks never fall; totals only grow.
 */
final class PolicyCounters {
    long allocated;
    private long peakAllocated;
    private long bytesAllocated;
    private long bytesFreed;
    long live;
    private long peakLive;
    private long allocations;
    private long frees;
    long retries;
    long ooms;

    /** A block of {@code size} bytes handed out. */
    void allocated(long size) {
        allocated += size;
        peakAllocated = Math.max(peakAllocated, allocated);
        bytesAllocated += size;
        live++;
        peakLive = Math.max(peakLive, live);
        allocations++;
    }

    /** A block of {@code size} bytes freed by its user (whether or not it waits on streams before reuse). */
    void freed(long size) {
        allocated -= size;
        bytesFreed += size;
        live--;
        frees++;
    }

    /**
     * The stats with these counters, the policy's reserved bytes and its device allocation and free calls; the caller
     * adds its extras.
     */
    MemoryStats.Builder builder(MemoryStats.Stat reserved, long deviceAllocs, long deviceFrees) {
        return MemoryStats.builder()
                .stat(
                        StatKind.ALLOCATED_BYTES,
                        StatType.ALL,
                        new MemoryStats.Stat(allocated, peakAllocated, bytesAllocated, bytesFreed))
                .stat(StatKind.ALLOCATION, StatType.ALL, new MemoryStats.Stat(live, peakLive, allocations, frees))
                .stat(StatKind.RESERVED_BYTES, StatType.ALL, reserved)
                .numAllocRetries(retries)
                .numOoms(ooms)
                .numDeviceAlloc(deviceAllocs)
                .numDeviceFree(deviceFrees);
    }

    /**
     * A request of {@code requested} bytes ({@code rounded} after the policy's rounding) that found no memory: counted,
     * recorded in {@code history} as an {@code oom} entry with the device's free bytes, and reported with the policy's
     * reserved bytes and largest free blocks.
     */
    OutOfMemoryException outOfMemory(
            Device device,
            TraceRecorder history,
            long requested,
            long rounded,
            long stream,
            @Nullable List<Frame> context,
            long reserved,
            List<OomReport.LargestFree> largest) {
        ooms++;
        history.record(TraceAction.OOM, 0, rounded, stream, context, device.freeMemory());
        return new OutOfMemoryException(new OomReport(
                requested,
                rounded,
                rounded,
                device.index(),
                device.totalMemory(),
                device.freeMemory(),
                -1,
                allocated,
                reserved,
                largest,
                false));
    }
}
