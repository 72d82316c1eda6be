package io.gpumem.kvcache.sim;

import io.gpumem.kvcache.tier.TierStats;
import java.util.Arrays;
import java.util.List;

/**
 * Figures of one simulated run. Rates and waste are fractions in [0, 1].
 *
 * @param requestsFinished requests (chat: turns) that produced all their output
 * @param requestsTotal requests that arrived (chat: turns)
 * @param requestsNotArrived requests (chat: turns) still to arrive when the run stopped: only {@code --max-steps}
 *        ({@link SimConfig#maxSteps}) stops a run before every arrival; 0 in each instance's own report of a
 *        several-instance run, whose arrivals are dealt from one queue (the total carries them)
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
 * @param swapOutBytes bytes copied to the host swap space
 * @param swapInBytes bytes copied back from the host swap space
 * @param swapInReusedBlocks blocks a swap-in took back from the prefix cache instead of copying
 * @param poolNsPerStep nanoseconds per step spent in the KV-cache manager (scheduling, allocation, freeing); varies between runs
 * @param timing figures of the {@link TimeModel}'s simulated clock
 * @param tiers per lower tier (host, disk, remote) counters; summed over instances in a total
 * @param instances one report per instance when several ran (empty otherwise)
 */
public record SimReport(
        long requestsFinished,
        long requestsTotal,
        long requestsNotArrived,
        long steps,
        double tokensPerStep,
        long outputTokens,
        long preemptions,
        long recomputePreemptions,
        long swapPreemptions,
        double prefixHitRate,
        double prefixHitRateWindow,
        double kvWaste,
        double contiguousWaste,
        double meanUsage,
        double peakUsage,
        double meanRunning,
        long copyOnWriteBlocks,
        long swapOutBytes,
        long swapInBytes,
        long swapInReusedBlocks,
        double poolNsPerStep,
        Timing timing,
        List<TierStats> tiers,
        List<SimReport> instances) {

    /** Whether the run served its whole workload: every request arrived and produced all its output. */
    public boolean servedEverything() {
        return requestsFinished == requestsTotal && requestsNotArrived == 0;
    }

    /**
     * Simulated-time figures.
     *
     * @param simulatedSeconds the instance's clock at the end (the slowest instance's, for a total)
     * @param ttftMsMean mean time to first token, arrival to first sampled token, in ms
     * @param ttftMsP50 median of it (nearest rank)
     * @param ttftMsP99 99th percentile of it (nearest rank)
     * @param outputTokensPerSecond sampled tokens per simulated second (all instances together for a total)
     * @param recomputedTokens tokens of full blocks computed again although some instance had computed the
     *        same prefix before (re-prefill after a miss or a preemption)
     * @param prefixQueriedTokens prompt tokens looked up in the prefix cache
     * @param prefixHitTokens tokens those lookups found (device or a tier)
     */
    public record Timing(
            double simulatedSeconds,
            double ttftMsMean,
            double ttftMsP50,
            double ttftMsP99,
            double outputTokensPerSecond,
            long recomputedTokens,
            long prefixQueriedTokens,
            long prefixHitTokens) {

        /**
         * The figures of a run (one instance's, or all of them pooled) from its times to first token.
         *
         * @param ttftUs every answered request's time to first token in simulated µs, in any order; sorted in place
         */
        static Timing of(
                double simulatedSeconds,
                double[] ttftUs,
                long outputTokens,
                long recomputedTokens,
                long prefixQueriedTokens,
                long prefixHitTokens) {
            Arrays.sort(ttftUs);
            double mean = 0;
            for (double t : ttftUs) {
                mean += t;
            }
            mean = ratio(mean, ttftUs.length);
            return new Timing(
                    simulatedSeconds,
                    mean / 1e3,
                    percentile(ttftUs, 0.50) / 1e3,
                    percentile(ttftUs, 0.99) / 1e3,
                    ratio((double) outputTokens, simulatedSeconds),
                    recomputedTokens,
                    prefixQueriedTokens,
                    prefixHitTokens);
        }

        /** Nearest-rank percentile of sorted values (0 when empty). */
        private static double percentile(double[] sorted, double p) {
            if (sorted.length == 0) {
                return 0;
            }
            int rank = (int) Math.ceil(p * sorted.length);
            return sorted[Math.max(0, Math.min(sorted.length, rank) - 1)];
        }
    }

    /** {@code part / whole} as a rate or mean of the report, 0 when nothing was counted ({@code whole} 0). */
    static double ratio(double part, double whole) {
        return whole == 0 ? 0 : part / whole;
    }

    /** {@link #ratio(double, double)} of two counts, converted to double on purpose. */
    static double ratio(long part, long whole) {
        return ratio((double) part, (double) whole);
    }
}
