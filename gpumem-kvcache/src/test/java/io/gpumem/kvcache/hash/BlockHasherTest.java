package io.gpumem.kvcache.hash;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.security.MessageDigest;
import java.util.Arrays;
import java.util.HashSet;
import java.util.Set;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

class BlockHasherTest {
    private static final int BS = 16;

    private static long[] key(BlockHasher h, long parentHi, long parentLo, int[] tokens, long extra) {
        long[] out = new long[2];
        h.hash(parentHi, parentLo, tokens, 0, tokens.length, extra, out);
        return out;
    }

    private static int[] random(SplittableRandom r) {
        int[] t = new int[BS];
        for (int i = 0; i < BS; i++) {
            t[i] = r.nextInt(32_000);
        }
        return t;
    }

    @ParameterizedTest
    @EnumSource(HashAlgorithm.class)
    void keysAreDeterministicAndDependOnSeedParentTokensOrderAndExtraKey(HashAlgorithm algorithm) {
        long seed = 17;
        System.out.println("seed=" + seed);
        SplittableRandom r = new SplittableRandom(seed);
        BlockHasher a = BlockHasher.create(algorithm, 1);
        BlockHasher b = BlockHasher.create(algorithm, 1);
        BlockHasher other = BlockHasher.create(algorithm, 2);
        assertThat(a.rootHi()).isEqualTo(b.rootHi());
        assertThat(a.rootLo()).isEqualTo(b.rootLo());
        assertThat(new long[] {a.rootHi(), a.rootLo()}).isNotEqualTo(new long[] {other.rootHi(), other.rootLo()});
        int[] t = random(r);
        long[] k = key(a, a.rootHi(), a.rootLo(), t, 0);
        assertThat(key(b, a.rootHi(), a.rootLo(), t, 0)).containsExactly(k);
        assertThat(key(a, a.rootHi() + 1, a.rootLo(), t, 0)).isNotEqualTo(k);
        assertThat(key(a, a.rootHi(), a.rootLo(), t, 5)).isNotEqualTo(k);
        int[] swapped = t.clone();
        swapped[3] = t[4];
        swapped[4] = t[3];
        if (t[3] != t[4]) {
            assertThat(key(a, a.rootHi(), a.rootLo(), swapped, 0)).isNotEqualTo(k);
        }
        assertThat(key(a, a.rootHi(), a.rootLo(), Arrays.copyOf(t, BS - 1), 0)).isNotEqualTo(k);
    }

    @ParameterizedTest
    @EnumSource(HashAlgorithm.class)
    void oneTokenChangeFlipsAboutHalfOfTheBits(HashAlgorithm algorithm) {
        long seed = 23;
        System.out.println("seed=" + seed);
        SplittableRandom r = new SplittableRandom(seed);
        BlockHasher h = BlockHasher.create(algorithm, 0);
        long flipped = 0;
        int trials = 2000;
        for (int i = 0; i < trials; i++) {
            int[] t = random(r);
            long[] k1 = key(h, h.rootHi(), h.rootLo(), t, 0);
            t[r.nextInt(BS)] ^= 1 << r.nextInt(15);
            long[] k2 = key(h, h.rootHi(), h.rootLo(), t, 0);
            flipped += Long.bitCount(k1[0] ^ k2[0]) + Long.bitCount(k1[1] ^ k2[1]);
        }
        assertThat((double) flipped / trials).isBetween(62.0, 66.0);
    }

    @ParameterizedTest
    @EnumSource(HashAlgorithm.class)
    void noCollisionsAmongManyChainedBlocks(HashAlgorithm algorithm) {
        long seed = 29;
        System.out.println("seed=" + seed);
        SplittableRandom r = new SplittableRandom(seed);
        BlockHasher h = BlockHasher.create(algorithm, 0);
        Set<String> seen = new HashSet<>();
        int n = algorithm == HashAlgorithm.FAST128 ? 200_000 : 50_000;
        long[] parent = {h.rootHi(), h.rootLo()};
        for (int i = 0; i < n; i++) {
            // near-identical inputs: a counter in one token, the rest fixed, chained half of the time
            int[] t = new int[BS];
            t[i % BS] = i;
            long[] k = key(h, parent[0], parent[1], t, 0);
            assertThat(seen.add(k[0] + ":" + k[1]))
                    .as("collision at block %d", i)
                    .isTrue();
            if (r.nextBoolean()) {
                parent = k;
            }
        }
    }

    /**
     * The SHA-256 key against the encoding its class documents, written here with {@link ByteBuffer} and a fresh
     * digest: parent key, extra key and tokens little-endian, the key being the digest's first 128 bits read
     * little-endian; the root is the key of no tokens under (seed, ~seed).
     */
    @Test
    void sha256KeysAreTheDocumentedDigest() throws Exception {
        long seed = 0x5EED_0001L;
        System.out.println("seed=" + seed);
        SplittableRandom r = new SplittableRandom(seed);
        BlockHasher h = BlockHasher.create(HashAlgorithm.SHA256, seed);
        assertThat(new long[] {h.rootHi(), h.rootLo()}).containsExactly(sha256(seed, ~seed, new int[0], 0));
        for (int round = 0; round < 50; round++) {
            int[] tokens = new int[r.nextInt(1, 80)];
            for (int i = 0; i < tokens.length; i++) {
                tokens[i] = r.nextInt(); // negative ids too: every byte of the int counts
            }
            long hi = r.nextLong();
            long lo = r.nextLong();
            long extra = r.nextLong();
            int offset = r.nextInt(tokens.length);
            int count = tokens.length - offset;
            long[] out = new long[2];
            h.hash(hi, lo, tokens, offset, count, extra, out);
            assertThat(out)
                    .as("round %d", round)
                    .containsExactly(sha256(hi, lo, Arrays.copyOfRange(tokens, offset, tokens.length), extra));
        }
    }

    private static long[] sha256(long hi, long lo, int[] tokens, long extra) throws Exception {
        ByteBuffer in = ByteBuffer.allocate(24 + 4 * tokens.length).order(ByteOrder.LITTLE_ENDIAN);
        in.putLong(hi).putLong(lo).putLong(extra);
        for (int t : tokens) {
            in.putInt(t);
        }
        ByteBuffer digest = ByteBuffer.wrap(MessageDigest.getInstance("SHA-256").digest(in.array()))
                .order(ByteOrder.LITTLE_ENDIAN);
        return new long[] {digest.getLong(0), digest.getLong(8)};
    }
}
