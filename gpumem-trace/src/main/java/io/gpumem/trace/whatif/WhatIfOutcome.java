package io.gpumem.trace.whatif;

import io.gpumem.policy.PolicyRegistry;

/**
 * How one run of a request stream went under one configuration: a row of {@code gpumem compare}, of the demo's
 * comparison and of the runs behind {@code analyze}'s recommendations. Trace replays
 * ({@code io.gpumem.trace.replay.WhatIfReplay}) and generated workloads ({@code io.gpumem.trace.workload}) both
 * report in this one type.
 *
 * @param label         the configuration string ("" = defaults), or a name such as "batch 4"
 * @param recorded      whether this is the configuration the trace was recorded under
 * @param capacity      device memory of the run the counters come from
 * @param peakAllocated {@code allocated_bytes.all.peak} (block sizes, a trace window's start state included)
 * @param peakReserved  {@code reserved_bytes.all.peak}
 * @param deviceAllocs  {@code num_device_alloc}: cudaMalloc and page-map calls
 * @param deviceFrees   {@code num_device_free}
 * @param retries       {@code num_alloc_retries}: mallocs that had to free the cache and retry
 * @param ooms          requests that failed at {@code capacity} (a generated workload stops at the first, as a
 *                      training job would)
 * @param minCapacity   the smallest device capacity, in {@link MinimumCapacity#STEP} steps, that runs the stream
 *                      without an OOM, or −1 when not computed
 * @param policy        the allocation policy ({@code pytorch}: the PyTorch-exact allocator under {@code label})
 * @param deviceMaps    map plus unmap calls to the device in the run at {@code capacity}
 * @param nsPerPair     CPU time of that run's requests per malloc/free pair, in nanoseconds (0 when not measured)
 */
public record WhatIfOutcome(String label, boolean recorded, long capacity, long peakAllocated, long peakReserved,
                            long deviceAllocs, long deviceFrees, long retries, long ooms, long minCapacity,
                            String policy, long deviceMaps, double nsPerPair) {

    /** A row of the PyTorch-exact allocator without the policy measurements. */
    public WhatIfOutcome(String label, boolean recorded, long capacity, long peakAllocated, long peakReserved,
                         long deviceAllocs, long deviceFrees, long retries, long ooms, long minCapacity) {
        this(label, recorded, capacity, peakAllocated, peakReserved, deviceAllocs, deviceFrees, retries, ooms,
                minCapacity, PolicyRegistry.EXACT, 0, 0);
    }

    /** Rows are equal when the runs decided the same; {@link #nsPerPair} is a timing and is left out. */
    @Override
    public boolean equals(Object o) {
        return o instanceof WhatIfOutcome r && java.util.Objects.equals(label, r.label) && recorded == r.recorded
                && capacity == r.capacity && peakAllocated == r.peakAllocated && peakReserved == r.peakReserved
                && deviceAllocs == r.deviceAllocs && deviceFrees == r.deviceFrees && retries == r.retries
                && ooms == r.ooms && minCapacity == r.minCapacity && java.util.Objects.equals(policy, r.policy)
                && deviceMaps == r.deviceMaps;
    }

    @Override
    public int hashCode() {
        return java.util.Objects.hash(label, recorded, capacity, peakAllocated, peakReserved, deviceAllocs,
                deviceFrees, retries, ooms, minCapacity, policy, deviceMaps);
    }

    /**
     * Peak reserved over peak allocated: 1.0 is no cache or fragmentation overhead, and also what a run that
     * allocated nothing reports (it reserved nothing either).
     */
    public double reservedPerAllocated() {
        return peakAllocated == 0 ? 1.0 : (double) peakReserved / peakAllocated;
    }
}
