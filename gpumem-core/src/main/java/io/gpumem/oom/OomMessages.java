package io.gpumem.oom;

import io.gpumem.size.ByteSize;

/**
 * The text of PyTorch's CUDA out-of-memory error in its 2.1+ form (allocator.md §7.2), as of the releases that
 * suggest {@code expandable_segments} and report private-pool memory (2.4+).
 *
 * <p>The message is built from its parts in PyTorch's order: the request, the device capacity and free
 * memory, the allowed maximum when a memory fraction is set, what PyTorch has allocated (including free
 * cached blocks of private pools, mentioned separately when non-zero), what is reserved but unallocated, and
 * the configuration hint with its two double spaces. The per-process lines PyTorch gets from NVML are left
 * out: a simulated device has no NVML.
 */
public final class OomMessages {

    static final String HINT = " If reserved but unallocated memory is large try setting"
            + " PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for"
            + " Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)";

    private OomMessages() {}

    /**
     * Builds the message.
     *
     * @param device               device index
     * @param allocSize            the segment size the allocator tried to obtain (allocator.md §1.5), not the request
     * @param totalCapacity        device total as {@code cudaMemGetInfo} reports it
     * @param deviceFree           device free memory as {@code cudaMemGetInfo} reports it
     * @param allowedMaximum       the per-process limit from the memory fraction, or negative when none is set
     * @param allocatedBytes       {@code allocated_bytes.all.current}
     * @param reservedBytes        {@code reserved_bytes.all.current}
     * @param privatePoolFreeBytes total size of free cached blocks in private pools (0 without CUDA graphs)
     * @throws IllegalArgumentException if a size is negative or reserved is below allocated plus private
     */
    public static String message(
            int device,
            long allocSize,
            long totalCapacity,
            long deviceFree,
            long allowedMaximum,
            long allocatedBytes,
            long reservedBytes,
            long privatePoolFreeBytes) {
        long unallocated = reservedBytes - allocatedBytes - privatePoolFreeBytes;
        if (allocatedBytes < 0 || privatePoolFreeBytes < 0 || unallocated < 0) {
            throw new IllegalArgumentException("inconsistent OOM figures: allocated=" + allocatedBytes + " reserved="
                    + reservedBytes + " private pools=" + privatePoolFreeBytes);
        }
        StringBuilder sb = new StringBuilder(512);
        sb.append("CUDA out of memory. Tried to allocate ")
                .append(ByteSize.format(allocSize))
                .append(". GPU ")
                .append(device)
                .append(" has a total capacity of ")
                .append(ByteSize.format(totalCapacity))
                .append(" of which ")
                .append(ByteSize.format(deviceFree))
                .append(" is free. ");
        if (allowedMaximum >= 0) {
            sb.append(ByteSize.format(allowedMaximum)).append(" allowed; ");
        }
        sb.append("Of the allocated memory ")
                .append(ByteSize.format(allocatedBytes + privatePoolFreeBytes))
                .append(" is allocated by PyTorch, ");
        if (privatePoolFreeBytes > 0) {
            sb.append("with ")
                    .append(ByteSize.format(privatePoolFreeBytes))
                    .append(" allocated in private pools (e.g., CUDA Graphs), ");
        }
        sb.append("and ")
                .append(ByteSize.format(unallocated))
                .append(" is reserved by PyTorch but unallocated.")
                .append(HINT);
        return sb.toString();
    }
}
