package io.gpumem.kvcache.attention;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.kvcache.manager.KvCacheManager;
import io.gpumem.kvcache.manager.KvRequest;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.SplittableRandom;

/**
 * The toy model shared by the paged-attention equality tests: K/V of a position depend on the whole
 * prefix up to it and the layer; {@link #compute} writes only the tokens the cache says must be computed,
 * and {@link #assertAttentionMatches} compares attention over the paged cache with attention over a
 * contiguous copy built from scratch, bit for bit.
 */
abstract class ToyModelAttention {
    static final int LAYERS = 2;
    static final int KV_HEADS = 2;
    static final int HEADS = 4;
    static final int HEAD = 8;
    static final int BS = 4;

    final long seed = 0x5EEDL;
    final Arena arena = Arena.ofAuto();
    final MemorySegment k = arena.allocate((long) KV_HEADS * HEAD * 4, 8);
    final MemorySegment v = arena.allocate((long) KV_HEADS * HEAD * 4, 8);

    /** The toy model: K (or V) of a position as a function of the prefix key up to it and the layer. */
    float[] kv(long prefixKey, int layer, boolean value) {
        SplittableRandom r = new SplittableRandom(prefixKey * 31 + 2L * layer + (value ? 1 : 0) + seed);
        float[] out = new float[KV_HEADS * HEAD];
        for (int i = 0; i < out.length; i++) {
            out[i] = (float) (r.nextDouble() * 2 - 1);
        }
        return out;
    }

    static long prefixKey(KvRequest r, int position) {
        long h = 17;
        for (int i = 0; i <= position; i++) {
            h = (h ^ r.token(i)) * 0x100000001B3L;
        }
        return h;
    }

    /** Computes tokens [numComputed, numComputed + n): writes their K/V into the request's blocks. */
    void compute(KvCacheManager m, KvRequest r, int n) {
        for (int p = r.numComputed(); p < r.numComputed() + n; p++) {
            long key = prefixKey(r, p);
            for (int layer = 0; layer < LAYERS; layer++) {
                MemorySegment.copy(kv(key, layer, false), 0, k, ValueLayout.JAVA_FLOAT, 0, KV_HEADS * HEAD);
                MemorySegment.copy(kv(key, layer, true), 0, v, ValueLayout.JAVA_FLOAT, 0, KV_HEADS * HEAD);
                m.pages().writeSlot(layer, r.block(p / BS), p % BS, k, v);
            }
        }
        r.advanceComputed(n);
    }

    /** Prefix lookup, allocation and prefill of a waiting or preempted request. */
    void admit(KvCacheManager m, KvRequest r) {
        int hit = m.lookupCachedTokens(r);
        assertThat(m.allocateSlots(r, r.numTokens() - hit, 0)).isTrue();
        compute(m, r, r.numTokens() - r.numComputed());
    }

    /** One decode step: sample a token, make room, compute it. */
    void decode(KvCacheManager m, KvRequest r, int token) {
        r.appendToken(token);
        assertThat(m.allocateSlots(r, 1, 0)).isTrue();
        compute(m, r, 1);
    }

    void assertAttentionMatches(KvCacheManager m, KvRequest r) {
        int n = r.numComputed();
        float[] keys = new float[n * KV_HEADS * HEAD];
        float[] values = new float[n * KV_HEADS * HEAD];
        ReferencePagedAttention paged = new ReferencePagedAttention(m.pages());
        SplittableRandom q = new SplittableRandom(seed + n);
        for (int layer = 0; layer < LAYERS; layer++) {
            for (int p = 0; p < n; p++) {
                long key = prefixKey(r, p);
                System.arraycopy(kv(key, layer, false), 0, keys, p * KV_HEADS * HEAD, KV_HEADS * HEAD);
                System.arraycopy(kv(key, layer, true), 0, values, p * KV_HEADS * HEAD, KV_HEADS * HEAD);
            }
            float[] query = new float[HEADS * HEAD];
            for (int i = 0; i < query.length; i++) {
                query[i] = (float) q.nextGaussian();
            }
            float[] expected = new float[HEADS * HEAD];
            float[] actual = new float[HEADS * HEAD];
            ReferencePagedAttention.attendContiguous(keys, values, n, KV_HEADS, HEAD, query, HEADS, expected);
            paged.attend(layer, r.blockTable(), n, query, HEADS, actual);
            assertThat(actual)
                    .as("request %s layer %d over %d tokens", r.id(), layer, n)
                    .containsExactly(expected);
        }
    }

    static int[] tokens(SplittableRandom r, int n) {
        int[] t = new int[n];
        for (int i = 0; i < n; i++) {
            t[i] = r.nextInt(1000);
        }
        return t;
    }

    static int[] concat(int[] a, int[] b) {
        int[] out = java.util.Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, out, a.length, b.length);
        return out;
    }
}
