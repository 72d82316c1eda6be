package io.gpumem.trace.analysis;

/**
 * How one run of a request stream went under one configuration.
 *
 * @param label         the configuration string, or a name such as "batch 4"
 * @param peakAllocated {@code allocated_bytes.all.peak}
 * @param peakReserved  {@code reserved_bytes.all.peak}
 * @param deviceAllocs  {@code num_device_alloc}: cudaMalloc and page-map calls
 * @param retries       {@code num_alloc_retries}: mallocs that had to free the cache and retry
 * @param ooms          out-of-memory errors (a run stops at the first one, as a training job would)
 * @param minCapacity   the smallest device capacity that runs the stream without OOM, or −1 when not computed
 */
public record WhatIfOutcome(String label, long peakAllocated, long peakReserved, long deviceAllocs, long retries,
                            long ooms, long minCapacity) {
    /** Peak reserved over peak allocated. */
    public double reservedPerAllocated() {
        return peakAllocated == 0 ? 1.0 : (double) peakReserved / peakAllocated;
    }
}
