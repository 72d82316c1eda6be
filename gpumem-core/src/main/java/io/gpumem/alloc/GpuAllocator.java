package io.gpumem.alloc;

import io.gpumem.device.Device;
import io.gpumem.history.MemorySnapshot;
import io.gpumem.stats.MemoryStats;

/**
 * The one interface every GPU memory allocator implements, exact or not: PyTorch's caching allocator
 * ({@link CachingAllocator}) or an alternative placement policy (named in {@code io.gpumem.policy.PolicyRegistry}).
 * Addresses, sizes and streams are plain {@code long}s as in {@link Device}, so the per-call path stays free of
 * allocations.
 *
 * <h2>Contract</h2>
 * <ul>
 *   <li>{@link #malloc(long, long)} returns a device address of at least {@code sizeBytes} usable bytes, 0 for
 *       a zero-byte request, or throws {@link io.gpumem.oom.OutOfMemoryException}; a negative size throws
 *       {@link IllegalArgumentException}.</li>
 *   <li>{@link #free(long)} takes an address from {@link #malloc} exactly once; {@code free(0)} does nothing; a
 *       foreign or already freed address throws {@link IllegalArgumentException} and changes nothing.</li>
 *   <li>{@link #recordStream(long, long)} marks the block as used by another stream: after {@link #free} it is
 *       not reused before the work queued on that stream has completed.</li>
 *   <li>{@link #close()} returns cached device memory; the allocator must not be used afterwards. It does not
 *       close the {@link Device}, which belongs to whoever created it.</li>
 *   <li>Implementations are safe for concurrent use: every operation takes the allocator's lock (an
 *       {@link AllocatorLock}), so calls from several threads behave as some order of the same calls from one.</li>
 * </ul>
 */
public interface GpuAllocator extends AutoCloseable {

    /**
     * Allocates {@code sizeBytes} bytes for use on stream {@code streamId}.
     *
     * @return the address; {@link Device#NULL} for a zero-byte request
     */
    long malloc(long sizeBytes, long streamId);

    /** Allocates on the default stream ({@link Device#DEFAULT_STREAM}). */
    default long malloc(long sizeBytes) {
        return malloc(sizeBytes, Device.DEFAULT_STREAM);
    }

    /** Frees an address returned by {@link #malloc}. */
    void free(long address);

    /** Marks the block at {@code address} as used by stream {@code streamId} ({@code Tensor.record_stream}). */
    void recordStream(long address, long streamId);

    /**
     * {@code torch.cuda.empty_cache()}: returns cached, unused memory to the device as the allocator's own rule says
     * (the exact allocator every byte it can; a pool that never shrinks, as RMM's, none), once the blocks freed while
     * other streams used them are seen done.
     */
    void emptyCache();

    /**
     * The statistics now, as an immutable value ({@code torch.cuda.memory_stats()}); a policy's own counters are in
     * {@link MemoryStats#extras()}.
     */
    MemoryStats stats();

    /** The segments and blocks now, plus the recorded history ({@code torch.cuda.memory._snapshot()}). */
    MemorySnapshot snapshot();

    /** The device this allocator draws memory from. */
    Device device();

    /** History recording, invariant checks and the step-boundary hook: what runners and tests use, not users. */
    GpuAllocatorInternals internals();

    /** Returns cached memory to the device and retires the allocator. Idempotent. */
    @Override
    void close();
}
