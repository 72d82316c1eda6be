package io.gpumem.engine;

import io.gpumem.alloc.GpuAllocator;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.oom.OomReport;
import io.gpumem.policy.PolicyRegistry;
import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * How one run of a {@link RequestStream} went on one policy (or configuration): a row of {@code gpumem compare},
 * of the demo's table and of the runs behind {@code analyze}'s recommendations. Built by {@link #builder()};
 * {@link #toBuilder()} relabels a row. Two outcomes are equal when the runs decided the same: the measured time
 * ({@link #nsPerPair}) and the allocator and device kept for snapshots are left out.
 */
public final class RunOutcome {

    private final String label;
    private final String policy;
    private final boolean recorded;
    private final long capacity;
    private final long peakAllocated;
    private final long peakReserved;
    private final long deviceAllocs;
    private final long deviceFrees;
    private final long retries;
    private final long ooms;
    private final long minCapacity;
    private final long deviceMaps;
    private final double nsPerPair;
    private final int stepsCompleted;
    private final int warmUpPasses;
    private final int failedOp;
    private final @Nullable OomReport oomReport;
    private final @Nullable GpuAllocator allocator;
    private final @Nullable SimulatedDevice device;

    private RunOutcome(Builder b) {
        this.label = Objects.requireNonNull(b.label, "label");
        this.policy = Objects.requireNonNull(b.policy, "policy");
        this.recorded = b.recorded;
        this.capacity = b.capacity;
        this.peakAllocated = b.peakAllocated;
        this.peakReserved = b.peakReserved;
        this.deviceAllocs = b.deviceAllocs;
        this.deviceFrees = b.deviceFrees;
        this.retries = b.retries;
        this.ooms = b.ooms;
        this.minCapacity = b.minCapacity;
        this.deviceMaps = b.deviceMaps;
        this.nsPerPair = b.nsPerPair;
        this.stepsCompleted = b.stepsCompleted;
        this.warmUpPasses = b.warmUpPasses;
        this.failedOp = b.failedOp;
        this.oomReport = b.oomReport;
        this.allocator = b.allocator;
        this.device = b.device;
    }

    public static Builder builder() {
        return new Builder();
    }

    /** A builder holding this outcome's values. */
    public Builder toBuilder() {
        Builder b = new Builder();
        b.label = label;
        b.policy = policy;
        b.recorded = recorded;
        b.capacity = capacity;
        b.peakAllocated = peakAllocated;
        b.peakReserved = peakReserved;
        b.deviceAllocs = deviceAllocs;
        b.deviceFrees = deviceFrees;
        b.retries = retries;
        b.ooms = ooms;
        b.minCapacity = minCapacity;
        b.deviceMaps = deviceMaps;
        b.nsPerPair = nsPerPair;
        b.stepsCompleted = stepsCompleted;
        b.warmUpPasses = warmUpPasses;
        b.failedOp = failedOp;
        b.oomReport = oomReport;
        b.allocator = allocator;
        b.device = device;
        return b;
    }

    /** The configuration string ("" = defaults), or a name such as "batch 4". */
    public String label() {
        return label;
    }

    /** The policy's registered name ({@link PolicyRegistry#EXACT}: the PyTorch-exact allocator under {@link #label}). */
    public String policy() {
        return policy;
    }

    /** Whether this is the configuration the trace was recorded under. */
    public boolean recorded() {
        return recorded;
    }

    /** Device memory of the run the counters come from. */
    public long capacity() {
        return capacity;
    }

    /** {@code allocated_bytes.all.peak} (block sizes, a start state included). */
    public long peakAllocated() {
        return peakAllocated;
    }

    /** {@code reserved_bytes.all.peak}. */
    public long peakReserved() {
        return peakReserved;
    }

    /** {@code num_device_alloc}: device malloc and page-map calls. */
    public long deviceAllocs() {
        return deviceAllocs;
    }

    /** {@code num_device_free}. */
    public long deviceFrees() {
        return deviceFrees;
    }

    /** {@code num_alloc_retries}: mallocs that had to free the cache and retry. */
    public long retries() {
        return retries;
    }

    /** Requests that failed at {@link #capacity} (a run that stops at the first counts 1). */
    public long ooms() {
        return ooms;
    }

    /** The smallest capacity, in {@link MinimumCapacity#STEP} steps, that runs the stream without OOM; −1: not searched. */
    public long minCapacity() {
        return minCapacity;
    }

    /** Map plus unmap calls to the device in the run at {@link #capacity}. */
    public long deviceMaps() {
        return deviceMaps;
    }

    /** CPU time of the run's requests per malloc/free pair, in nanoseconds (0 when not measured). */
    public double nsPerPair() {
        return nsPerPair;
    }

    /** Steps of an iterated stream that finished (0 for a stream without steps). */
    public int stepsCompleted() {
        return stepsCompleted;
    }

    /**
     * Passes of a loop body played before the measured one in a steady-state run (the window iterated from its live
     * blocks alone until reserved memory stops changing; figures then count from an empty cache); 0 for a run of
     * the stream as it is.
     */
    public int warmUpPasses() {
        return warmUpPasses;
    }

    /** Whether this is a steady-state run ({@link #warmUpPasses()} above 0). */
    public boolean steady() {
        return warmUpPasses > 0;
    }

    /** Whether every request was met. */
    public boolean completed() {
        return ooms == 0;
    }

    /** The op that failed first in a run that stopped at it, or −1. */
    public int failedOp() {
        return failedOp;
    }

    /** The report of the failure a run stopped at, or null. */
    public @Nullable OomReport oomReport() {
        return oomReport;
    }

    /** The allocator in its final state when the run was asked to keep it (snapshots, analysis), else null. */
    public @Nullable GpuAllocator allocator() {
        return allocator;
    }

    /** The device of {@link #allocator}, or null. */
    public @Nullable SimulatedDevice device() {
        return device;
    }

    /**
     * Peak reserved over peak allocated: 1.0 is no cache or fragmentation overhead, and also what a run that
     * allocated nothing reports (it reserved nothing either).
     */
    public double reservedPerAllocated() {
        return peakAllocated == 0 ? 1.0 : (double) peakReserved / peakAllocated;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof RunOutcome r
                && label.equals(r.label)
                && policy.equals(r.policy)
                && recorded == r.recorded
                && capacity == r.capacity
                && peakAllocated == r.peakAllocated
                && peakReserved == r.peakReserved
                && deviceAllocs == r.deviceAllocs
                && deviceFrees == r.deviceFrees
                && retries == r.retries
                && ooms == r.ooms
                && minCapacity == r.minCapacity
                && deviceMaps == r.deviceMaps
                && stepsCompleted == r.stepsCompleted
                && warmUpPasses == r.warmUpPasses
                && failedOp == r.failedOp;
    }

    @Override
    public int hashCode() {
        return Objects.hash(
                label,
                policy,
                recorded,
                capacity,
                peakAllocated,
                peakReserved,
                deviceAllocs,
                deviceFrees,
                retries,
                ooms,
                minCapacity,
                deviceMaps,
                stepsCompleted,
                warmUpPasses,
                failedOp);
    }

    @Override
    public String toString() {
        return "RunOutcome[" + policy + (label.isEmpty() ? "" : " " + label) + (recorded ? " (recorded)" : "")
                + ", capacity " + capacity + ", peak allocated " + peakAllocated + ", peak reserved " + peakReserved
                + ", device allocs " + deviceAllocs + ", frees " + deviceFrees + ", retries " + retries + ", ooms "
                + ooms + ", min capacity " + minCapacity + ", maps " + deviceMaps + "]";
    }

    /** Builds a {@link RunOutcome}; unset counters are 0, {@code minCapacity} and {@code failedOp} −1. */
    public static final class Builder {
        private String label = "";
        private String policy = PolicyRegistry.EXACT;
        private boolean recorded;
        private long capacity;
        private long peakAllocated;
        private long peakReserved;
        private long deviceAllocs;
        private long deviceFrees;
        private long retries;
        private long ooms;
        private long minCapacity = -1;
        private long deviceMaps;
        private double nsPerPair;
        private int stepsCompleted;
        private int warmUpPasses;
        private int failedOp = -1;
        private @Nullable OomReport oomReport;
        private @Nullable GpuAllocator allocator;
        private @Nullable SimulatedDevice device;

        private Builder() {}

        public Builder label(String v) {
            label = v;
            return this;
        }

        public Builder policy(String v) {
            policy = v;
            return this;
        }

        public Builder recorded(boolean v) {
            recorded = v;
            return this;
        }

        public Builder capacity(long v) {
            capacity = v;
            return this;
        }

        public Builder peakAllocated(long v) {
            peakAllocated = v;
            return this;
        }

        public Builder peakReserved(long v) {
            peakReserved = v;
            return this;
        }

        public Builder deviceAllocs(long v) {
            deviceAllocs = v;
            return this;
        }

        public Builder deviceFrees(long v) {
            deviceFrees = v;
            return this;
        }

        public Builder retries(long v) {
            retries = v;
            return this;
        }

        public Builder ooms(long v) {
            ooms = v;
            return this;
        }

        public Builder minCapacity(long v) {
            minCapacity = v;
            return this;
        }

        public Builder deviceMaps(long v) {
            deviceMaps = v;
            return this;
        }

        public Builder nsPerPair(double v) {
            nsPerPair = v;
            return this;
        }

        public Builder stepsCompleted(int v) {
            stepsCompleted = v;
            return this;
        }

        public Builder warmUpPasses(int v) {
            warmUpPasses = v;
            return this;
        }

        public Builder failedOp(int v) {
            failedOp = v;
            return this;
        }

        public Builder oomReport(@Nullable OomReport v) {
            oomReport = v;
            return this;
        }

        /** Keeps the allocator and its device in their final state (for snapshots and analysis). */
        public Builder kept(GpuAllocator a, SimulatedDevice d) {
            allocator = a;
            device = d;
            return this;
        }

        public RunOutcome build() {
            return new RunOutcome(this);
        }
    }
}
