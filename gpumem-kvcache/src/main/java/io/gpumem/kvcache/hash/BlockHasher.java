package io.gpumem.kvcache.hash;

/**
 * Computes the chained 128-bit key of one full block of tokens for prefix caching:
 * {@code key(block i) = H(key(block i−1), tokens of block i, extra key)}, with {@link #rootHi()}/
 * {@link #rootLo()} standing in for the parent of block 0 (vLLM's {@code NONE_HASH}).
 *
 * <p>The key only finds candidates; the block pool verifies every candidate against the stored tokens
 * and the parent block before reporting a hit, so even a colliding hasher never produces a wrong hit.
 * Implementations write the result into a caller-supplied {@code long[2]} ({@code [0]} high,
 * {@code [1]} low) and allocate nothing per call. Instances are not thread-safe: one per cache manager.
 */
public interface BlockHasher {

    /**
     * Hashes {@code count} tokens starting at {@code offset}, chained to the parent key.
     *
     * @param extraKey adapter id and, on the first block only, the tenant salt fingerprint; 0 when none
     * @param out receives the key: {@code out[0]} high 64 bits, {@code out[1]} low 64 bits
     */
    void hash(long parentHi, long parentLo, int[] tokens, int offset, int count, long extraKey, long[] out);

    /** High half of the parent key used for the first block. */
    long rootHi();

    /** Low half of the parent key used for the first block. */
    long rootLo();

    /** The algorithm's name, for reports. */
    String name();

    /** Creates a hasher of the given algorithm; the seed fixes the root key (same seed ⇒ same keys). */
    static BlockHasher create(HashAlgorithm algorithm, long seed) {
        return switch (algorithm) {
            case FAST128 -> new Fast128Hasher(seed);
            case SHA256 -> new Sha256Hasher(seed);
        };
    }
}
