package io.gpumem.trace.analysis;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Optional;

/**
 * The allocator state of one device at one moment: the input of {@link StateAnalyzer}.
 *
 * <p>This is deliberately a small model of its own (segments of blocks plus what the driver knew), so
 * that the analysis works the same on a PyTorch snapshot, a rebuilt trace window, or a live
 * {@code CachingAllocator}; adapters build it from each source.
 *
 * <p>Invariants: segments are sorted by address and do not overlap; {@code capacity} and
 * {@code deviceFree} are −1 when unknown, otherwise non-negative.
 */
public final class MemoryState {
    /** Marker for an unknown byte figure. */
    public static final long UNKNOWN = -1;

    private final String label;
    private final int device;
    private final List<StateSegment> segments;
    private final long capacity;
    private final long deviceFree;
    private final OomEvent oom;
    private final String allocatorConf;

    private MemoryState(Builder b) {
        List<StateSegment> sorted = new ArrayList<>(b.segments);
        sorted.sort(Comparator.comparingLong(StateSegment::address));
        for (int i = 1; i < sorted.size(); i++) {
            if (sorted.get(i).address() < sorted.get(i - 1).end()) {
                throw new IllegalArgumentException("segments at 0x" + Long.toHexString(sorted.get(i - 1).address())
                        + " and 0x" + Long.toHexString(sorted.get(i).address()) + " overlap");
            }
        }
        if (b.capacity < UNKNOWN || b.deviceFree < UNKNOWN) {
            throw new IllegalArgumentException("capacity and device free must be non-negative or UNKNOWN");
        }
        this.label = b.label;
        this.device = b.device;
        this.segments = List.copyOf(sorted);
        this.capacity = b.capacity;
        this.deviceFree = b.deviceFree >= 0 ? b.deviceFree : (b.oom != null ? b.oom.deviceFree() : UNKNOWN);
        this.oom = b.oom;
        this.allocatorConf = b.allocatorConf;
    }

    public static Builder builder() {
        return new Builder();
    }

    /** Where the state came from, for the report header (file and entry, or a run's name). */
    public String label() {
        return label;
    }

    public int device() {
        return device;
    }

    public List<StateSegment> segments() {
        return segments;
    }

    /** Total device memory, or {@link #UNKNOWN}. */
    public long capacity() {
        return capacity;
    }

    /** Free device memory as the driver reports it (outside the allocator's reservation), or {@link #UNKNOWN}. */
    public long deviceFree() {
        return deviceFree;
    }

    /** The out-of-memory that ended this state, if the trace holds one. */
    public Optional<OomEvent> oom() {
        return Optional.ofNullable(oom);
    }

    /** The allocator configuration string in force ({@code PYTORCH_CUDA_ALLOC_CONF}), if known. */
    public Optional<String> allocatorConf() {
        return Optional.ofNullable(allocatorConf);
    }

    /** Mutable builder. */
    public static final class Builder {
        private String label = "state";
        private int device;
        private final List<StateSegment> segments = new ArrayList<>();
        private long capacity = UNKNOWN;
        private long deviceFree = UNKNOWN;
        private OomEvent oom;
        private String allocatorConf;

        public Builder label(String v) { this.label = v; return this; }
        public Builder device(int v) { this.device = v; return this; }
        public Builder segment(StateSegment s) { this.segments.add(s); return this; }
        public Builder segments(List<StateSegment> s) { this.segments.addAll(s); return this; }
        public Builder capacity(long v) { this.capacity = v; return this; }
        public Builder deviceFree(long v) { this.deviceFree = v; return this; }
        public Builder oom(OomEvent v) { this.oom = v; return this; }
        public Builder allocatorConf(String v) { this.allocatorConf = v; return this; }

        public MemoryState build() {
            return new MemoryState(this);
        }
    }
}
