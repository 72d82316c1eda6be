package io.gpumem.trace.analysis;

import io.gpumem.alloc.Pool;
import java.util.List;

/**
 * Everything {@link StateAnalyzer} found in one {@link MemoryState}.
 *
 * @param state      the analysed state
 * @param all        accounting over both pools
 * @param small      the small pool
 * @param large      the large pool
 * @param streamFree free space per (pool, stream), largest free block first
 * @param topWaste   the segments that waste most, most first
 * @param diagnosis  the verdict
 */
public record StateAnalysis(
        MemoryState state,
        PoolUsage all,
        PoolUsage small,
        PoolUsage large,
        List<StreamFree> streamFree,
        List<SegmentWaste> topWaste,
        Diagnosis diagnosis) {
    public StateAnalysis {
        streamFree = List.copyOf(streamFree);
        topWaste = List.copyOf(topWaste);
    }

    /** The accounting of one pool. */
    public PoolUsage pool(Pool pool) {
        return pool == Pool.SMALL ? small : large;
    }

    /** The largest cached free block of a (pool, stream) pair; 0 when it has none. */
    public long largestFree(Pool pool, long stream) {
        for (StreamFree f : streamFree) {
            if (f.pool() == pool && f.stream() == stream) {
                return f.largestFree();
            }
        }
        return 0;
    }
}
