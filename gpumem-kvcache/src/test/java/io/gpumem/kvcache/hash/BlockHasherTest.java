package io.gpumem.kvcache.hash;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.HashSet;
import java.util.Set;
import java.util.SplittableRandom;
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
        assertThat(key(a, a.rootHi(), a.rootLo(), java.util.Arrays.copyOf(t, BS - 1), 0))
                .isNotEqualTo(k);
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
}
