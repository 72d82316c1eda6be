package io.gpumem.kvcache.tier;

import java.lang.foreign.MemorySegment;

/**
 * One storage level under the device pool. A tier stores and returns whole {@link BlockRecord}s keyed by
 * the block's 128-bit chained key and keeps at most one record per key; it never interprets a record:
 * {@link KvTiers} checks checksum and identity after every load, so a tier only has to be a byte store
 * with a budget and least-recently-used eviction. Not thread-safe: {@link KvTiers} calls it from the
 * owner's thread (the scheduling loop or the pump).
 */
public abstract sealed class BlockTier implements AutoCloseable permits LocalTier, RemoteTier {
    private final String name;
    long hits;
    long misses;
    long bytesIn;
    long bytesOut;
    long stored;
    long evicted;
    long dropped;
    long failed;
    long corrupt;

    BlockTier(String name) {
        this.name = name;
    }

    /** {@code host}, {@code disk} or {@code remote}. */
    public final String name() {
        return name;
    }

    /** Whether the tier knows it holds the key (a remote tier cannot tell without asking: false). */
    abstract boolean contains(long hi, long lo);

    /** Marks a held record most recently used. */
    abstract void touch(long hi, long lo);

    /**
     * Stores a record under its key. Records pushed out to stay in the budget are handed to
     * {@code spill} (still readable during the call) before their space is reused.
     *
     * @return false when the write failed
     */
    abstract boolean store(MemorySegment record, long hi, long lo, Spill spill);

    /** Copies the record of the key into {@code dst}; false when absent or unreadable. */
    abstract boolean load(long hi, long lo, MemorySegment dst);

    /** Forgets a record (found damaged, or holding another block than its key names). */
    abstract void remove(long hi, long lo);

    abstract long usedBytes();

    abstract long capacityBytes();

    public TierStats stats() {
        return new TierStats(
                name,
                hits,
                misses,
                bytesIn,
                bytesOut,
                stored,
                evicted,
                dropped,
                failed,
                corrupt,
                usedBytes(),
                capacityBytes());
    }

    @Override
    public void close() {}

    /** Receives records a tier evicts, so the next tier down can take them. */
    @FunctionalInterface
    interface Spill {
        void evicted(MemorySegment record, long hi, long lo);
    }
}
