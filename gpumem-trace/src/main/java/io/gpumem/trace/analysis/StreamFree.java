package io.gpumem.trace.analysis;

import io.gpumem.alloc.Pool;

/**
 * Free space of one (pool, stream) pair: a cached block only serves requests of its own pool and stream,
 * so the largest block here bounds the request this pair can serve without the driver.
 */
public record StreamFree(Pool pool, long stream, long largestFree, long totalFree, int freeBlocks) {
    /** 1 − largest / total over this pair's free blocks (0 when nothing is free). */
    public double externalFragmentation() {
        return totalFree == 0 ? 0.0 : 1.0 - (double) largestFree / totalFree;
    }
}
