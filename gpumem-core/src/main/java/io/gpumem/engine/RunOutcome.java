package io.gpumem.engine;

import io.gpumem.alloc.GpuAllocator;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.oom.OomReport;
import io.gpumem.policy.PolicyRegistry;
import java.util.List;
import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * How one run of a {@link RequestStream} went on one policy (or configuration): a row of {@code gpumem compare},
 * of the demo's table and of the runs behind {@code analyze}'s recommendations. Built by {@link #builder()};
 * {@link #toBuilder()} relabels a row. Two outcomes are equal when the runs decided the same: the measured time
 * ({@link #nsPerPair}) and the allocator and device kept for snapshots are left out.
 */
public final class RunOutcome {

    /** The values, in a copy of the builder that made them that nothing else holds (so they never change). */
    private final Builder v;

    private RunOutcome(Builder b) {
        Objects.requireNonNull(b.label, "label");
        Objects.requireNonNull(b.policy, "policy");
        this.v = b.copy();
    }

    public static Builder builder() {
        return new Builder();
    }

    /** A builder holding this outcome's values. */
    public Builder toBuilder() {
        return v.copy();
    }

    /** The configuration string ("" = defaults), or a name such as "batch 4". */
    public String label() {
        return v.label;
    }

    /** The policy's registered name ({@link PolicyRegistry#EXACT}: the PyTorch-exact allocator under {@link #label}). */
    public String policy() {
        return v.policy;
    }

    /** Whether this is the configuration the trace was recorded under. */
    public boolean recorded() {
        return v.recorded;
    }

    /** Device memory of the run the counters come from. */
    public long capacity() {
        return v.capacity;
    }

    /** {@code allocated_bytes.all.peak} (block sizes, a start state included). */
    public long peakAllocated() {
        return v.peakAllocated;
    }

    /** {@code reserved_bytes.all.peak}. */
    public long peakReserved() {
        return v.peakReserved;
    }

    /** {@code num_device_alloc}: device malloc and page-map calls. */
    public long deviceAllocs() {
        return v.deviceAllocs;
    }

    /** {@code num_device_free}. */
    public long deviceFrees() {
        return v.deviceFrees;
    }

    /** {@code num_alloc_retries}: mallocs that had to free the cache and retry. */
    public long retries() {
        return v.retries;
    }

    /** Requests that failed at {@link #capacity} (a run that stops at the first counts 1). */
    public long ooms() {
        return v.ooms;
    }

    /** The smallest capacity, in {@link MinimumCapacity#STEP} steps, that runs the stream without OOM; −1: not searched. */
    public long minCapacity() {
        return v.minCapacity;
    }

    /** Map plus unmap calls to the device in the run at {@link #capacity}. */
    public long deviceMaps() {
        return v.deviceMaps;
    }

    /** CPU time of the run's requests per malloc/free pair, in nanoseconds (0 when not measured). */
    public double nsPerPair() {
        return v.nsPerPair;
    }

    /** Steps of an iterated stream that finished (0 for a stream without steps). */
    public int stepsCompleted() {
        return v.stepsCompleted;
    }

    /**
     * Passes of a loop body played before the measured one in a steady-state run (the window iterated from its live
     * blocks alone until reserved memory stops changing; figures then count from an empty cache); 0 for a run of
     * the stream as it is.
     */
    public int warmUpPasses() {
        return v.warmUpPasses;
    }

    /** Whether this is a steady-state run ({@link #warmUpPasses()} above 0). */
    public boolean steady() {
        return v.warmUpPasses > 0;
    }

    /** The run's mode as JSON rows write it ({@code mode}): {@code steady} for a steady-state run, else {@code window}. */
    public String mode() {
        return steady() ? "steady" : "window";
    }

    /**
     * The run's mode as tables show it: {@code window}, or {@code steady/N} for a steady-state run of N passes (its
     * {@link #warmUpPasses()} and the measured one).
     */
    public String modeLabel() {
        return steady() ? "steady/" + (warmUpPasses() + 1) : "window";
    }

    /** Whether every request was met. */
    public boolean completed() {
        return v.ooms == 0;
    }

    /** The op that failed first in a run that stopped at it, or −1. */
    public int failedOp() {
        return v.failedOp;
    }

    /** The report of the failure a run stopped at, or null. */
    public @Nullable OomReport oomReport() {
        return v.oomReport;
    }

    /** The allocator in its final state when the run was asked to keep it (snapshots, analysis), else null. */
    public @Nullable GpuAllocator allocator() {
        return v.allocator;
    }

    /** The device of {@link #allocator}, or null. */
    public @Nullable SimulatedDevice device() {
        return v.device;
    }

    /**
     * Peak reserved over peak allocated: 1.0 is no cache or fragmentation overhead, and also what a run that
     * allocated nothing reports (it reserved nothing either).
     */
    public double reservedPerAllocated() {
        return v.peakAllocated == 0 ? 1.0 : (double) v.peakReserved / v.peakAllocated;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof RunOutcome r && decided().equals(r.decided());
    }

    @Override
    public int hashCode() {
        return decided().hashCode();
    }

    /** What the run decided: the values {@link #equals} compares (not the time measured, nor what was kept). */
    private List<Object> decided() {
        return List.of(
                v.label,
                v.policy,
                v.recorded,
                v.capacity,
                v.peakAllocated,
                v.peakReserved,
                v.deviceAllocs,
                v.deviceFrees,
                v.retries,
                v.ooms,
                v.minCapacity,
                v.deviceMaps,
                v.stepsCompleted,
                v.warmUpPasses,
                v.failedOp);
    }

    @Override
    public String toString() {
        return "RunOutcome[" + v.policy + (v.label.isEmpty() ? "" : " " + v.label) + (v.recorded ? " (recorded)" : "")
                + ", capacity " + v.capacity + ", peak allocated " + v.peakAllocated + ", peak reserved "
                + v.peakReserved
                + ", device allocs " + v.deviceAllocs + ", frees " + v.deviceFrees + ", retries " + v.retries
                + ", ooms "
                + v.ooms + ", min capacity " + v.minCapacity + ", maps " + v.deviceMaps + "]";
    }

    /** Builds a {@link RunOutcome}; unset counters are 0, {@code minCapacity} and {@code failedOp} −1. */
    public static final class Builder implements Cloneable {
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

        /** A builder holding the same values (all of them immutable, so a shallow copy shares nothing mutable). */
        private Builder copy() {
            try {
                return (Builder) clone();
            } catch (CloneNotSupportedException e) {
                throw new AssertionError(e);
            }
        }
    }
}
