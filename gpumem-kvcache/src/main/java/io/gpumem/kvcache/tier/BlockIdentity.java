package io.gpumem.kvcache.tier;

/**
 * Which block a record holds, as the tiers check it: the block's chained key, its parent's key (or, for the first
 * block of a sequence, the salt fingerprint instead), the adapter, and the block's tokens. A record is written with
 * an identity ({@link BlockRecord#capture}) and trusted on a lookup only when it names the same one
 * ({@link BlockRecord#matches}), so a hash collision or a foreign record is a miss, never wrong KV.
 *
 * <p>Mutable and meant to be reused: the cache manager owns one and {@link #set}s it before each demotion,
 * publication or lookup, so the hot path allocates nothing. The tokens are read where they are (the array is not
 * copied) and must stay unchanged until the call that takes the identity returns.
 */
public final class BlockIdentity {
    long hi;
    long lo;
    long parentHi;
    long parentLo;
    boolean first;
    long saltFingerprint;
    int adapterId;
    int[] tokens = new int[0];
    int tokenOffset;

    /**
     * Describes one block.
     *
     * @param hi              the block key's high half
     * @param lo              the block key's low half
     * @param parentHi        the parent block key's high half (ignored for a first block)
     * @param parentLo        the parent block key's low half (ignored for a first block)
     * @param first           whether the block is the first of its sequence (no parent; the salt counts instead)
     * @param saltFingerprint the sequence's salt fingerprint (counted for a first block only)
     * @param adapterId       the adapter the KV was computed with
     * @param tokens          holds the block's tokens from {@code tokenOffset} on (one block's worth)
     * @return this identity
     */
    public BlockIdentity set(
            long hi,
            long lo,
            long parentHi,
            long parentLo,
            boolean first,
            long saltFingerprint,
            int adapterId,
            int[] tokens,
            int tokenOffset) {
        this.hi = hi;
        this.lo = lo;
        this.parentHi = first ? 0 : parentHi;
        this.parentLo = first ? 0 : parentLo;
        this.first = first;
        this.saltFingerprint = first ? saltFingerprint : 0;
        this.adapterId = adapterId;
        this.tokens = tokens;
        this.tokenOffset = tokenOffset;
        return this;
    }
}
