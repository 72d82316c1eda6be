package io.gpumem.kvcache.sim;

import io.gpumem.alloc.CachingAllocator;
import io.gpumem.device.Device;
import io.gpumem.kvcache.KvCacheSpec;
import io.gpumem.kvcache.manager.KvCacheConfig;
import io.gpumem.kvcache.manager.KvCacheManager;
import io.gpumem.kvcache.manager.KvCacheStats;
import io.gpumem.kvcache.manager.KvRequest;
import io.gpumem.kvcache.memory.KvMemory;
import io.gpumem.kvcache.sched.Scheduler;
import io.gpumem.kvcache.sched.SchedulerConfig;

import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.PriorityQueue;
import java.util.SplittableRandom;

/**
 * A step-level simulation of an LLM server on the paged KV cache: requests arrive (seeded Poisson),
 * a {@link Scheduler} batches them under a token budget, every scheduled token is "computed" (the
 * computed count advances; no model runs), a request that caught up samples a token (seeded), and
 * a request with all its output is freed. Chat turns that finish schedule the conversation's next turn,
 * whose prompt is the whole history plus a new user message, so it can re-hit the cache.
 *
 * <p>Measured per step after execution: allocated slots (distinct referenced blocks × block size) and
 * live tokens (computed tokens in them, shared blocks once) for KV waste; usage; and the wall time
 * spent in the KV-cache manager and scheduler (the only non-deterministic figure).
 */
public final class ServingSimulator {

    private static final class Pending {
        final long arrival;
        final long order;
        final int[] prompt;
        final int turnsLeft;

        Pending(long arrival, long order, int[] prompt, int turnsLeft) {
            this.arrival = arrival;
            this.order = order;
            this.prompt = prompt;
            this.turnsLeft = turnsLeft;
        }
    }

    private static final class Live {
        final int outputLength;
        final int turnsLeft;
        final SplittableRandom sampler;

        Live(int outputLength, int turnsLeft, SplittableRandom sampler) {
            this.outputLength = outputLength;
            this.turnsLeft = turnsLeft;
            this.sampler = sampler;
        }
    }

    private ServingSimulator() {
    }

    /** Runs the simulation with the KV memory taken from {@code memory} (its device must hold the cache). */
    public static SimReport run(SimConfig config, KvMemory memory) {
        return run(config, memory, SimObserver.NONE);
    }

    /** As {@link #run(SimConfig, KvMemory)}, telling {@code observer} about the manager and every step. */
    public static SimReport run(SimConfig config, KvMemory memory, SimObserver observer) {
        KvCacheSpec spec = KvCacheSpec.builder().layers(config.layers()).kvHeads(config.kvHeads())
                .headSize(config.headSize()).elementSize(2).blockSize(config.blockSize()).numBlocks(config.blocks())
                .maxModelLen(config.maxModelLen()).build();
        KvCacheConfig kvConfig = new KvCacheConfig(config.prefixCaching(), config.hashAlgorithm(), config.seed(),
                config.watermark(), config.swapSpaceBytes(), 1000);
        SchedulerConfig schedConfig = new SchedulerConfig(config.tokenBudget(), config.maxRunning(), config.preemption(),
                config.victimPolicy(), config.lookahead());
        if (!(config.arrivalRate() > 0)) {
            throw new IllegalArgumentException("arrival rate must be positive, got " + config.arrivalRate());
        }
        if (config.priorityLevels() <= 0) {
            throw new IllegalArgumentException("priority levels must be positive, got " + config.priorityLevels());
        }
        if (config.requests() <= 0) {
            throw new IllegalArgumentException("requests must be positive, got " + config.requests());
        }
        try (KvCacheManager manager = new KvCacheManager(spec, memory, kvConfig)) {
            observer.started(manager);
            return simulate(config, manager, new Scheduler(manager, schedConfig), observer);
        }
    }

    /** Bytes of device memory the cache of {@code config} needs (all layers). */
    public static long deviceBytes(SimConfig config) {
        return 2L * config.blockSize() * config.kvHeads() * config.headSize() * 2 * config.layers() * config.blocks();
    }

    /** Runs with the KV regions taken from a {@link CachingAllocator} on {@code device} (the default set-up). */
    public static SimReport run(SimConfig config, Device device) {
        return run(config, KvMemory.cachingAllocator(new CachingAllocator(device)));
    }

    private static SimReport simulate(SimConfig config, KvCacheManager manager, Scheduler scheduler,
                                      SimObserver observer) {
        WorkloadGenerator gen = new WorkloadGenerator(config);
        PriorityQueue<Pending> arrivals = new PriorityQueue<>((a, b) -> a.arrival != b.arrival
                ? Long.compare(a.arrival, b.arrival) : Long.compare(a.order, b.order));
        long order = 0;
        for (int i = 0; i < config.requests(); i++) {
            arrivals.add(new Pending(gen.nextArrival(), order++, null, gen.turns()));
        }
        Map<KvRequest, Live> live = new IdentityHashMap<>();
        List<KvRequest> done = new ArrayList<>();
        int numBlocks = config.blocks();
        int bs = config.blockSize();
        long[] stamp = new long[numBlocks];
        int[] fill = new int[numBlocks];
        long finished = 0;
        long total = 0;
        long step = 0;
        long computedTokens = 0;
        long outputTokens = 0;
        long poolNs = 0;
        long wasteSlots = 0;
        long allocatedSlots = 0;
        long contiguousSlots = 0;
        long contiguousLive = 0;
        double usageSum = 0;
        double peakUsage = 0;
        long runningSum = 0;
        long nextId = 0;
        while ((finished < total || !arrivals.isEmpty()) && step < config.maxSteps()) {
            while (!arrivals.isEmpty() && arrivals.peek().arrival <= step) {
                Pending p = arrivals.poll();
                int[] prompt = p.prompt != null ? p.prompt : gen.firstPrompt();
                KvRequest r = KvRequest.builder("r" + nextId++, prompt).arrival(step)
                        .priority(gen.priority(config.priorityLevels())).build();
                live.put(r, new Live(gen.outputLength(prompt.length), p.turnsLeft - 1, new SplittableRandom(gen.requestSeed())));
                scheduler.add(r);
                total++;
            }
            long t0 = System.nanoTime();
            int batch = scheduler.schedule();
            poolNs += System.nanoTime() - t0;
            done.clear();
            for (int i = 0; i < batch; i++) {
                KvRequest r = scheduler.batchRequest(i);
                int n = scheduler.batchTokens(i);
                r.advanceComputed(n);
                computedTokens += n;
                if (r.numComputed() == r.numTokens()) {
                    Live l = live.get(r);
                    outputTokens++;
                    if (r.numOutputTokens() + 1 >= l.outputLength) {
                        done.add(r);
                    } else {
                        r.appendToken(l.sampler.nextInt(WorkloadGenerator.VOCAB));
                    }
                }
            }
            // waste and usage, measured after the step's tokens are computed and before finished ones leave
            long slots = 0;
            long liveTokens = 0;
            for (KvRequest r : scheduler.running()) {
                contiguousSlots += config.maxModelLen();
                contiguousLive += r.numComputed();
                for (int j = 0; j < r.numBlocks(); j++) {
                    int b = r.block(j);
                    int f = Math.max(0, Math.min(bs, r.numComputed() - j * bs));
                    if (stamp[b] != step + 1) {
                        stamp[b] = step + 1;
                        fill[b] = f;
                        slots += bs;
                        liveTokens += f;
                    } else if (f > fill[b]) {
                        liveTokens += f - fill[b];
                        fill[b] = f;
                    }
                }
            }
            allocatedSlots += slots;
            wasteSlots += slots - liveTokens;
            double usage = manager.pool().usage();
            usageSum += usage;
            peakUsage = Math.max(peakUsage, usage);
            runningSum += scheduler.runningCount();
            t0 = System.nanoTime();
            for (KvRequest r : done) {
                scheduler.finish(r);
            }
            poolNs += System.nanoTime() - t0;
            for (KvRequest r : done) {
                Live l = live.remove(r);
                finished++;
                if (l.turnsLeft > 0) {
                    int[] history = new int[r.numTokens() + 1];
                    for (int i = 0; i < r.numTokens(); i++) {
                        history[i] = r.token(i);
                    }
                    history[r.numTokens()] = l.sampler.nextInt(WorkloadGenerator.VOCAB);
                    int[] user = gen.userMessage();
                    int len = Math.min(history.length + user.length, config.maxModelLen() - 2);
                    if (len > history.length) {
                        int[] prompt = java.util.Arrays.copyOf(history, len);
                        System.arraycopy(user, 0, prompt, history.length, len - history.length);
                        arrivals.add(new Pending(step + 1 + gen.thinkSteps(), order++, prompt, l.turnsLeft));
                    }
                }
            }
            observer.stepped(step, manager);
            step++;
        }
        observer.finished(step, manager);
        KvCacheStats stats = manager.stats();
        return new SimReport(finished, total, step, step == 0 ? 0 : (double) computedTokens / step, outputTokens,
                stats.preemptions(), stats.recomputePreemptions(), stats.swapPreemptions(), stats.prefixHitRate(),
                stats.prefixHitRateWindow(), allocatedSlots == 0 ? 0 : (double) wasteSlots / allocatedSlots,
                contiguousSlots == 0 ? 0 : (double) (contiguousSlots - contiguousLive) / contiguousSlots,
                step == 0 ? 0 : usageSum / step, peakUsage, step == 0 ? 0 : (double) runningSum / step,
                stats.copyOnWriteBlocks(), manager.swapSpace().swappedOutBytes(), manager.swapSpace().swappedInBytes(),
                stats.swapInReusedBlocks(), step == 0 ? 0 : (double) poolNs / step);
    }
}
