package io.gpumem.policy;

import io.gpumem.device.Device;
import java.util.Map;

/**
 * The user-facing contract shared by every allocation policy gpumem can run (the PyTorch-exact caching allocator,
 * {@link StitchAllocator}, {@link PlannedAllocator}): stream-ordered malloc/free on one {@link Device},
 * {@code record_stream}, {@code empty_cache}, statistics under PyTorch's {@code memory_stats()} key names, and
 * {@link io.gpumem.oom.OutOfMemoryException} with an {@link io.gpumem.oom.OomReport} when a request cannot be met.
 *
 * <p>Statistics every policy reports: {@code allocated_bytes.all.current/peak}, {@code reserved_bytes.all.current/peak},
 * {@code num_alloc_retries}, {@code num_ooms}, {@code num_device_alloc}, {@code num_device_free} and
 * {@code num_device_maps} (map plus unmap calls; 0 for policies without virtual memory).
 */
public interface AllocatorPolicy {

    /** The policy's name as {@code compare --policy} spells it. */
    String name();

    Device device();

    /** Allocates {@code size} bytes for use on {@code stream}. @throws io.gpumem.oom.OutOfMemoryException */
    long malloc(long size, long stream);

    /** Frees a block; its memory is reused once every stream recorded on it has passed this point. */
    void free(long ptr);

    /** Marks the block as used on {@code stream} too ({@code tensor.record_stream}). */
    void recordStream(long ptr, long stream);

    /** Returns cached memory that no live block uses to the device. */
    void emptyCache();

    /** {@code memory_stats()}-style counters (see the class comment for the keys every policy has). */
    Map<String, Long> memoryStats();

    long allocatedBytes();

    long reservedBytes();

    /** Checks the policy's internal invariants; throws {@link IllegalStateException} naming the first broken one. */
    void checkInvariants();
}
