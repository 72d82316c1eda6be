package io.gpumem.trace.analysis;

import io.gpumem.history.BlockInfo;
import io.gpumem.history.BlockState;
import io.gpumem.history.SegmentInfo;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Optional;

/**
 * The allocator state of one device at one moment: the input of {@link StateAnalyzer}.
 *
 * <p>Segments are the one segment model ({@link SegmentInfo}), whichever source they come from (a PyTorch
 * snapshot, a rebuilt trace window, a live {@code CachingAllocator}), plus what the driver knew; adapters gather
 * them from each source.
 *
 * <p>Invariants, checked on construction: segments are sorted by address and do not overlap; each segment's
 * blocks are non-empty, of positive size and known state, and tile it from its address to its end;
 * {@code capacity} and {@code deviceFree} are −1 when unknown, otherwise non-negative.
 */
public final class MemoryState {
    /** Marker for an unknown byte figure. */
    public static final long UNKNOWN = -1;

    private final String label;
    private final int device;
    private final List<SegmentInfo> segments;
    private final long capacity;
    private final long deviceFree;
    private final OomEvent oom;
    private final String allocatorConf;

    private MemoryState(Builder b) {
        List<SegmentInfo> sorted = new ArrayList<>(b.segments);
        sorted.sort(Comparator.comparingLong(SegmentInfo::address));
        for (SegmentInfo s : sorted) {
            checkTiling(s);
        }
        for (int i = 1; i < sorted.size(); i++) {
            if (sorted.get(i).address() < sorted.get(i - 1).end()) {
                throw new IllegalArgumentException(
                        "segments at 0x" + Long.toHexString(sorted.get(i - 1).address()) + " and 0x"
                                + Long.toHexString(sorted.get(i).address()) + " overlap");
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

    /** Rejects a segment whose blocks do not tile it (what the analysis's sums rely on). */
    private static void checkTiling(SegmentInfo s) {
        String at = "segment at 0x" + Long.toHexString(s.address());
        if (s.pool() == null) {
            throw new IllegalArgumentException(at + " has no pool");
        }
        if (s.blocks().isEmpty()) {
            throw new IllegalArgumentException(at + " has no blocks");
        }
        long next = s.address();
        for (BlockInfo b : s.blocks()) {
            String block = at + ": block at 0x" + Long.toHexString(b.address());
            if (b.address() != next) {
                throw new IllegalArgumentException(
                        block + " does not follow the previous block (expected 0x" + Long.toHexString(next) + ")");
            }
            if (b.size() <= 0) {
                throw new IllegalArgumentException(block + " has non-positive size " + b.size());
            }
            if (b.state() == null || b.state() == BlockState.UNKNOWN) {
                throw new IllegalArgumentException(block + " has no known state");
            }
            next += b.size();
        }
        if (next != s.end()) {
            throw new IllegalArgumentException(at + ": blocks end at 0x" + Long.toHexString(next)
                    + " but the segment at 0x" + Long.toHexString(s.end()));
        }
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

    public List<SegmentInfo> segments() {
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
        private final List<SegmentInfo> segments = new ArrayList<>();
        private long capacity = UNKNOWN;
        private long deviceFree = UNKNOWN;
        private OomEvent oom;
        private String allocatorConf;

        public Builder label(String v) {
            this.label = v;
            return this;
        }

        public Builder device(int v) {
            this.device = v;
            return this;
        }

        public Builder segment(SegmentInfo s) {
            this.segments.add(s);
            return this;
        }

        public Builder segments(List<SegmentInfo> s) {
            this.segments.addAll(s);
            return this;
        }

        public Builder capacity(long v) {
            this.capacity = v;
            return this;
        }

        public Builder deviceFree(long v) {
            this.deviceFree = v;
            return this;
        }

        public Builder oom(OomEvent v) {
            this.oom = v;
            return this;
        }

        public Builder allocatorConf(String v) {
            this.allocatorConf = v;
            return this;
        }

        public MemoryState build() {
            return new MemoryState(this);
        }
    }
}
