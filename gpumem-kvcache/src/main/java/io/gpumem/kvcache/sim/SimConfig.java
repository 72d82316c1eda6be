package io.gpumem.kvcache.sim;

import io.gpumem.kvcache.KvCacheException;
import io.gpumem.kvcache.KvCacheSpec;
import io.gpumem.kvcache.hash.HashAlgorithm;
import io.gpumem.kvcache.manager.KvCacheConfig;
import io.gpumem.kvcache.manager.PreemptionMode;
import io.gpumem.kvcache.sched.SchedulerConfig;
import io.gpumem.kvcache.sched.VictimPolicy;
import java.util.Objects;
import java.util.function.UnaryOperator;

/**
 * Settings of one simulated serving run: the workload (what arrives and when), the KV geometry of the simulated
 * device memory (a {@link KvCacheSpec}), and the two configurations the run hands on unchanged, the cache manager's
 * {@link KvCacheConfig} and the scheduler's {@link SchedulerConfig}. Built only by {@link Builder}, which starts
 * from the documented defaults and checks everything once, in {@link Builder#build}: each setting on its own
 * (positive counts, fractions in range), the limits that keep a run within memory, and the settings together
 * (the blocks must hold one request of the longest model length; a shared prefix, or the chat workload's system
 * prompt, must leave room for output).
 *
 * <p>Invariant: a {@code SimConfig} exists only for settings that passed those checks, so the simulator does not
 * check them again. The cache configuration's hash seed is the run's {@link #seed}.
 */
public final class SimConfig {
    /** Most requests a run generates (all are generated before the simulation starts). */
    public static final int MAX_REQUESTS = 10_000_000;
    /** Most model layers (the largest public models have under 200). */
    public static final int MAX_LAYERS = 1024;
    /** Largest KV cache the simulated device is given. */
    public static final long MAX_KV_BYTES = 1L << 40;
    /** Requests in the prefix hit-rate window of every instance's cache manager. */
    private static final int HIT_RATE_WINDOW = 1000;

    private final Workload workload;
    private final long seed;
    private final int requests;
    private final double arrivalRate;
    private final int prefixTokens;
    private final int priorityLevels;
    private final long maxSteps;
    private final KvCacheSpec spec;
    private final KvCacheConfig cache;
    private final SchedulerConfig scheduler;

    private SimConfig(Builder b) {
        workload = b.workload;
        seed = b.seed;
        requests = b.requests;
        arrivalRate = b.arrivalRate;
        prefixTokens = b.prefixTokens;
        priorityLevels = b.priorityLevels;
        maxSteps = b.maxSteps;
        spec = KvCacheSpec.builder()
                .layers(b.layers)
                .kvHeads(b.kvHeads)
                .headSize(b.headSize)
                .elementSize(2)
                .blockSize(b.blockSize)
                .numBlocks(b.blocks)
                .maxModelLen(b.maxModelLen)
                .build();
        cache = new KvCacheConfig(
                b.prefixCaching, b.hashAlgorithm, b.seed, b.watermark, b.swapSpaceBytes, HIT_RATE_WINDOW);
        scheduler = new SchedulerConfig(b.tokenBudget, b.maxRunning, b.preemption, b.victimPolicy, b.lookahead);
    }

    /** A builder holding the documented defaults (README-config.md, the {@code kv-sim} flags). */
    public static Builder builder() {
        return new Builder();
    }

    /** The defaults, built. */
    public static SimConfig defaults() {
        return builder().build();
    }

    /** A builder holding these settings, to derive a variant. */
    public Builder toBuilder() {
        return new Builder()
                .workload(workload)
                .seed(seed)
                .requests(requests)
                .arrivalRate(arrivalRate)
                .prefixTokens(prefixTokens)
                .priorityLevels(priorityLevels)
                .maxSteps(maxSteps)
                .blocks(spec.numBlocks())
                .blockSize(spec.blockSize())
                .maxModelLen(spec.maxModelLen())
                .layers(spec.layers())
                .kvHeads(spec.kvHeads())
                .headSize(spec.headSize())
                .cache(cache)
                .scheduler(scheduler);
    }

    /** Request mix. */
    public Workload workload() {
        return workload;
    }

    /** Seed of every random choice and of the block hashes (same seed, same run). */
    public long seed() {
        return seed;
    }

    /** Requests to generate (conversations for {@code chat}). */
    public int requests() {
        return requests;
    }

    /** Mean arrivals per step (Poisson). */
    public double arrivalRate() {
        return arrivalRate;
    }

    /** Shared prefix length for {@code shared-prefix}. */
    public int prefixTokens() {
        return prefixTokens;
    }

    /** Requests get a priority drawn uniformly from {@code 0 .. priorityLevels−1} (smaller = more important). */
    public int priorityLevels() {
        return priorityLevels;
    }

    /** Stop after this many steps even if requests remain. */
    public long maxSteps() {
        return maxSteps;
    }

    /** What every instance's cache manager is given (prefix caching, hash, watermark, swap space). */
    public KvCacheConfig cache() {
        return cache;
    }

    /** What every instance's scheduler is given (token budget, running limit, preemption, victims, lookahead). */
    public SchedulerConfig scheduler() {
        return scheduler;
    }

    /**
     * The KV cache geometry of one instance (2-byte elements): its blocks (including the null block), tokens per
     * block, longest sequence (prompt + output), model layers, KV heads and head dimension.
     */
    public KvCacheSpec spec() {
        return spec;
    }

    /**
     * Collects settings, starting from the defaults, and checks them all once in {@link #build}. Error messages
     * name each setting by its builder method, or by what {@link #settingNames} maps that name to (the CLI maps
     * them to its flags, so a bad value names the option the user typed).
     */
    public static final class Builder {
        private Workload workload = Workload.SHAREGPT;
        private long seed = 1L;
        private int requests = 1000;
        private double arrivalRate = 0.2;
        private int prefixTokens = 341;
        private int priorityLevels = 1;
        private long maxSteps = 2_000_000L;
        private int blocks = 4096;
        private int blockSize = 16;
        private int maxModelLen = 2048;
        private int layers = 2;
        private int kvHeads = 2;
        private int headSize = 16;
        private boolean prefixCaching = true;
        private HashAlgorithm hashAlgorithm = HashAlgorithm.FAST128;
        private double watermark = 0.0;
        private long swapSpaceBytes = 64L << 20;
        private int tokenBudget = 2048;
        private int maxRunning = 256;
        private PreemptionMode preemption = PreemptionMode.RECOMPUTE;
        private VictimPolicy victimPolicy = VictimPolicy.FCFS;
        private int lookahead = 0;
        private UnaryOperator<String> names = UnaryOperator.identity();

        private Builder() {}

        public Builder workload(Workload v) {
            workload = v;
            return this;
        }

        public Builder seed(long v) {
            seed = v;
            return this;
        }

        public Builder requests(int v) {
            requests = v;
            return this;
        }

        public Builder arrivalRate(double v) {
            arrivalRate = v;
            return this;
        }

        public Builder prefixTokens(int v) {
            prefixTokens = v;
            return this;
        }

        public Builder priorityLevels(int v) {
            priorityLevels = v;
            return this;
        }

        public Builder maxSteps(long v) {
            maxSteps = v;
            return this;
        }

        public Builder blocks(int v) {
            blocks = v;
            return this;
        }

        public Builder blockSize(int v) {
            blockSize = v;
            return this;
        }

        public Builder maxModelLen(int v) {
            maxModelLen = v;
            return this;
        }

        public Builder layers(int v) {
            layers = v;
            return this;
        }

        public Builder kvHeads(int v) {
            kvHeads = v;
            return this;
        }

        public Builder headSize(int v) {
            headSize = v;
            return this;
        }

        public Builder prefixCaching(boolean v) {
            prefixCaching = v;
            return this;
        }

        public Builder hashAlgorithm(HashAlgorithm v) {
            hashAlgorithm = v;
            return this;
        }

        public Builder watermark(double v) {
            watermark = v;
            return this;
        }

        public Builder swapSpaceBytes(long v) {
            swapSpaceBytes = v;
            return this;
        }

        public Builder tokenBudget(int v) {
            tokenBudget = v;
            return this;
        }

        public Builder maxRunning(int v) {
            maxRunning = v;
            return this;
        }

        public Builder preemption(PreemptionMode v) {
            preemption = v;
            return this;
        }

        public Builder victimPolicy(VictimPolicy v) {
            victimPolicy = v;
            return this;
        }

        public Builder lookahead(int v) {
            lookahead = v;
            return this;
        }

        /** Takes the cache manager's settings from {@code c}, except its hash seed (the run's seed). */
        public Builder cache(KvCacheConfig c) {
            return prefixCaching(c.prefixCaching())
                    .hashAlgorithm(c.hashAlgorithm())
                    .watermark(c.watermark())
                    .swapSpaceBytes(c.swapSpaceBytes());
        }

        /** Takes the scheduler's settings from {@code s}. */
        public Builder scheduler(SchedulerConfig s) {
            return tokenBudget(s.tokenBudget())
                    .maxRunning(s.maxRunning())
                    .preemption(s.preemption())
                    .victimPolicy(s.victimPolicy())
                    .lookahead(s.lookahead());
        }

        /** How error messages name a setting, given its builder method's name (default: that name). */
        public Builder settingNames(UnaryOperator<String> v) {
            names = Objects.requireNonNull(v, "names");
            return this;
        }

        /**
         * The configuration.
         *
         * @throws KvCacheException naming the first setting (or pair of settings) that is out of range
         * @throws NullPointerException naming the first setting left null
         */
        public SimConfig build() {
            Objects.requireNonNull(workload, "workload");
            Objects.requireNonNull(hashAlgorithm, "hashAlgorithm");
            Objects.requireNonNull(preemption, "preemption");
            Objects.requireNonNull(victimPolicy, "victimPolicy");
            positive("requests", requests);
            positive("blocks", blocks);
            positive("blockSize", blockSize);
            positive("tokenBudget", tokenBudget);
            positive("maxRunning", maxRunning);
            positive("maxModelLen", maxModelLen);
            positive("layers", layers);
            positive("kvHeads", kvHeads);
            positive("headSize", headSize);
            positive("maxSteps", maxSteps);
            positive("priorityLevels", priorityLevels);
            if (requests > MAX_REQUESTS) {
                throw bad(name("requests") + " " + requests + " is over the limit of " + MAX_REQUESTS
                        + " (every request is generated before the simulation starts)");
            }
            if (layers > MAX_LAYERS) {
                throw bad(name("layers") + " " + layers + " is over the limit of " + MAX_LAYERS);
            }
            long kvBytes;
            try {
                kvBytes = Math.multiplyExact(
                        Math.multiplyExact(
                                Math.multiplyExact(4L * blockSize, kvHeads),
                                Math.multiplyExact((long) headSize, layers)),
                        blocks);
            } catch (ArithmeticException e) {
                kvBytes = Long.MAX_VALUE;
            }
            if (kvBytes > MAX_KV_BYTES) {
                throw bad("the KV cache (" + name("blocks") + " x " + name("blockSize") + " x " + name("kvHeads")
                        + " x " + name("headSize") + " x " + name("layers") + " x 4 bytes) would take "
                        + (kvBytes == Long.MAX_VALUE ? "more than 8 EiB" : kvBytes + " bytes")
                        + ", over the simulated device's limit of " + MAX_KV_BYTES + " bytes (1 TiB)");
            }
            if (blocks > KvCacheSpec.maxBlocks(blockSize)) { // checked here too, to name the flags
                throw bad(name("blocks") + " " + blocks + " of " + name("blockSize") + " " + blockSize + " hold "
                        + (long) blocks * blockSize + " tokens, over the limit of " + Integer.MAX_VALUE
                        + " tokens; use at most " + KvCacheSpec.maxBlocks(blockSize) + " blocks");
            }
            if (!(arrivalRate > 0) || Double.isInfinite(arrivalRate)) {
                throw bad(name("arrivalRate") + " must be a positive number, got " + arrivalRate);
            }
            if (!(watermark >= 0 && watermark < 1)) {
                throw bad(name("watermark") + " must be in [0, 1), got " + watermark);
            }
            notNegative("lookahead", lookahead);
            notNegative("swapSpaceBytes", swapSpaceBytes);
            notNegative("prefixTokens", prefixTokens);
            if (blocks < 2 || (long) (blocks - 1) * blockSize < maxModelLen) {
                throw bad(name("blocks") + " " + blocks + " of " + name("blockSize") + " " + blockSize + " hold "
                        + Math.max(0, (long) (blocks - 1) * blockSize) + " tokens, less than one request of "
                        + name("maxModelLen") + " " + maxModelLen + "; use at least "
                        + ((maxModelLen + (long) blockSize - 1) / blockSize + 1) + " blocks");
            }
            if (workload == Workload.SHARED_PREFIX && prefixTokens >= maxModelLen - 2) {
                throw bad(name("prefixTokens") + " " + prefixTokens + " leaves no room under " + name("maxModelLen")
                        + " " + maxModelLen);
            }
            // every chat turn starts with the same system prompt, which needs the same room as a shared prefix
            if (workload == Workload.CHAT && WorkloadGenerator.CHAT_SYSTEM_TOKENS >= maxModelLen - 2) {
                throw bad(name("maxModelLen") + " " + maxModelLen + " leaves no room after the chat workload's "
                        + WorkloadGenerator.CHAT_SYSTEM_TOKENS + "-token system prompt; use at least "
                        + (WorkloadGenerator.CHAT_SYSTEM_TOKENS + 3));
            }
            return new SimConfig(this);
        }

        private String name(String setting) {
            return names.apply(setting);
        }

        private void positive(String setting, long v) {
            if (v <= 0) {
                throw bad(name(setting) + " must be positive, got " + v);
            }
        }

        private void notNegative(String setting, long v) {
            if (v < 0) {
                throw bad(name(setting) + " must not be negative, got " + v);
            }
        }

        private static KvCacheException bad(String message) {
            return new KvCacheException(message);
        }
    }
}
