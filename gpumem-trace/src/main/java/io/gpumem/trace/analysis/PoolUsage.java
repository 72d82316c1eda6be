package io.gpumem.trace.analysis;

import java.util.Locale;

/**
 * Byte accounting of one pool (or of both, {@code scope = "all"}) at the analysed moment, in
 * {@code memory_stats()} terms.
 *
 * @param scope          {@code "all"}, {@code "small_pool"} or {@code "large_pool"}
 * @param segments       number of (reported) segments
 * @param reserved       bytes in segments
 * @param allocated      bytes in allocated blocks
 * @param active         bytes in allocated or pending-free blocks
 * @param requested      unrounded bytes the callers asked for, over allocated blocks
 * @param inactiveSplit  free bytes in non-expandable segments that also hold an active block (pinned: {@code empty_cache} cannot return them)
 * @param cachedFree     bytes in inactive (free, reusable) blocks
 * @param releasable     bytes {@code empty_cache()} would return now: whole free segments, whole free pages of expandable segments
 * @param largestFree    the largest inactive block
 * @param freeBlocks     number of inactive blocks
 */
public record PoolUsage(
        String scope,
        int segments,
        long reserved,
        long allocated,
        long active,
        long requested,
        long inactiveSplit,
        long cachedFree,
        long releasable,
        long largestFree,
        int freeBlocks) {

    /** External fragmentation of the free space: 1 − largest free / total free (0 when nothing is free). */
    public double externalFragmentation() {
        return cachedFree == 0 ? 0.0 : 1.0 - (double) largestFree / cachedFree;
    }

    /** Reserved over allocated (1.0 when nothing is allocated and nothing reserved). */
    public double reservedPerAllocated() {
        if (allocated == 0) {
            return reserved == 0 ? 1.0 : Double.POSITIVE_INFINITY;
        }
        return (double) reserved / allocated;
    }

    /**
     * {@link #reservedPerAllocated} as every report prints it: three decimals, or {@code inf} where bytes are
     * reserved and none allocated (a cache holding only free segments, not a ratio of 0).
     */
    public String reservedPerAllocatedText() {
        double r = reservedPerAllocated();
        return Double.isInfinite(r) ? "inf" : String.format(Locale.ROOT, "%.3f", r);
    }

    /** Free cached bytes {@code empty_cache()} cannot return: held in segments (or pages) that live blocks share. */
    public long pinnedFree() {
        return cachedFree - releasable;
    }

    /** Reserved bytes not allocated: cached free blocks plus blocks waiting on events. */
    public long unallocated() {
        return reserved - allocated;
    }
}
