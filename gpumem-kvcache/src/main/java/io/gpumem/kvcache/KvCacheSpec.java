package io.gpumem.kvcache;

/**
 * Shape and size of a paged KV cache: the model's attention geometry plus the page (block) size and
 * either a byte budget or an explicit block count.
 *
 * <p>Sizing follows vLLM: one page of one layer holds {@code blockSize} tokens of K and V, so
 * {@code pageBytes = blockSize × 2 × kvHeads × headSize × elementSize}; with a byte budget the block
 * count is {@code budget / pageBytes / layers}. Block 0 is the null block, so a cache of N blocks can
 * hold N−1 blocks of real tokens. Building a spec checks that one request of {@code maxModelLen}
 * tokens fits; otherwise it fails and reports the largest model length that would fit.
 *
 * <p>Immutable; build with {@link #builder()}.
 */
public final class KvCacheSpec {
    /** Default tokens per block, as vLLM on CUDA. */
    public static final int DEFAULT_BLOCK_SIZE = 16;

    private final int layers;
    private final int kvHeads;
    private final int headSize;
    private final int elementSize;
    private final int blockSize;
    private final int numBlocks;
    private final int maxModelLen;

    private KvCacheSpec(Builder b) {
        this.layers = positive("layers", b.layers);
        this.kvHeads = positive("kvHeads", b.kvHeads);
        this.headSize = positive("headSize", b.headSize);
        this.elementSize = positive("elementSize", b.elementSize);
        this.blockSize = positive("blockSize", b.blockSize);
        if (b.budgetBytes > 0 && b.numBlocks > 0) {
            throw new KvCacheException("KvCacheSpec: give either budgetBytes or numBlocks, not both");
        }
        long page = (long) blockSize * 2L * kvHeads * headSize * elementSize;
        long blocks;
        if (b.numBlocks > 0) {
            blocks = b.numBlocks;
        } else if (b.budgetBytes > 0) {
            blocks = b.budgetBytes / page / layers;
        } else {
            throw new KvCacheException("KvCacheSpec: budgetBytes or numBlocks must be set (positive)");
        }
        if (blocks > maxBlocks(blockSize)) {
            throw new KvCacheException("KvCacheSpec: " + blocks + " blocks of " + blockSize + " tokens hold "
                    + blocks * blockSize + " tokens, over the limit of "
                    + Integer.MAX_VALUE + " tokens; use at most " + maxBlocks(blockSize) + " blocks of "
                    + blockSize + " tokens");
        }
        this.numBlocks = (int) blocks;
        this.maxModelLen = positive("maxModelLen", b.maxModelLen);
        long usable = Math.max(0, (long) numBlocks - 1) * blockSize;
        if (usable < maxModelLen) {
            throw new KvCacheException("KvCacheSpec: budget too small for one request: " + numBlocks
                    + " blocks of " + blockSize + " tokens (" + page * layers + " bytes per block over "
                    + layers + " layers, block 0 reserved) hold " + usable + " tokens, but maxModelLen is "
                    + maxModelLen + "; lower maxModelLen to at most " + usable + " or raise the budget to at least "
                    + (ceilDiv(maxModelLen, blockSize) + 1) * page * layers + " bytes");
        }
    }

    private static int positive(String field, int v) {
        if (v <= 0) {
            throw new KvCacheException("KvCacheSpec: " + field + " must be positive, got " + v);
        }
        return v;
    }

    static long ceilDiv(long a, long b) {
        return (a + b - 1) / b;
    }

    public static Builder builder() {
        return new Builder();
    }

    public int layers() {
        return layers;
    }

    public int kvHeads() {
        return kvHeads;
    }

    public int headSize() {
        return headSize;
    }

    public int elementSize() {
        return elementSize;
    }

    public int blockSize() {
        return blockSize;
    }
    /** Blocks in the pool, including the null block 0. */
    public int numBlocks() {
        return numBlocks;
    }

    public int maxModelLen() {
        return maxModelLen;
    }

    /** Bytes of one token's K or V in one layer: {@code kvHeads × headSize × elementSize}. */
    public long tokenBytes() {
        return (long) kvHeads * headSize * elementSize;
    }

    /** Bytes of one page (one block of one layer): K then V for {@code blockSize} tokens. */
    public long pageBytes() {
        return 2L * blockSize * tokenBytes();
    }

    /** Bytes of one layer's region: {@code numBlocks × pageBytes}. */
    public long layerBytes() {
        return (long) numBlocks * pageBytes();
    }

    /** Tokens the pool can hold (null block excluded). */
    public long capacityTokens() {
        return (long) (numBlocks - 1) * blockSize;
    }

    /** Requests of {@code maxModelLen} tokens that fit at once (vLLM's "maximum concurrency"). */
    public double maxConcurrency() {
        return (double) (numBlocks - 1) / ceilDiv(maxModelLen, blockSize);
    }

    @Override
    public String toString() {
        return "KvCacheSpec[layers=" + layers + ", kvHeads=" + kvHeads + ", headSize=" + headSize
                + ", elementSize=" + elementSize + ", blockSize=" + blockSize + ", numBlocks=" + numBlocks
                + ", maxModelLen=" + maxModelLen + ", pageBytes=" + pageBytes() + "]";
    }

    /** Builder; defaults: block size 16, element size 2 (fp16), max model length 2048. */
    public static final class Builder {
        private int layers;
        private int kvHeads;
        private int headSize;
        private int elementSize = 2;
        private int blockSize = DEFAULT_BLOCK_SIZE;
        private long budgetBytes;
        private int numBlocks;
        private int maxModelLen = 2048;

        private Builder() {}

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

        public Builder elementSize(int v) {
            elementSize = v;
            return this;
        }

        public Builder blockSize(int v) {
            blockSize = v;
            return this;
        }
        /** Total bytes for K and V over all layers; the block count is derived from it. */
        public Builder budgetBytes(long v) {
            budgetBytes = v;
            return this;
        }
        /** Explicit block count (including the null block), like vLLM's {@code num_gpu_blocks_override}. */
        public Builder numBlocks(int v) {
            numBlocks = v;
            return this;
        }

        public Builder maxModelLen(int v) {
            maxModelLen = v;
            return this;
        }

        public KvCacheSpec build() {
            return new KvCacheSpec(this);
        }
    }

    /**
     * The most blocks of {@code blockSize} tokens a cache may have: token positions and block-table offsets are ints,
     * so blocks x blockSize tokens must fit in one.
     */
    public static int maxBlocks(int blockSize) {
        return Integer.MAX_VALUE / Math.max(1, blockSize);
    }
}
