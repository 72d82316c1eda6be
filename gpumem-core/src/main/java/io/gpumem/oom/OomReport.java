package io.gpumem.oom;

import io.gpumem.alloc.Pool;
import java.util.List;

/**
 * Everything the caching allocator knew when a request failed: the figures of PyTorch's OOM message
 * (allocator.md §7.2) plus the largest free block per pool and stream, for diagnosing fragmentation.
 *
 * @param requestedBytes         the caller's request
 * @param roundedSize            the request after {@code round_size} (what the {@code oom} trace entry records);
 *                               0 for requests refused before rounding (≥ 1 EB)
 * @param allocSize              the segment size that was tried ({@code get_allocation_size}), which the message
 *                               reports as "Tried to allocate"
 * @param deviceIndex            device ordinal
 * @param totalCapacity          device total memory
 * @param deviceFree             free memory as the device reported it after the allocator released its cache
 * @param allowedMaximum         the per-process limit ({@code fraction × total}), or −1 when no fraction is set
 * @param allocatedBytes         {@code allocated_bytes.all.current}
 * @param reservedBytes          {@code reserved_bytes.all.current}
 * @param largestFreeBlocks      largest cached free block per (pool, stream) that has any
 * @param moreThanOneExabyte     the request was refused outright for being ≥ 2^60 bytes
 */
public record OomReport(
        long requestedBytes,
        long roundedSize,
        long allocSize,
        int deviceIndex,
        long totalCapacity,
        long deviceFree,
        long allowedMaximum,
        long allocatedBytes,
        long reservedBytes,
        List<LargestFree> largestFreeBlocks,
        boolean moreThanOneExabyte) {

    /** Largest free block of one pool on one stream. */
    public record LargestFree(Pool pool, long stream, long size) {}

    public OomReport {
        largestFreeBlocks = List.copyOf(largestFreeBlocks);
    }

    /** Bytes the allocator holds but has not handed out (cached blocks plus blocks awaiting events). */
    public long reservedButUnallocated() {
        return reservedBytes - allocatedBytes;
    }

    /** Device memory in use by others (context, other processes, memory outside the allocator). */
    public long heldOutside() {
        return totalCapacity - deviceFree - reservedBytes;
    }

    /** Whether a memory fraction limited this process. */
    public boolean fractionSet() {
        return allowedMaximum >= 0;
    }

    /**
     * The message PyTorch 2.3+ raises (allocator.md §7.2), built by {@link OomMessages}: without the NVML per-process
     * part (there is no NVML here) and with no private pools.
     */
    public String message() {
        if (moreThanOneExabyte) {
            return "CUDA out of memory. Tried to allocate more than 1EB memory.";
        }
        return OomMessages.message(
                deviceIndex, allocSize, totalCapacity, deviceFree, allowedMaximum, allocatedBytes, reservedBytes, 0);
    }
}
