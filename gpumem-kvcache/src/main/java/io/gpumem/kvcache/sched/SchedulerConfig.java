package io.gpumem.kvcache.sched;

import io.gpumem.kvcache.KvCacheException;
import io.gpumem.kvcache.manager.PreemptionMode;

/**
 * Continuous-batching settings.
 *
 * @param tokenBudget tokens computed per step over all requests (default 2048, vLLM's
 *        {@code max_num_batched_tokens}); prefills are chunked to fit
 * @param maxRunning most requests running at once (default 256, vLLM's {@code max_num_seqs})
 * @param preemption how victims give their blocks back (default recompute)
 * @param victimPolicy which running request is preempted (default FCFS)
 * @param lookahead speculative slots allocated per running request per step (default 0)
 */
public record SchedulerConfig(
        int tokenBudget, int maxRunning, PreemptionMode preemption, VictimPolicy victimPolicy, int lookahead) {
    public SchedulerConfig {
        if (tokenBudget <= 0) {
            throw new KvCacheException("SchedulerConfig: tokenBudget must be positive, got " + tokenBudget);
        }
        if (maxRunning <= 0) {
            throw new KvCacheException("SchedulerConfig: maxRunning must be positive, got " + maxRunning);
        }
        if (lookahead < 0) {
            throw new KvCacheException("SchedulerConfig: lookahead must not be negative, got " + lookahead);
        }
        if (preemption == null || victimPolicy == null) {
            throw new KvCacheException("SchedulerConfig: preemption and victimPolicy must be set");
        }
    }

    public static SchedulerConfig defaults() {
        return new SchedulerConfig(2048, 256, PreemptionMode.RECOMPUTE, VictimPolicy.FCFS, 0);
    }
}
