package io.gpumem.kvcache.manager;

/**
 * An immutable snapshot of a {@link KvCacheManager}'s counters and gauges, taken by
 * {@link KvCacheManager#stats()} (as Caffeine's {@code CacheStats}: one value instead of many getters, so a
 * reader sees figures that belong to the same instant). Counters cover the manager's whole life; gauges
 * ({@code usage}, {@code liveRequests}, ...) are the state at the snapshot.
 *
 * @param usage vLLM's KV usage: referenced blocks / (N − 1); cached-idle blocks count as free
 * @param usageIncludingCached usage counting cached-idle blocks as used (prefix-cache residency)
 * @param prefixHitRateWindow hit tokens / queried tokens over the last {@code hitRateWindow} lookups of requests never
 *     preempted
 * @param prefixQueriedTokens tokens queried by the prefix lookups of requests never preempted (vLLM's
 *     {@code PrefixCacheStats.queries})
 * @param prefixHitTokens tokens those lookups found cached (device or a lower tier)
 * @param preemptedQueriedTokens tokens queried by the lookups of requests resumed after a preemption by recompute,
 *     kept apart as vLLM keeps them ({@code preempted_queries}): such a request mostly re-finds its own blocks
 * @param preemptedHitTokens tokens those lookups found cached ({@code preempted_hits})
 * @param recomputePreemptions preemptions by recompute (swap fallbacks included)
 * @param swapPreemptions preemptions by swap
 * @param swapFallbacks swap preemptions turned into recompute because the swap space was full
 * @param copyOnWriteBlocks blocks copied before a write into a shared block
 * @param swapInReusedBlocks blocks a swap-in took back from the prefix cache instead of copying them
 * @param refusedAllocations {@code allocateSlots}/{@code swapIn} calls answered "cannot"
 * @param liveRequests requests holding device blocks now
 * @param swappedRequests requests swapped out to the host now
 * @param evictions device cache entries evicted (lazily on reuse, or explicitly)
 * @param demotedBlocks evicted device blocks copied into the first lower tier's write queue (a block the tier
 *     holds or has queued already is not copied again, nor counted)
 * @param promotedBlocks blocks brought back from a lower tier into the device pool by a prefix lookup
 */
public record KvCacheStats(
        double usage,
        double usageIncludingCached,
        double prefixHitRateWindow,
        long prefixQueriedTokens,
        long prefixHitTokens,
        long preemptedQueriedTokens,
        long preemptedHitTokens,
        long recomputePreemptions,
        long swapPreemptions,
        long swapFallbacks,
        long copyOnWriteBlocks,
        long swapInReusedBlocks,
        long refusedAllocations,
        int liveRequests,
        int swappedRequests,
        long evictions,
        long demotedBlocks,
        long promotedBlocks) {

    /** Preemptions of either kind. */
    public long preemptions() {
        return recomputePreemptions + swapPreemptions;
    }

    /** Prefix hit rate over the manager's life: hit tokens / queried tokens (0 before any lookup). */
    public double prefixHitRate() {
        return prefixQueriedTokens == 0 ? 0 : (double) prefixHitTokens / prefixQueriedTokens;
    }
}
