package io.gpumem.stats;

import java.util.Arrays;
import java.util.Collections;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;
import org.jspecify.annotations.Nullable;

/**
 * An immutable copy of an allocator's statistics at one moment: the figures of {@code torch.cuda.memory_stats()}
 * as typed values. Each of the nine {@link StatKind}s has a {@link Stat} (current, peak, allocated, freed) per
 * {@link StatType}; the two oversize stats have one each; five counters and {@code max_split_size} complete it.
 * {@link #toPyTorchMap()} gives PyTorch's flat dotted keys, for output only: code that needs a figure reads it
 * typed. A policy's own counters (pages stitched, requests served by a plan, ...) are {@link #extras()}, named
 * like PyTorch's counters ({@code num_stitched_pages}); the exact allocator has none.
 *
 * <p>A caching allocator fills every figure; another allocator implementation may leave what it does not track at
 * zero (the {@link Builder} starts from zeros and {@code max_split_size} −1). No consistency between the types is
 * enforced here: {@code all = small_pool + large_pool} is the caching allocator's invariant, not this value's.
 */
public final class MemoryStats {
    /** One stat's four figures, as PyTorch's {@code Stat} struct. */
    public record Stat(long current, long peak, long allocated, long freed) {
        public static final Stat ZERO = new Stat(0, 0, 0, 0);
    }

    private static final StatKind[] KINDS = StatKind.values();
    private static final StatType[] TYPES = StatType.values();

    /** {@code stats[kind.ordinal() * 3 + type.ordinal()]}. */
    private final Stat[] stats;

    private final Stat oversizeAllocations;
    private final Stat oversizeSegments;
    private final long numAllocRetries;
    private final long numOoms;
    private final long numSyncAllStreams;
    private final long numDeviceAlloc;
    private final long numDeviceFree;
    private final long maxSplitSize;
    private final Map<String, Long> extras;

    private MemoryStats(Builder b) {
        this.stats = b.stats.clone();
        this.oversizeAllocations = b.oversizeAllocations;
        this.oversizeSegments = b.oversizeSegments;
        this.numAllocRetries = b.numAllocRetries;
        this.numOoms = b.numOoms;
        this.numSyncAllStreams = b.numSyncAllStreams;
        this.numDeviceAlloc = b.numDeviceAlloc;
        this.numDeviceFree = b.numDeviceFree;
        this.maxSplitSize = b.maxSplitSize;
        this.extras = b.extras == null ? Map.of() : Collections.unmodifiableMap(new TreeMap<>(b.extras));
    }

    public static Builder builder() {
        return new Builder();
    }

    /** The figures of {@code kind} for {@code type}, e.g. {@code get(RESERVED_BYTES, LARGE_POOL).peak()}. */
    public Stat get(StatKind kind, StatType type) {
        return stats[kind.ordinal() * TYPES.length + type.ordinal()];
    }

    /** The figures of {@code kind} over both pools ({@code all}). */
    public Stat get(StatKind kind) {
        return get(kind, StatType.ALL);
    }

    /** {@code allocated_bytes.all.current}: {@code torch.cuda.memory_allocated()}. */
    public long allocatedBytes() {
        return get(StatKind.ALLOCATED_BYTES).current();
    }

    /** {@code reserved_bytes.all.current}: {@code torch.cuda.memory_reserved()}. */
    public long reservedBytes() {
        return get(StatKind.RESERVED_BYTES).current();
    }

    /** {@code oversize_allocations}: live allocations of at least {@code max_split_size}. */
    public Stat oversizeAllocations() {
        return oversizeAllocations;
    }

    /** {@code oversize_segments}: segments of at least {@code max_split_size}. */
    public Stat oversizeSegments() {
        return oversizeSegments;
    }

    /** {@code num_alloc_retries}: mallocs that freed the whole cache and tried the device again. */
    public long numAllocRetries() {
        return numAllocRetries;
    }

    /** {@code num_ooms}: out-of-memory errors raised. */
    public long numOoms() {
        return numOoms;
    }

    /** {@code num_sync_all_streams}: waits for every outstanding stream event (empty_cache, OOM retry). */
    public long numSyncAllStreams() {
        return numSyncAllStreams;
    }

    /** {@code num_device_alloc}: device allocations (cudaMalloc calls, expandable page maps). */
    public long numDeviceAlloc() {
        return numDeviceAlloc;
    }

    /** {@code num_device_free}: device frees (cudaFree calls, expandable page unmaps). */
    public long numDeviceFree() {
        return numDeviceFree;
    }

    /** {@code max_split_size} as PyTorch reports it: fixed when the allocator is created, −1 when unlimited. */
    public long maxSplitSize() {
        return maxSplitSize;
    }

    /** The policy's own counters by name, sorted; empty for the exact allocator. */
    public Map<String, Long> extras() {
        return extras;
    }

    /** The policy counter {@code name}, or 0 when this allocator does not keep it. */
    public long extra(String name) {
        return extras.getOrDefault(name, 0L);
    }

    /**
     * {@code torch.cuda.memory_stats()}: every figure under PyTorch's dotted key ({@code allocated_bytes.all.peak},
     * {@code oversize_segments.current}, {@code num_ooms}, ...), sorted by key.
     */
    public Map<String, Long> toPyTorchMap() {
        TreeMap<String, Long> m = new TreeMap<>();
        for (StatKind kind : KINDS) {
            for (StatType type : TYPES) {
                put(m, kind.key() + "." + type.key(), get(kind, type));
            }
        }
        put(m, "oversize_allocations", oversizeAllocations);
        put(m, "oversize_segments", oversizeSegments);
        m.put("num_alloc_retries", numAllocRetries);
        m.put("num_ooms", numOoms);
        m.put("num_sync_all_streams", numSyncAllStreams);
        m.put("num_device_alloc", numDeviceAlloc);
        m.put("num_device_free", numDeviceFree);
        m.put("max_split_size", maxSplitSize);
        return m;
    }

    private static void put(Map<String, Long> m, String prefix, Stat s) {
        m.put(prefix + ".current", s.current());
        m.put(prefix + ".peak", s.peak());
        m.put(prefix + ".allocated", s.allocated());
        m.put(prefix + ".freed", s.freed());
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof MemoryStats other
                && Arrays.equals(stats, other.stats)
                && oversizeAllocations.equals(other.oversizeAllocations)
                && oversizeSegments.equals(other.oversizeSegments)
                && numAllocRetries == other.numAllocRetries
                && numOoms == other.numOoms
                && numSyncAllStreams == other.numSyncAllStreams
                && numDeviceAlloc == other.numDeviceAlloc
                && numDeviceFree == other.numDeviceFree
                && maxSplitSize == other.maxSplitSize
                && extras.equals(other.extras);
    }

    @Override
    public int hashCode() {
        return Objects.hash(
                Arrays.hashCode(stats),
                oversizeAllocations,
                oversizeSegments,
                numAllocRetries,
                numOoms,
                numSyncAllStreams,
                numDeviceAlloc,
                numDeviceFree,
                maxSplitSize,
                extras);
    }

    @Override
    public String toString() {
        return "MemoryStats" + toPyTorchMap() + (extras.isEmpty() ? "" : " extras " + extras);
    }

    /** Collects the figures of a {@link MemoryStats}; every figure not set is zero, {@code max_split_size} −1. */
    public static final class Builder {
        private final Stat[] stats = new Stat[KINDS.length * TYPES.length];
        private Stat oversizeAllocations = Stat.ZERO;
        private Stat oversizeSegments = Stat.ZERO;
        private long numAllocRetries;
        private long numOoms;
        private long numSyncAllStreams;
        private long numDeviceAlloc;
        private long numDeviceFree;
        private long maxSplitSize = -1;
        private @Nullable Map<String, Long> extras; // made on the first extra counter

        private Builder() {
            Arrays.fill(stats, Stat.ZERO);
        }

        public Builder stat(StatKind kind, StatType type, Stat stat) {
            stats[kind.ordinal() * TYPES.length + type.ordinal()] = Objects.requireNonNull(stat, "stat");
            return this;
        }

        public Builder oversizeAllocations(Stat stat) {
            this.oversizeAllocations = Objects.requireNonNull(stat, "stat");
            return this;
        }

        public Builder oversizeSegments(Stat stat) {
            this.oversizeSegments = Objects.requireNonNull(stat, "stat");
            return this;
        }

        public Builder numAllocRetries(long n) {
            this.numAllocRetries = n;
            return this;
        }

        public Builder numOoms(long n) {
            this.numOoms = n;
            return this;
        }

        public Builder numSyncAllStreams(long n) {
            this.numSyncAllStreams = n;
            return this;
        }

        public Builder numDeviceAlloc(long n) {
            this.numDeviceAlloc = n;
            return this;
        }

        public Builder numDeviceFree(long n) {
            this.numDeviceFree = n;
            return this;
        }

        public Builder maxSplitSize(long bytes) {
            this.maxSplitSize = bytes;
            return this;
        }

        /** A policy's own counter ({@link MemoryStats#extras()}); setting a name twice keeps the last value. */
        public Builder extra(String name, long value) {
            Objects.requireNonNull(name, "name");
            if (extras == null) {
                extras = new TreeMap<>();
            }
            extras.put(name, value);
            return this;
        }

        public MemoryStats build() {
            return new MemoryStats(this);
        }
    }
}
