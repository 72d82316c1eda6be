package io.gpumem.policy;

import io.gpumem.alloc.GpuAllocator;
import java.util.Map;

/**
 * core's {@link GpuAllocator} contract plus what comparing policies needs, shared by every allocation policy gpumem can run (the PyTorch-exact caching allocator,
 * {@link StitchAllocator}, {@link PlannedAllocator}): stream-ordered malloc/free on one {@link Device},
 * {@code record_stream}, {@code empty_cache}, statistics under PyTorch's {@code memory_stats()} key names, and
 * {@link io.gpumem.oom.OutOfMemoryException} with an {@link io.gpumem.oom.OomReport} when a request cannot be met.
 *
 * <p>Statistics every policy reports: {@code allocated_bytes.all.current/peak}, {@code reserved_bytes.all.current/peak},
 * {@code num_alloc_retries}, {@code num_ooms}, {@code num_device_alloc}, {@code num_device_free} and
 * {@code num_device_maps} (map plus unmap calls; 0 for policies without virtual memory).
 */
public interface AllocatorPolicy extends GpuAllocator {

    /** The policy's name as {@code compare --policy} spells it. */
    String name();

    /** {@code memory_stats()}-style counters (see the class comment for the keys every policy has). */
    Map<String, Long> memoryStats();

    long allocatedBytes();

    long reservedBytes();

    /**
     * Starts, changes or stops recording memory history ({@code torch.cuda.memory._record_memory_history}): trace
     * entries and the stacks of live blocks then appear in {@link #snapshot()}.
     */
    void recordHistory(io.gpumem.history.HistoryOptions options);

    /** Where stacks come from when history captures context (the CLI names requests by it); null: none. */
    void setContextSupplier(java.util.function.Supplier<java.util.List<io.gpumem.history.Frame>> frames);

    /** The clock history entries are stamped with, in microseconds (a replay uses the recorded times). */
    void setHistoryClock(java.util.function.LongSupplier micros);

    /** Checks the policy's internal invariants; throws {@link IllegalStateException} naming the first broken one. */
    void checkInvariants();
}
