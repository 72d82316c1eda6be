package io.gpumem.kvcache.hash;

/**
 * Default block hasher: two 64-bit lanes, each absorbing two tokens (one 64-bit word) per round with a
 * multiply, rotate and multiply by distinct odd constants, the lanes cross-feeding every round so a
 * change in any token reaches both halves; a final avalanche (xor-shift-multiply, as in SplitMix64's
 * finalizer) mixes the lanes with the token count. The parent key seeds the lanes, which makes the
 * key chained. Cost is about one nanosecond per token; it is not collision-resistant against an
 * adversary, which is why the pool verifies tokens and the parent block on every hit.
 */
final class Fast128Hasher extends SeededHasher {
    private static final long M1 = 0x9E3779B97F4A7C15L;
    private static final long M2 = 0xC2B2AE3D27D4EB4FL;
    private static final long M3 = 0x165667B19E3779F9L;
    private static final long M4 = 0xD6E8FEB86659FD93L;

    Fast128Hasher(long seed) {
        super("fast128");
        root(avalanche(seed ^ M1), avalanche(seed + M3));
    }

    @Override
    public void hash(long parentHi, long parentLo, int[] tokens, int offset, int count, long extraKey, long[] out) {
        long h1 = parentHi ^ (extraKey * M2);
        long h2 = parentLo ^ Long.rotateLeft(extraKey * M4, 17);
        int i = offset;
        int end = offset + count;
        for (; i + 1 < end; i += 2) {
            long k = (tokens[i] & 0xFFFF_FFFFL) | ((long) tokens[i + 1] << 32);
            h1 = Long.rotateLeft(h1 ^ (k * M1), 29) * M2;
            h2 = Long.rotateLeft(h2 ^ (k * M3), 31) * M4;
            h1 += h2;
            h2 ^= h1 >>> 23;
        }
        if (i < end) {
            long k = tokens[i] & 0xFFFF_FFFFL;
            h1 = Long.rotateLeft(h1 ^ (k * M1), 29) * M2;
            h2 = Long.rotateLeft(h2 ^ (k * M3), 31) * M4;
            h1 += h2;
        }
        h1 ^= count;
        h2 ^= (long) count << 32;
        h1 += h2;
        h2 += h1;
        h1 = avalanche(h1);
        h2 = avalanche(h2);
        h1 += h2;
        h2 += h1;
        out[0] = h1;
        out[1] = h2;
    }

    static long avalanche(long z) {
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        return z ^ (z >>> 31);
    }
}
