package io.gpumem.oom;

import java.math.BigDecimal;
import java.math.RoundingMode;
import java.util.List;

/**
 * Everything the caching allocator knew when a request failed: the figures of PyTorch's OOM message
 * (spec §7.2) plus the largest free block per pool and stream, for diagnosing fragmentation.
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
public record OomReport(long requestedBytes, long roundedSize, long allocSize, int deviceIndex, long totalCapacity,
                        long deviceFree, long allowedMaximum, long allocatedBytes, long reservedBytes,
                        List<LargestFree> largestFreeBlocks, boolean moreThanOneExabyte) {

    /** Largest free block of one pool on one stream. */
    public record LargestFree(String pool, long stream, long size) {
    }

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
     * The message PyTorch 2.3+ raises (spec §7.2), without the NVML per-process part (there is no NVML here) and
     * with no private pools.
     */
    public String message() {
        if (moreThanOneExabyte) {
            return "CUDA out of memory. Tried to allocate more than 1EB memory.";
        }
        StringBuilder sb = new StringBuilder(400);
        sb.append("CUDA out of memory. Tried to allocate ").append(formatSize(allocSize))
                .append(". GPU ").append(deviceIndex)
                .append(" has a total capacity of ").append(formatSize(totalCapacity))
                .append(" of which ").append(formatSize(deviceFree)).append(" is free. ");
        if (fractionSet()) {
            sb.append(formatSize(allowedMaximum)).append(" allowed; ");
        }
        sb.append("Of the allocated memory ").append(formatSize(allocatedBytes)).append(" is allocated by PyTorch, ")
                .append("and ").append(formatSize(reservedBytes - allocatedBytes))
                .append(" is reserved by PyTorch but unallocated.")
                .append(" If reserved but unallocated memory is large try setting")
                .append(" PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid")
                .append(" fragmentation.  See documentation for Memory Management ")
                .append(" (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)");
        return sb.toString();
    }

    /**
     * PyTorch's {@code format_size} (spec §7.1): bytes up to 1024, then KiB/MiB/GiB with two decimals, the
     * thresholds inclusive. Rounds the exact binary value half-to-even like C++'s {@code std::fixed}.
     */
    static String formatSize(long size) {
        if (Long.compareUnsigned(size, 1024) <= 0) {
            return size + " bytes";
        }
        double value;
        String unit;
        if (size <= 1048576L) {
            value = size / 1024.0;
            unit = " KiB";
        } else if (size <= 1073741824L) {
            value = size / 1048576.0;
            unit = " MiB";
        } else {
            value = size / 1073741824.0;
            unit = " GiB";
        }
        return new BigDecimal(value).setScale(2, RoundingMode.HALF_EVEN).toPlainString() + unit;
    }
}
