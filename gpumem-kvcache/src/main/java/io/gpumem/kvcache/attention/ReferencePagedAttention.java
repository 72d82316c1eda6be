package io.gpumem.kvcache.attention;

import io.gpumem.kvcache.KvCacheException;
import io.gpumem.kvcache.KvCacheSpec;
import io.gpumem.kvcache.memory.KvPages;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;

/**
 * A CPU reference of the paged-attention kernel, to prove block tables right with real bytes: one
 * decode query of {@code numHeads} heads attends over a sequence whose K/V live in scattered pages of
 * the cache (fp32, {@code elementSize} 4), with grouped-query attention ({@code numHeads} a multiple of
 * {@code kvHeads}).
 *
 * <p>Algorithm: scaled dot-product softmax attention. Pass one reads each block's page from the device
 * into a host scratch page and computes the logits of its tokens; the softmax uses the running maximum
 * for stability; pass two reads the pages again and accumulates the weighted values. The contiguous
 * variant ({@link #attendContiguous}) performs the same floating-point operations in the same order
 * over a contiguous {@code [token][kvHead][dim]} copy, so correct block tables give bit-identical results.
 */
public final class ReferencePagedAttention {
    private final KvPages pages;
    private final KvCacheSpec spec;
    private final MemorySegment page;
    private float[] logits = new float[64];

    public ReferencePagedAttention(KvPages pages) {
        this.pages = pages;
        this.spec = pages.spec();
        if (spec.elementSize() != Float.BYTES) {
            throw new KvCacheException(
                    "reference attention needs fp32 KV (elementSize 4), got elementSize " + spec.elementSize());
        }
        this.page = Arena.ofAuto().allocate(spec.pageBytes(), 64);
    }

    /**
     * Attention of {@code query} ({@code numHeads × headSize}) over tokens {@code [0, numTokens)} whose
     * blocks are {@code blockTable}; writes {@code numHeads × headSize} floats to {@code out}.
     */
    public void attend(int layer, int[] blockTable, int numTokens, float[] query, int numHeads, float[] out) {
        int bs = spec.blockSize();
        int kvHeads = spec.kvHeads();
        int d = spec.headSize();
        checkShape(numTokens, query, numHeads, out, kvHeads, d);
        if ((long) blockTable.length * bs < numTokens) {
            throw new KvCacheException(
                    "block table of " + blockTable.length + " blocks cannot hold " + numTokens + " tokens");
        }
        if (logits.length < numHeads * numTokens) {
            logits = new float[numHeads * numTokens];
        }
        int group = numHeads / kvHeads;
        float scale = (float) (1.0 / Math.sqrt(d));
        long vBase = (long) bs * kvHeads * d;
        for (int t0 = 0; t0 < numTokens; t0 += bs) {
            pages.readPage(layer, blockTable[t0 / bs], page);
            for (int t = t0; t < Math.min(numTokens, t0 + bs); t++) {
                long slotBase = (long) (t - t0) * kvHeads * d;
                for (int h = 0; h < numHeads; h++) {
                    long kOff = slotBase + (long) (h / group) * d;
                    float dot = 0f;
                    for (int i = 0; i < d; i++) {
                        dot += query[h * d + i] * page.getAtIndex(ValueLayout.JAVA_FLOAT, kOff + i);
                    }
                    logits[h * numTokens + t] = dot * scale;
                }
            }
        }
        softmax(logits, numHeads, numTokens);
        Arrays.fill(out, 0, numHeads * d, 0f);
        for (int t0 = 0; t0 < numTokens; t0 += bs) {
            pages.readPage(layer, blockTable[t0 / bs], page);
            for (int t = t0; t < Math.min(numTokens, t0 + bs); t++) {
                long slotBase = vBase + (long) (t - t0) * kvHeads * d;
                for (int h = 0; h < numHeads; h++) {
                    long vOff = slotBase + (long) (h / group) * d;
                    float w = logits[h * numTokens + t];
                    for (int i = 0; i < d; i++) {
                        out[h * d + i] += w * page.getAtIndex(ValueLayout.JAVA_FLOAT, vOff + i);
                    }
                }
            }
        }
    }

    /**
     * The same attention over contiguous keys and values laid out {@code [token][kvHead][dim]}.
     */
    public static void attendContiguous(
            float[] keys,
            float[] values,
            int numTokens,
            int kvHeads,
            int headSize,
            float[] query,
            int numHeads,
            float[] out) {
        int d = headSize;
        checkShape(numTokens, query, numHeads, out, kvHeads, d);
        float[] logits = new float[numHeads * numTokens];
        int group = numHeads / kvHeads;
        float scale = (float) (1.0 / Math.sqrt(d));
        for (int t = 0; t < numTokens; t++) {
            for (int h = 0; h < numHeads; h++) {
                int kOff = (t * kvHeads + h / group) * d;
                float dot = 0f;
                for (int i = 0; i < d; i++) {
                    dot += query[h * d + i] * keys[kOff + i];
                }
                logits[h * numTokens + t] = dot * scale;
            }
        }
        softmax(logits, numHeads, numTokens);
        Arrays.fill(out, 0, numHeads * d, 0f);
        for (int t = 0; t < numTokens; t++) {
            for (int h = 0; h < numHeads; h++) {
                int vOff = (t * kvHeads + h / group) * d;
                float w = logits[h * numTokens + t];
                for (int i = 0; i < d; i++) {
                    out[h * d + i] += w * values[vOff + i];
                }
            }
        }
    }

    private static void checkShape(int numTokens, float[] query, int numHeads, float[] out, int kvHeads, int d) {
        if (numTokens <= 0) {
            throw new KvCacheException("attention over " + numTokens + " tokens");
        }
        if (numHeads % kvHeads != 0) {
            throw new KvCacheException("numHeads " + numHeads + " is not a multiple of kvHeads " + kvHeads);
        }
        if (query.length < numHeads * d || out.length < numHeads * d) {
            throw new KvCacheException("query/out need " + numHeads * d + " floats");
        }
    }

    private static void softmax(float[] logits, int numHeads, int numTokens) {
        for (int h = 0; h < numHeads; h++) {
            int base = h * numTokens;
            float max = Float.NEGATIVE_INFINITY;
            for (int t = 0; t < numTokens; t++) {
                max = Math.max(max, logits[base + t]);
            }
            float sum = 0f;
            for (int t = 0; t < numTokens; t++) {
                float e = (float) Math.exp(logits[base + t] - max);
                logits[base + t] = e;
                sum += e;
            }
            for (int t = 0; t < numTokens; t++) {
                logits[base + t] /= sum;
            }
        }
    }
}
