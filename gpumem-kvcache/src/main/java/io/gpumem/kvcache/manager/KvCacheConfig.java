package io.gpumem.kvcache.manager;

import io.gpumem.kvcache.KvCacheException;
import io.gpumem.kvcache.hash.HashAlgorithm;

/**
 * Behaviour settings of a {@link KvCacheManager}.
 *
 * @param prefixCaching cache full blocks for reuse across requests (default on, as vLLM v1)
 * @param hashAlgorithm block-key hash (default {@link HashAlgorithm#FAST128})
 * @param hashSeed seed of the root key (default 0: the same keys in every process)
 * @param watermark fraction of blocks that must stay free after admitting a waiting or preempted
 *        request (default 0 = off; never applied to the first request on an empty cache)
 * @param swapSpaceBytes host swap-space budget for swap preemption (default 0 = swap falls back to recompute)
 * @param hitRateWindow requests in the prefix hit-rate window (default 1000)
 */
public record KvCacheConfig(
        boolean prefixCaching,
        HashAlgorithm hashAlgorithm,
        long hashSeed,
        double watermark,
        long swapSpaceBytes,
        int hitRateWindow) {

    public KvCacheConfig {
        if (hashAlgorithm == null) {
            throw new KvCacheException("KvCacheConfig: hashAlgorithm must not be null");
        }
        if (!(watermark >= 0 && watermark < 1)) {
            throw new KvCacheException("KvCacheConfig: watermark must be in [0, 1), got " + watermark);
        }
        if (swapSpaceBytes < 0) {
            throw new KvCacheException("KvCacheConfig: swapSpaceBytes must not be negative, got " + swapSpaceBytes);
        }
        if (hitRateWindow <= 0) {
            throw new KvCacheException("KvCacheConfig: hitRateWindow must be positive, got " + hitRateWindow);
        }
    }

    public static KvCacheConfig defaults() {
        return new KvCacheConfig(true, HashAlgorithm.FAST128, 0L, 0.0, 0L, 1000);
    }

    public KvCacheConfig withPrefixCaching(boolean v) {
        return new KvCacheConfig(v, hashAlgorithm, hashSeed, watermark, swapSpaceBytes, hitRateWindow);
    }

    public KvCacheConfig withHashAlgorithm(HashAlgorithm v) {
        return new KvCacheConfig(prefixCaching, v, hashSeed, watermark, swapSpaceBytes, hitRateWindow);
    }

    public KvCacheConfig withWatermark(double v) {
        return new KvCacheConfig(prefixCaching, hashAlgorithm, hashSeed, v, swapSpaceBytes, hitRateWindow);
    }

    public KvCacheConfig withSwapSpaceBytes(long v) {
        return new KvCacheConfig(prefixCaching, hashAlgorithm, hashSeed, watermark, v, hitRateWindow);
    }
}
