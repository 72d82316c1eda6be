package io.gpumem.kvcache.sim;

/**
 * Figures of one simulated run. Rates and waste are fractions in [0, 1].
 *
 * @param requestsFinished requests (chat: turns) that produced all their output
 * @param requestsTotal requests generated (chat: turns generated)
 * @param steps engine steps simulated
 * @param tokensPerStep computed tokens (prefill + decode) per step
 * @param outputTokens tokens sampled
 * @param preemptions preemptions of any kind
 * @param recomputePreemptions preemptions by recompute (including swap fallbacks)
 * @param swapPreemptions preemptions by swap
 * @param prefixHitRate prefix-hit tokens / queried prompt tokens over the whole run
 * @param prefixHitRateWindow the same over the last 1,000 lookups (vLLM's metric)
 * @param kvWaste (allocated slots − live tokens) / allocated slots, summed over steps; shared blocks counted once
 * @param contiguousWaste the same for the pre-paging baseline measured in the same run: every running request
 *        reserving {@code maxModelLen} contiguous slots, nothing shared
 * @param meanUsage mean vLLM usage (referenced blocks / usable blocks) over steps
 * @param peakUsage highest usage
 * @param meanRunning mean running requests per step
 * @param copyOnWriteBlocks blocks copied by copy-on-write
 * @param swapOutBytes bytes copied to the host tier
 * @param swapInBytes bytes copied back from the host tier
 * @param swapInReusedBlocks blocks a swap-in took back from the prefix cache instead of copying
 * @param poolNsPerStep nanoseconds per step spent in the KV-cache manager (scheduling, allocation, freeing); varies between runs
 */
public record SimReport(long requestsFinished, long requestsTotal, long steps, double tokensPerStep, long outputTokens,
                        long preemptions, long recomputePreemptions, long swapPreemptions, double prefixHitRate,
                        double prefixHitRateWindow, double kvWaste, double contiguousWaste, double meanUsage, double peakUsage,
                        double meanRunning, long copyOnWriteBlocks, long swapOutBytes, long swapInBytes,
                        long swapInReusedBlocks, double poolNsPerStep) {
}
