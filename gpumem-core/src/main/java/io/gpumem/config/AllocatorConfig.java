package io.gpumem.config;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * The caching allocator's settings, as {@code PYTORCH_CUDA_ALLOC_CONF} expresses them (allocator.md §9).
 *
 * <p>Immutable. {@link #defaults()} matches PyTorch with no configuration; {@link #parse(String)} reads the
 * environment-variable syntax; {@link #reparse(String)} applies PyTorch's runtime re-parse rule
 * ({@code _set_allocator_settings}): {@code max_split_size}, {@code roundup_power2_divisions} and
 * {@code garbage_collection_threshold} go back to their defaults on every parse, other options keep their
 * previous value unless named.
 *
 * <p>Invariants: {@code maxSplitSize} is {@link #UNLIMITED}, {@link #NEGATIVE_MAX_SPLIT_SIZE} or a multiple of
 * 1 MiB above 20 MiB;
 * the divisions table has {@value #ROUNDUP_INTERVALS} entries, each 0 or a power of two;
 * {@code 0 <= garbageCollectionThreshold < 1}.
 */
public final class AllocatorConfig {

    /** {@code max_split_size} when unset (PyTorch's SIZE_MAX): no oversize handling. */
    public static final long UNLIMITED = Long.MAX_VALUE;
    /**
     * {@code max_split_size} after a negative {@code max_split_size_mb} (any negative int), as PyTorch 2.5 reads
     * it: {@code stoi} gives the negative number, its conversion to {@code size_t} passes the "> 20" check, and
     * the clamp to {@code SIZE_MAX / 1 MiB} MiB leaves 2^64 − 1 MiB. That is larger than every block (nothing is
     * oversize) yet not SIZE_MAX (so the OOM path searches for oversize blocks to release, and finds none), and
     * {@code memory_stats()} and snapshots report it as its int64 cast, −1 MiB. Held here as 2^63 − 1 MiB, which
     * compares with every size a {@code long} holds as PyTorch's value does.
     */
    public static final long NEGATIVE_MAX_SPLIT_SIZE = Long.MAX_VALUE - ((1L << 20) - 1);
    /** {@link #NEGATIVE_MAX_SPLIT_SIZE} as PyTorch reports it: 2^64 − 1 MiB cast to int64. */
    public static final long NEGATIVE_MAX_SPLIT_SIZE_REPORTED = -(1L << 20);
    /** Number of power-of-two intervals in the roundup table ({@code kRoundUpPowerOfTwoIntervals}). */
    public static final int ROUNDUP_INTERVALS = 16;
    /** 20 MiB: the default {@code max_non_split_rounding}. */
    public static final long DEFAULT_MAX_NON_SPLIT_ROUNDING = 20L << 20;

    private static final AllocatorConfig DEFAULTS = new Builder().build();

    /** The values, in a copy of the builder that made them that nothing else holds (so they never change). */
    private final Builder v;

    private AllocatorConfig(Builder b) {
        this.v = b.copy();
    }

    /** PyTorch's behaviour with no {@code PYTORCH_CUDA_ALLOC_CONF}. */
    public static AllocatorConfig defaults() {
        return DEFAULTS;
    }

    /**
     * Parses a {@code PYTORCH_CUDA_ALLOC_CONF} string over the defaults.
     *
     * @throws ConfigException naming the offending key when the string is malformed
     */
    public static AllocatorConfig parse(String conf) {
        return DEFAULTS.reparse(conf);
    }

    /**
     * Re-parses like {@code torch.cuda.memory._set_allocator_settings}: options not named keep this
     * config's values, except the three that PyTorch resets on every parse.
     *
     * @throws ConfigException naming the offending key when the string is malformed
     */
    public AllocatorConfig reparse(String conf) {
        return AllocatorConfigParser.parse(conf, this);
    }

    /**
     * This configuration as a {@code PYTORCH_CUDA_ALLOC_CONF} string that {@link #parse} reads back to the same
     * settings: the options that differ from the defaults, in a fixed order ({@code ""} for the defaults). It is
     * how a configuration that several parses made (a script's {@code config} lines, {@code _set_allocator_settings}
     * calls) is written down, since no one of their strings says it all and joining them would not re-parse the
     * same way ({@link #reparse} resets three options).
     *
     * @throws IllegalStateException for a size the syntax cannot write (a builder-made size that is not whole MiB)
     */
    public String toConfString() {
        List<String> options = new ArrayList<>();
        if (!v.backend.equals(DEFAULTS.v.backend)) {
            options.add("backend:" + v.backend);
        }
        if (v.maxSplitSize == NEGATIVE_MAX_SPLIT_SIZE) {
            options.add("max_split_size_mb:-1");
        } else if (v.maxSplitSize != UNLIMITED) {
            options.add("max_split_size_mb:" + wholeMib(v.maxSplitSize, "max_split_size"));
        }
        if (v.maxNonSplitRounding != DEFAULT_MAX_NON_SPLIT_ROUNDING) {
            options.add("max_non_split_rounding_mb:" + wholeMib(v.maxNonSplitRounding, "max_non_split_rounding"));
        }
        int[] table = v.roundupPower2Divisions;
        if (Arrays.stream(table).anyMatch(d -> d != 0)) {
            if (Arrays.stream(table).allMatch(d -> d == table[0])) {
                options.add("roundup_power2_divisions:" + table[0]);
            } else {
                // a list sets exactly the intervals it names (the first also every smaller one, and there is none
                // below 1 MB); the others stay 0
                StringBuilder list = new StringBuilder("roundup_power2_divisions:[1:").append(table[0]);
                for (int i = 1; i < table.length; i++) {
                    if (table[i] != 0) {
                        list.append(',').append(1L << i).append(':').append(table[i]);
                    }
                }
                options.add(list.append(']').toString());
            }
        }
        if (v.garbageCollectionThreshold != 0.0) {
            // Double.toString is the shortest text that parses back to the same double
            options.add("garbage_collection_threshold:" + v.garbageCollectionThreshold);
        }
        if (v.expandableSegments) {
            options.add("expandable_segments:True");
        }
        if (v.releaseLockOnCudaMalloc) {
            options.add("release_lock_on_cudamalloc:True");
        }
        if (v.pinnedUseCudaHostRegister) {
            options.add("pinned_use_cuda_host_register:True");
        }
        if (v.pinnedNumRegisterThreads != DEFAULTS.v.pinnedNumRegisterThreads) {
            options.add("pinned_num_register_threads:" + v.pinnedNumRegisterThreads);
        }
        if (v.pinnedUseBackgroundThreads) {
            options.add("pinned_use_background_threads:True");
        }
        return String.join(",", options);
    }

    private static long wholeMib(long bytes, String option) {
        if (bytes % (1L << 20) != 0) {
            throw new IllegalStateException(option + " of " + bytes + " bytes is not a whole number of MiB");
        }
        return bytes >> 20;
    }

    public Builder toBuilder() {
        return v.copy();
    }

    /** The raw configuration string this config was parsed from ("" for defaults). */
    public String raw() {
        return v.raw;
    }

    /** This configuration as a sentence names it: {@link #inWords(String)} of its raw string. */
    public String inWords() {
        return inWords(v.raw);
    }

    /**
     * A configuration string as a sentence names it: the string, or {@code the default configuration} when it is
     * empty or absent ({@code null}: a file that recorded no settings).
     */
    public static String inWords(@Nullable String raw) {
        return raw == null || raw.isEmpty() ? "the default configuration" : raw;
    }

    /** {@code native} (default) or {@code cudaMallocAsync}. */
    public String backend() {
        return v.backend;
    }

    /** Oversize threshold in bytes; {@link #UNLIMITED} when unset, {@link #NEGATIVE_MAX_SPLIT_SIZE} when negative. */
    public long maxSplitSize() {
        return v.maxSplitSize;
    }

    /**
     * {@code max_split_size} as {@code memory_stats()} and snapshots report it: −1 when unset, −1 MiB after a
     * negative {@code max_split_size_mb} ({@link #NEGATIVE_MAX_SPLIT_SIZE}).
     */
    public long maxSplitSizeReported() {
        if (v.maxSplitSize == UNLIMITED) {
            return -1;
        }
        return v.maxSplitSize == NEGATIVE_MAX_SPLIT_SIZE ? NEGATIVE_MAX_SPLIT_SIZE_REPORTED : v.maxSplitSize;
    }

    /** Slack allowed when an oversize request reuses a larger cached block (20 MiB default). */
    public long maxNonSplitRounding() {
        return v.maxNonSplitRounding;
    }

    /** Number of power-of-two divisions for a size (allocator.md §1.3): index floor(log2(size)) − 20, clamped to [0, 15]. */
    public int roundupPower2Divisions(long size) {
        int index = size <= 0 ? 0 : 63 - Long.numberOfLeadingZeros(size) - 20;
        if (index < 0) {
            index = 0;
        } else if (index >= ROUNDUP_INTERVALS) {
            index = ROUNDUP_INTERVALS - 1;
        }
        return v.roundupPower2Divisions[index];
    }

    /** A copy of the 16-entry divisions table. */
    public int[] roundupPower2DivisionsTable() {
        return v.roundupPower2Divisions.clone();
    }

    /** GC threshold in (0, 1), or 0 when off. Only effective with a memory fraction set. */
    public double garbageCollectionThreshold() {
        return v.garbageCollectionThreshold;
    }

    public boolean expandableSegments() {
        return v.expandableSegments;
    }

    public boolean releaseLockOnCudaMalloc() {
        return v.releaseLockOnCudaMalloc;
    }

    public boolean pinnedUseCudaHostRegister() {
        return v.pinnedUseCudaHostRegister;
    }

    public int pinnedNumRegisterThreads() {
        return v.pinnedNumRegisterThreads;
    }

    public boolean pinnedUseBackgroundThreads() {
        return v.pinnedUseBackgroundThreads;
    }

    @Override
    public boolean equals(Object o) {
        if (!(o instanceof AllocatorConfig c)) {
            return false;
        }
        return v.raw.equals(c.v.raw)
                && v.backend.equals(c.v.backend)
                && v.maxSplitSize == c.v.maxSplitSize
                && v.maxNonSplitRounding == c.v.maxNonSplitRounding
                && Arrays.equals(v.roundupPower2Divisions, c.v.roundupPower2Divisions)
                && Double.compare(v.garbageCollectionThreshold, c.v.garbageCollectionThreshold) == 0
                && v.expandableSegments == c.v.expandableSegments
                && v.releaseLockOnCudaMalloc == c.v.releaseLockOnCudaMalloc
                && v.pinnedUseCudaHostRegister == c.v.pinnedUseCudaHostRegister
                && v.pinnedNumRegisterThreads == c.v.pinnedNumRegisterThreads
                && v.pinnedUseBackgroundThreads == c.v.pinnedUseBackgroundThreads;
    }

    @Override
    public int hashCode() {
        return v.raw.hashCode() * 31 + Long.hashCode(v.maxSplitSize) + (v.expandableSegments ? 1 : 0);
    }

    @Override
    public String toString() {
        return "AllocatorConfig{" + (v.raw.isEmpty() ? "defaults" : v.raw) + "}";
    }

    /** Mutable builder; validation of values parsed from text is the parser's job. */
    public static final class Builder implements Cloneable {
        private String raw = "";
        private String backend = "native";
        private long maxSplitSize = UNLIMITED;
        private long maxNonSplitRounding = DEFAULT_MAX_NON_SPLIT_ROUNDING;
        private int[] roundupPower2Divisions = new int[ROUNDUP_INTERVALS];
        private double garbageCollectionThreshold = 0.0;
        private boolean expandableSegments = false;
        private boolean releaseLockOnCudaMalloc = false;
        private boolean pinnedUseCudaHostRegister = false;
        private int pinnedNumRegisterThreads = 1;
        private boolean pinnedUseBackgroundThreads = false;

        public Builder raw(String v) {
            this.raw = v;
            return this;
        }

        public Builder backend(String v) {
            this.backend = v;
            return this;
        }

        public Builder maxSplitSize(long v) {
            this.maxSplitSize = v;
            return this;
        }

        public Builder maxNonSplitRounding(long v) {
            this.maxNonSplitRounding = v;
            return this;
        }

        public Builder roundupPower2Divisions(int[] table) {
            if (table.length != ROUNDUP_INTERVALS) {
                throw new IllegalArgumentException("roundup table needs " + ROUNDUP_INTERVALS + " entries");
            }
            this.roundupPower2Divisions = table.clone();
            return this;
        }

        public Builder garbageCollectionThreshold(double v) {
            this.garbageCollectionThreshold = v;
            return this;
        }

        public Builder expandableSegments(boolean v) {
            this.expandableSegments = v;
            return this;
        }

        public Builder releaseLockOnCudaMalloc(boolean v) {
            this.releaseLockOnCudaMalloc = v;
            return this;
        }

        public Builder pinnedUseCudaHostRegister(boolean v) {
            this.pinnedUseCudaHostRegister = v;
            return this;
        }

        public Builder pinnedNumRegisterThreads(int v) {
            this.pinnedNumRegisterThreads = v;
            return this;
        }

        public Builder pinnedUseBackgroundThreads(boolean v) {
            this.pinnedUseBackgroundThreads = v;
            return this;
        }

        public AllocatorConfig build() {
            return new AllocatorConfig(this);
        }

        /** A builder holding the same values, its divisions table a copy of this one's. */
        private Builder copy() {
            try {
                Builder c = (Builder) clone();
                c.roundupPower2Divisions = roundupPower2Divisions.clone();
                return c;
            } catch (CloneNotSupportedException e) {
                throw new AssertionError(e);
            }
        }
    }
}
