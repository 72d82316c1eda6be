package io.gpumem.trace.replay;

/**
 * One row of {@code gpumem compare}: the request stream of a window replayed under one configuration.
 *
 * @param config         the {@code PYTORCH_CUDA_ALLOC_CONF} string ("" = defaults)
 * @param recorded       whether this is the configuration the trace was recorded under
 * @param capacity       device memory of the run the counters come from (the recorded capacity)
 * @param peakAllocated  peak {@code allocated_bytes} (block sizes, start state included)
 * @param peakReserved   peak {@code reserved_bytes}
 * @param deviceAllocs   {@code num_device_alloc}: cudaMalloc / map calls
 * @param deviceFrees    {@code num_device_free}
 * @param retries        {@code num_alloc_retries}: mallocs that had to release the cache and retry
 * @param ooms           requests that failed at {@code capacity}
 * @param minCapacity    smallest device memory, in 2 MiB steps, at which the window runs without an OOM
 * @param policy         the allocation policy ({@code pytorch} for the PyTorch-exact allocator under {@code config})
 * @param deviceMaps     map plus unmap calls to the device in the run at {@code capacity}
 * @param nsPerPair      CPU time of that run's requests per malloc/free pair, in nanoseconds
 */
public record WhatIfResult(String config, boolean recorded, long capacity, long peakAllocated, long peakReserved,
                           long deviceAllocs, long deviceFrees, long retries, long ooms, long minCapacity,
                           String policy, long deviceMaps, double nsPerPair) {

    /** A row of the PyTorch-exact allocator without the policy columns measured. */
    public WhatIfResult(String config, boolean recorded, long capacity, long peakAllocated, long peakReserved,
                        long deviceAllocs, long deviceFrees, long retries, long ooms, long minCapacity) {
        this(config, recorded, capacity, peakAllocated, peakReserved, deviceAllocs, deviceFrees, retries, ooms,
                minCapacity, "pytorch", 0, 0);
    }

    /** Reserved over allocated at their peaks (1.0 = no cache or fragmentation overhead). */
    public double reservedPerAllocated() {
        return peakAllocated == 0 ? 0 : (double) peakReserved / peakAllocated;
    }

    /** Rows are equal when the replays decided the same; {@link #nsPerPair} is a timing and is left out. */
    @Override
    public boolean equals(Object o) {
        return o instanceof WhatIfResult r && java.util.Objects.equals(config, r.config) && recorded == r.recorded
                && capacity == r.capacity && peakAllocated == r.peakAllocated && peakReserved == r.peakReserved
                && deviceAllocs == r.deviceAllocs && deviceFrees == r.deviceFrees && retries == r.retries
                && ooms == r.ooms && minCapacity == r.minCapacity && java.util.Objects.equals(policy, r.policy)
                && deviceMaps == r.deviceMaps;
    }

    @Override
    public int hashCode() {
        return java.util.Objects.hash(config, recorded, capacity, peakAllocated, peakReserved, deviceAllocs,
                deviceFrees, retries, ooms, minCapacity, policy, deviceMaps);
    }
}
