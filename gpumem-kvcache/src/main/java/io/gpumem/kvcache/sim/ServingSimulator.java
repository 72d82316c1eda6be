package io.gpumem.kvcache.sim;

import io.gpumem.alloc.CachingAllocator;
import io.gpumem.device.Device;
import io.gpumem.kvcache.KvCacheSpec;
import io.gpumem.kvcache.manager.KvCacheManager;
import io.gpumem.kvcache.manager.KvRequest;
import io.gpumem.kvcache.memory.KvMemory;
import io.gpumem.kvcache.sched.Scheduler;
import io.gpumem.kvcache.tier.TierStats;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.PriorityQueue;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.function.IntFunction;

/**
 * A step-level simulation of an LLM server on the paged KV cache: requests arrive (seeded Poisson),
 * a {@link Scheduler} batches them under a token budget, every scheduled token is "computed" (the
 * computed count advances; no model runs), a request that caught up samples a token (seeded), and
 * a request with all its output is freed. Chat turns that finish schedule the conversation's next turn,
 * whose prompt is the whole history plus a new user message, so it can re-hit the cache.
 *
 * <p>Measured per step after execution: allocated slots (distinct referenced blocks × block size) and
 * live tokens (computed tokens in them, shared blocks once) for KV waste; usage; the step's simulated
 * duration ({@link TimeModel}); and the wall time spent in the KV-cache manager and scheduler (the only
 * non-deterministic figure).
 *
 * <p>With several instances (each its own manager, device pool and tiers, sharing only the remote
 * store) arrivals are dealt round-robin in arrival order, every turn of a chat separately, so a
 * conversation's next turn usually lands on another instance; instances step in lock step, instance 0
 * first, so the run stays deterministic. Arrivals are counted in steps, as with one instance.
 */
public final class ServingSimulator {
    /**
     * Most instances one run simulates: each holds its own pool, device and tiers in this JVM (about half a MiB of
     * heap each at the default geometry), and a fleet larger than this is not what the lock-step model is for.
     */
    public static final int MAX_INSTANCES = 1024;

    /** A conversation turn waiting for its arrival step (a class: a record would compare the prompt by identity). */
    private static final class WaitingTurn {
        final long arrival;
        final long order;
        final int[] prompt;
        final int turnsLeft;

        WaitingTurn(long arrival, long order, int[] prompt, int turnsLeft) {
            this.arrival = arrival;
            this.order = order;
            this.prompt = prompt;
            this.turnsLeft = turnsLeft;
        }
    }

    private ServingSimulator() {}

    /** Runs the simulation with the KV memory taken from {@code memory} (its device must hold the cache). */
    public static SimReport run(SimConfig config, KvMemory memory) {
        return run(config, TierSettings.NONE, TimeModel.defaults(), 1, i -> memory);
    }

    /** Bytes of device memory the cache of {@code config} needs (all layers). */
    public static long deviceBytes(SimConfig config) {
        return config.spec().layerBytes() * config.spec().layers();
    }

    /** Runs with the KV regions taken from a {@link CachingAllocator} on {@code device} (the default set-up). */
    public static SimReport run(SimConfig config, Device device) {
        return run(config, KvMemory.cachingAllocator(new CachingAllocator(device)));
    }

    /**
     * Runs {@code instances} serving instances over one workload, instance {@code i} taking its KV memory
     * from {@code memory.apply(i)} and its tiers from {@code tiers}. With one instance the report is that
     * instance's; with several it is the total, and {@link SimReport#instances()} holds each one's.
     */
    public static SimReport run(
            SimConfig config, TierSettings tiers, TimeModel time, int instances, IntFunction<KvMemory> memory) {
        return run(config, tiers, time, instances, memory, SimObserver.NONE);
    }

    /**
     * As {@link #run(SimConfig, TierSettings, TimeModel, int, IntFunction)}, telling {@code observer} about each
     * instance's manager and every step.
     */
    public static SimReport run(
            SimConfig config,
            TierSettings tiers,
            TimeModel time,
            int instances,
            IntFunction<KvMemory> memory,
            SimObserver observer) {
        KvCacheSpec spec = config.spec();
        if (instances <= 0 || instances > MAX_INSTANCES) {
            throw new IllegalArgumentException("instances must be in 1.." + MAX_INSTANCES + ", got " + instances);
        }
        Set<Long> everComputed = new HashSet<>();
        List<SimInstance> list = new ArrayList<>();
        try {
            for (int i = 0; i < instances; i++) {
                KvCacheManager manager = new KvCacheManager(
                        spec,
                        memory.apply(i),
                        config.cache(),
                        // tiers keep prefix-cache blocks: without the cache none is built (no disk directory made)
                        tiers.any() && config.cache().prefixCaching() ? tiers.build(spec, config.cache(), i) : null);
                list.add(new SimInstance(
                        config, time, manager, new Scheduler(manager, config.scheduler()), everComputed));
                observer.started(i, manager);
            }
            long notArrived = simulate(config, list, observer);
            if (instances == 1) {
                return list.getFirst().report(notArrived);
            }
            List<SimReport> each = new ArrayList<>();
            for (SimInstance inst : list) {
                each.add(inst.report(0));
            }
            return total(list, each, notArrived);
        } finally {
            for (SimInstance inst : list) {
                inst.close();
            }
        }
    }

    /** Runs the steps; returns the turns still to arrive when it stopped (only at {@link SimConfig#maxSteps}). */
    private static long simulate(SimConfig config, List<SimInstance> instances, SimObserver observer) {
        WorkloadGenerator gen = new WorkloadGenerator(config);
        PriorityQueue<WaitingTurn> arrivals = new PriorityQueue<>(
                (a, b) -> a.arrival != b.arrival ? Long.compare(a.arrival, b.arrival) : Long.compare(a.order, b.order));
        long order = 0;
        for (int i = 0; i < config.requests(); i++) {
            arrivals.add(new WaitingTurn(gen.nextArrival(), order++, null, gen.turns()));
        }
        long step = 0;
        long nextId = 0;
        int dealt = 0;
        while ((busy(instances) || !arrivals.isEmpty()) && step < config.maxSteps()) {
            while (!arrivals.isEmpty() && arrivals.peek().arrival <= step) {
                WaitingTurn p = arrivals.poll();
                int[] prompt = p.prompt != null ? p.prompt : gen.firstPrompt();
                KvRequest r = KvRequest.builder("r" + nextId++, prompt)
                        .arrival(step)
                        .priority(gen.priority(config.priorityLevels()))
                        .build();
                SimInstance inst = instances.get(dealt++ % instances.size());
                inst.admit(
                        r,
                        new SimInstance.Live(
                                gen.outputLength(prompt.length),
                                p.turnsLeft - 1,
                                new SplittableRandom(gen.requestSeed()),
                                inst.clockUs));
            }
            for (SimInstance inst : instances) {
                inst.step(step);
                for (KvRequest r : inst.done) {
                    SimInstance.Live l = inst.live.remove(r);
                    if (l.turnsLeft > 0) {
                        int[] history = new int[r.numTokens() + 1];
                        for (int i = 0; i < r.numTokens(); i++) {
                            history[i] = r.token(i);
                        }
                        history[r.numTokens()] = l.sampler.nextInt(WorkloadGenerator.VOCAB);
                        int[] user = gen.userMessage();
                        int len = Math.min(
                                history.length + user.length, config.spec().maxModelLen() - 2);
                        if (len > history.length) {
                            int[] prompt = Arrays.copyOf(history, len);
                            System.arraycopy(user, 0, prompt, history.length, len - history.length);
                            arrivals.add(new WaitingTurn(step + 1 + gen.thinkSteps(), order++, prompt, l.turnsLeft));
                        }
                    }
                }
            }
            observer.stepped(step);
            step++;
        }
        observer.finished(step);
        return arrivals.size();
    }

    private static boolean busy(List<SimInstance> instances) {
        for (SimInstance inst : instances) {
            if (inst.busy()) {
                return true;
            }
        }
        return false;
    }

    /** Sums (counts), weighted means (rates) and pooled percentiles over the instances. */
    private static SimReport total(List<SimInstance> instances, List<SimReport> each, long notArrived) {
        long finished = 0;
        long total = 0;
        long steps = 0;
        long computed = 0;
        long output = 0;
        long preemptions = 0;
        long recomputeP = 0;
        long swapP = 0;
        long cow = 0;
        long swapOut = 0;
        long swapIn = 0;
        long swapReused = 0;
        long recomputed = 0;
        long queried = 0;
        long hit = 0;
        long wasteSlots = 0;
        long allocated = 0;
        long contiguous = 0;
        long contiguousLive = 0;
        double usage = 0;
        double peak = 0;
        double running = 0;
        double window = 0;
        double poolNs = 0;
        double seconds = 0;
        int answered = 0;
        for (SimInstance inst : instances) {
            answered += inst.answered;
        }
        double[] ttft = new double[answered];
        int at = 0;
        for (int i = 0; i < instances.size(); i++) {
            SimInstance inst = instances.get(i);
            SimReport r = each.get(i);
            finished += r.requestsFinished();
            total += r.requestsTotal();
            steps = Math.max(steps, r.steps());
            computed += inst.computedTokens;
            output += r.outputTokens();
            preemptions += r.preemptions();
            recomputeP += r.recomputePreemptions();
            swapP += r.swapPreemptions();
            cow += r.copyOnWriteBlocks();
            swapOut += r.swapOutBytes();
            swapIn += r.swapInBytes();
            swapReused += r.swapInReusedBlocks();
            recomputed += r.timing().recomputedTokens();
            queried += r.timing().prefixQueriedTokens();
            hit += r.timing().prefixHitTokens();
            wasteSlots += inst.wasteSlots;
            allocated += inst.allocatedSlots;
            contiguous += inst.contiguousSlots;
            contiguousLive += inst.contiguousLive;
            usage += r.meanUsage() / instances.size();
            peak = Math.max(peak, r.peakUsage());
            running += r.meanRunning();
            window += r.prefixHitRateWindow() / instances.size();
            poolNs += r.poolNsPerStep();
            seconds = Math.max(seconds, r.timing().simulatedSeconds());
            System.arraycopy(inst.ttftUs, 0, ttft, at, inst.answered);
            at += inst.answered;
        }
        return new SimReport(
                finished,
                total,
                notArrived,
                steps,
                SimReport.ratio(computed, steps),
                output,
                preemptions,
                recomputeP,
                swapP,
                SimReport.ratio(hit, queried),
                window,
                SimReport.ratio(wasteSlots, allocated),
                SimReport.ratio(contiguous - contiguousLive, contiguous),
                usage,
                peak,
                running,
                cow,
                swapOut,
                swapIn,
                swapReused,
                poolNs,
                SimReport.Timing.of(seconds, ttft, output, recomputed, queried, hit),
                sumTiers(each),
                List.copyOf(each));
    }

    private static List<TierStats> sumTiers(List<SimReport> each) {
        Map<String, TierStats> sum = new LinkedHashMap<>();
        for (SimReport r : each) {
            for (TierStats t : r.tiers()) {
                sum.merge(
                        t.tier(),
                        t,
                        (a, b) -> new TierStats(
                                a.tier(),
                                a.hits() + b.hits(),
                                a.misses() + b.misses(),
                                a.bytesIn() + b.bytesIn(),
                                a.bytesOut() + b.bytesOut(),
                                a.stored() + b.stored(),
                                a.evicted() + b.evicted(),
                                a.dropped() + b.dropped(),
                                a.failed() + b.failed(),
                                a.corrupt() + b.corrupt(),
                                a.usedBytes() + b.usedBytes(),
                                a.capacityBytes() + b.capacityBytes()));
            }
        }
        return List.copyOf(sum.values());
    }
}
