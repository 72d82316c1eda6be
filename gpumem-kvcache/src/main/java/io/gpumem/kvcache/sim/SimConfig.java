package io.gpumem.kvcache.sim;

import io.gpumem.kvcache.hash.HashAlgorithm;
import io.gpumem.kvcache.manager.PreemptionMode;
import io.gpumem.kvcache.sched.VictimPolicy;

/**
 * Settings of one simulated serving run; {@link #defaults()} lists the documented defaults.
 *
 * @param workload request mix
 * @param seed seed of every random choice (same seed, same run)
 * @param requests requests to generate (conversations for {@code chat})
 * @param arrivalRate mean arrivals per step (Poisson)
 * @param blocks KV blocks including the null block
 * @param blockSize tokens per block
 * @param prefixCaching prefix caching on or off
 * @param preemption recompute or swap
 * @param victimPolicy which request is preempted
 * @param tokenBudget tokens computed per step
 * @param maxRunning most running requests
 * @param lookahead speculative slots per running request per step
 * @param maxModelLen longest sequence (prompt + output)
 * @param watermark admission watermark fraction (0 = off)
 * @param swapSpaceBytes host-tier bytes for swap preemption
 * @param prefixTokens shared prefix length for {@code shared-prefix}
 * @param hashAlgorithm block hash
 * @param layers model layers (KV geometry of the simulated device memory)
 * @param kvHeads KV heads
 * @param headSize head dimension
 * @param maxSteps stop after this many steps even if requests remain
 * @param priorityLevels requests get a priority drawn uniformly from {@code 0 .. priorityLevels−1}
 *        (smaller = more important; 1 = everyone equal)
 */
public record SimConfig(Workload workload, long seed, int requests, double arrivalRate, int blocks, int blockSize,
                        boolean prefixCaching, PreemptionMode preemption, VictimPolicy victimPolicy, int tokenBudget,
                        int maxRunning, int lookahead, int maxModelLen, double watermark, long swapSpaceBytes,
                        int prefixTokens, HashAlgorithm hashAlgorithm, int layers, int kvHeads, int headSize,
                        long maxSteps, int priorityLevels) {

    public static SimConfig defaults() {
        return new SimConfig(Workload.SHAREGPT, 1L, 1000, 0.2, 4096, 16, true, PreemptionMode.RECOMPUTE,
                VictimPolicy.FCFS, 2048, 256, 0, 2048, 0.0, 64L << 20, 341, HashAlgorithm.FAST128, 2, 2, 16, 2_000_000L, 1);
    }

    public SimConfig withWorkload(Workload v) {
        return new SimConfig(v, seed, requests, arrivalRate, blocks, blockSize, prefixCaching, preemption, victimPolicy,
                tokenBudget, maxRunning, lookahead, maxModelLen, watermark, swapSpaceBytes, prefixTokens, hashAlgorithm,
                layers, kvHeads, headSize, maxSteps, priorityLevels);
    }

    public SimConfig withSeed(long v) {
        return new SimConfig(workload, v, requests, arrivalRate, blocks, blockSize, prefixCaching, preemption, victimPolicy,
                tokenBudget, maxRunning, lookahead, maxModelLen, watermark, swapSpaceBytes, prefixTokens, hashAlgorithm,
                layers, kvHeads, headSize, maxSteps, priorityLevels);
    }

    public SimConfig withRequests(int v) {
        return new SimConfig(workload, seed, v, arrivalRate, blocks, blockSize, prefixCaching, preemption, victimPolicy,
                tokenBudget, maxRunning, lookahead, maxModelLen, watermark, swapSpaceBytes, prefixTokens, hashAlgorithm,
                layers, kvHeads, headSize, maxSteps, priorityLevels);
    }

    public SimConfig withBlocks(int v) {
        return new SimConfig(workload, seed, requests, arrivalRate, v, blockSize, prefixCaching, preemption, victimPolicy,
                tokenBudget, maxRunning, lookahead, maxModelLen, watermark, swapSpaceBytes, prefixTokens, hashAlgorithm,
                layers, kvHeads, headSize, maxSteps, priorityLevels);
    }

    public SimConfig withPrefixCaching(boolean v) {
        return new SimConfig(workload, seed, requests, arrivalRate, blocks, blockSize, v, preemption, victimPolicy,
                tokenBudget, maxRunning, lookahead, maxModelLen, watermark, swapSpaceBytes, prefixTokens, hashAlgorithm,
                layers, kvHeads, headSize, maxSteps, priorityLevels);
    }

    public SimConfig withPreemption(PreemptionMode v) {
        return new SimConfig(workload, seed, requests, arrivalRate, blocks, blockSize, prefixCaching, v, victimPolicy,
                tokenBudget, maxRunning, lookahead, maxModelLen, watermark, swapSpaceBytes, prefixTokens, hashAlgorithm,
                layers, kvHeads, headSize, maxSteps, priorityLevels);
    }

    public SimConfig withWatermark(double v) {
        return new SimConfig(workload, seed, requests, arrivalRate, blocks, blockSize, prefixCaching, preemption, victimPolicy,
                tokenBudget, maxRunning, lookahead, maxModelLen, v, swapSpaceBytes, prefixTokens, hashAlgorithm,
                layers, kvHeads, headSize, maxSteps, priorityLevels);
    }
}
