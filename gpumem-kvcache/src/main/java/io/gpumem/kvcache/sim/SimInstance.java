package io.gpumem.kvcache.sim;

import io.gpumem.kvcache.manager.KvCacheManager;
import io.gpumem.kvcache.manager.KvCacheStats;
import io.gpumem.kvcache.manager.KvRequest;
import io.gpumem.kvcache.sched.Scheduler;
import io.gpumem.kvcache.tier.TierStats;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Set;
import java.util.SplittableRandom;

/**
 * One simulated serving instance: a KV-cache manager with its own device pool and tiers, its scheduler,
 * and the figures measured on it, including its simulated clock (advanced by the {@link TimeModel} once
 * per step). {@link ServingSimulator} drives several in lock step over one workload.
 */
final class SimInstance implements AutoCloseable {

    /** A request in flight and what the workload decided for it. */
    static final class Live {
        final int outputLength;
        final int turnsLeft;
        final SplittableRandom sampler;
        final double arrivalUs;
        boolean answered;
        long[] blockKeys = new long[0];
        int keyed;

        Live(int outputLength, int turnsLeft, SplittableRandom sampler, double arrivalUs) {
            this.outputLength = outputLength;
            this.turnsLeft = turnsLeft;
            this.sampler = sampler;
            this.arrivalUs = arrivalUs;
        }
    }

    final KvCacheManager manager;
    final Scheduler scheduler;
    private final SimConfig config;
    private final TimeModel time;
    private final Set<Long> everComputed;
    final IdentityHashMap<KvRequest, Live> live = new IdentityHashMap<>();
    final List<KvRequest> done = new ArrayList<>();
    private final long[] stamp;
    private final int[] fill;
    private final long[] lastTierHits;
    private final long[] lastTierLookups;
    private long lastSwapBytes;

    double clockUs;
    long finished;
    long total;
    long steps;
    long computedTokens;
    long outputTokens;
    long recomputedTokens;
    long poolNs;
    long wasteSlots;
    long allocatedSlots;
    long contiguousSlots;
    long contiguousLive;
    double usageSum;
    double peakUsage;
    long runningSum;
    double[] ttftUs = new double[64];
    int answered;

    SimInstance(SimConfig config, TimeModel time, KvCacheManager manager, Scheduler scheduler, Set<Long> everComputed) {
        this.config = config;
        this.time = time;
        this.manager = manager;
        this.scheduler = scheduler;
        this.everComputed = everComputed;
        this.stamp = new long[config.spec().numBlocks()];
        this.fill = new int[config.spec().numBlocks()];
        int tiers = manager.tierStats().size();
        this.lastTierHits = new long[tiers];
        this.lastTierLookups = new long[tiers];
    }

    void admit(KvRequest r, Live l) {
        live.put(r, l);
        scheduler.add(r);
        total++;
    }

    boolean busy() {
        return finished < total;
    }

    /**
     * Schedules and "computes" one step, measures it, advances the clock, pumps the tiers and leaves the
     * finished requests in {@link #done} (already freed).
     */
    void step(long step) {
        long t0 = System.nanoTime();
        int batch = scheduler.schedule();
        poolNs += System.nanoTime() - t0;
        done.clear();
        long prefill = 0;
        long decode = 0;
        long context = 0;
        List<KvRequest> firstTokens = new ArrayList<>();
        for (int i = 0; i < batch; i++) {
            KvRequest r = scheduler.batchRequest(i);
            int n = scheduler.batchTokens(i);
            Live l = live.get(r);
            countRecomputed(r, l, n);
            if (n == 1 && r.numOutputTokens() > 0 && r.numComputed() == r.numTokens() - 1) {
                decode++;
            } else {
                prefill += n;
            }
            r.advanceComputed(n);
            context += r.numComputed();
            computedTokens += n;
            if (r.numComputed() == r.numTokens()) {
                outputTokens++;
                if (!l.answered) {
                    l.answered = true;
                    firstTokens.add(r);
                }
                if (r.numOutputTokens() + 1 >= l.outputLength) {
                    done.add(r);
                } else {
                    r.appendToken(l.sampler.nextInt(WorkloadGenerator.VOCAB));
                }
            }
        }
        measure(step);
        clockUs += time.computeUs(prefill, decode, context) + transferUs();
        for (KvRequest r : firstTokens) {
            if (answered == ttftUs.length) {
                ttftUs = Arrays.copyOf(ttftUs, answered * 2);
            }
            ttftUs[answered++] = clockUs - live.get(r).arrivalUs;
        }
        t0 = System.nanoTime();
        for (KvRequest r : done) {
            scheduler.finish(r);
        }
        manager.pumpTiers();
        poolNs += System.nanoTime() - t0;
        finished += done.size();
        steps++;
    }

    /** Full blocks completed by this grant whose prefix some instance computed before count as recomputed. */
    private void countRecomputed(KvRequest r, Live l, int n) {
        int bs = config.spec().blockSize();
        int from = r.numComputed();
        int fullEnd = (from + n) / bs;
        if (l.blockKeys.length < fullEnd) {
            l.blockKeys = Arrays.copyOf(l.blockKeys, Math.max(fullEnd, l.blockKeys.length * 2));
        }
        for (int j = l.keyed; j < fullEnd; j++) {
            long h = j == 0 ? 0x9E3779B97F4A7C15L : l.blockKeys[j - 1];
            for (int t = j * bs; t < (j + 1) * bs; t++) {
                h = (h ^ r.token(t)) * 0x100000001B3L;
                h ^= h >>> 29;
            }
            l.blockKeys[j] = h;
        }
        l.keyed = Math.max(l.keyed, fullEnd);
        for (int j = from / bs; j < fullEnd; j++) { // (a block an earlier chunk began is completed here)
            if (!everComputed.add(l.blockKeys[j])) {
                recomputedTokens += bs;
            }
        }
    }

    /** Waste and usage, after the step's tokens are computed and before finished requests leave. */
    private void measure(long step) {
        int bs = config.spec().blockSize();
        long slots = 0;
        long liveTokens = 0;
        for (KvRequest r : scheduler.running()) {
            contiguousSlots += config.spec().maxModelLen();
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
    }

    /** Promotions and swaps of this step, timed by the model (tier counters are cumulative). */
    private double transferUs() {
        double us = 0;
        long tokensPerBlock = config.spec().blockSize();
        List<TierStats> tiers = manager.tierStats();
        for (int t = 0; t < tiers.size(); t++) {
            TierStats s = tiers.get(t);
            long hits = s.hits() - lastTierHits[t];
            long lookups = s.hits() + s.misses() - lastTierLookups[t];
            lastTierHits[t] = s.hits();
            lastTierLookups[t] = s.hits() + s.misses();
            // one round trip per step that asked the tier (lookups of a step are batched), plus the bytes
            us += time.transferUs(hits * tokensPerBlock, time.bandwidth(s.tier()))
                    + (lookups > 0 ? time.latency(s.tier()) : 0);
        }
        long swapBytes =
                manager.swapSpace().swappedOutBytes() + manager.swapSpace().swappedInBytes();
        long blockBytes = manager.spec().pageBytes() * manager.spec().layers();
        us += time.transferUs((swapBytes - lastSwapBytes) / blockBytes * tokensPerBlock, time.hostGBps());
        lastSwapBytes = swapBytes;
        return us;
    }

    /** This instance's figures; {@code notArrived}: requests still to arrive when the run stopped. */
    SimReport report(long notArrived) {
        KvCacheStats stats = manager.stats();
        return new SimReport(
                finished,
                total,
                notArrived,
                steps,
                SimReport.ratio(computedTokens, steps),
                outputTokens,
                stats.preemptions(),
                stats.recomputePreemptions(),
                stats.swapPreemptions(),
                stats.prefixHitRate(),
                stats.prefixHitRateWindow(),
                SimReport.ratio(wasteSlots, allocatedSlots),
                SimReport.ratio(contiguousSlots - contiguousLive, contiguousSlots),
                SimReport.ratio(usageSum, (double) steps),
                peakUsage,
                SimReport.ratio(runningSum, steps),
                stats.copyOnWriteBlocks(),
                manager.swapSpace().swappedOutBytes(),
                manager.swapSpace().swappedInBytes(),
                stats.swapInReusedBlocks(),
                SimReport.ratio(poolNs, steps),
                SimReport.Timing.of(
                        clockUs / 1e6,
                        Arrays.copyOf(ttftUs, answered),
                        outputTokens,
                        recomputedTokens,
                        stats.prefixQueriedTokens(),
                        stats.prefixHitTokens()),
                manager.tierStats(),
                List.of());
    }

    @Override
    public void close() {
        manager.close();
    }
}
