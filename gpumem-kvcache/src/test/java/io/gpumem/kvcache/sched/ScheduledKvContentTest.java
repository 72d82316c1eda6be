package io.gpumem.kvcache.sched;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.device.SimulatedDevice;
import io.gpumem.kvcache.KvCacheSpec;
import io.gpumem.kvcache.manager.KvCacheConfig;
import io.gpumem.kvcache.manager.KvCacheManager;
import io.gpumem.kvcache.manager.KvRequest;
import io.gpumem.kvcache.manager.PreemptionMode;
import io.gpumem.kvcache.manager.PrefixFingerprint;
import io.gpumem.kvcache.manager.RequestStatus;
import io.gpumem.kvcache.memory.KvMemory;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * The scheduler and the cache together, checked with real bytes: seeded random serving runs (shared
 * prefixes, chunked prefill under a small token budget, a tight pool, lookahead, every victim policy,
 * recompute and swap) write each computed position's "KV" (a fingerprint of the whole prefix up to it)
 * into its block, and after every step every running request must read back, in its own block table,
 * exactly the fingerprints of its computed positions. A prefix hit on a block that was cached but never
 * computed, a stale hit after eviction or a swap-in that restores the wrong bytes all break this.
 * The same run also checks the pool invariants after every step and that a step which preempted put no
 * newly admitted request into the batch (kv-cache.md §1.9).
 */
class ScheduledKvContentTest {
    private static final int BS = 4;

    @Test
    void everyRunningRequestReadsBackExactlyTheKvItComputed() {
        long preemptions = 0;
        long hits = 0;
        long swaps = 0;
        for (long seed = 1; seed <= 24; seed++) {
            KvCacheManager m = run(seed);
            preemptions += m.stats().preemptions();
            hits += m.stats().prefixHitTokens();
            swaps += m.stats().swapPreemptions();
        }
        assertThat(preemptions).as("preemption exercised").isPositive();
        assertThat(swaps).as("swap exercised").isPositive();
        assertThat(hits).as("prefix hits exercised").isPositive();
    }

    private KvCacheManager run(long seed) {
        System.out.println("seed=" + seed);
        SplittableRandom rnd = new SplittableRandom(seed);
        VictimPolicy policy = VictimPolicy.values()[(int) (seed % 3)];
        PreemptionMode mode = seed % 2 == 0 ? PreemptionMode.SWAP : PreemptionMode.RECOMPUTE;
        int lookahead = (int) (seed / 3 % 3);
        KvCacheSpec spec = KvCacheSpec.builder()
                .layers(1)
                .kvHeads(1)
                .headSize(2)
                .elementSize(4)
                .blockSize(BS)
                .numBlocks(20)
                .maxModelLen(64)
                .build();
        KvCacheConfig config =
                KvCacheConfig.defaults().withSwapSpaceBytes(seed % 4 == 0 ? 1 << 20 : 6 * spec.pageBytes());
        KvCacheManager m = new KvCacheManager(
                spec,
                KvMemory.direct(SimulatedDevice.builder()
                        .capacity(1L << 24)
                        .backed(true)
                        .build()),
                config);
        Scheduler s = new Scheduler(m, new SchedulerConfig(12 + rnd.nextInt(20), 8, mode, policy, lookahead));
        int[][] prefixes = new int[3][];
        for (int i = 0; i < prefixes.length; i++) {
            prefixes[i] = tokens(rnd, 5 + rnd.nextInt(10));
        }
        IdentityHashMap<KvRequest, Integer> outputLength = new IdentityHashMap<>();
        Arena arena = Arena.ofAuto(); // freed with the test, whatever way it ends
        MemorySegment k = arena.allocate(spec.tokenBytes(), 8);
        MemorySegment v = arena.allocate(spec.tokenBytes(), 8);
        MemorySegment page = arena.allocate(spec.pageBytes(), 8);
        int ids = 0;
        int finished = 0;
        for (int step = 0; step < 600 && (ids < 40 || finished < ids); step++) {
            if (ids < 40 && rnd.nextInt(3) == 0) {
                int[] prefix = prefixes[rnd.nextInt(prefixes.length)];
                int[] prompt = concat(prefix, tokens(rnd, 1 + rnd.nextInt(12)));
                KvRequest r = KvRequest.builder("r" + ids++, prompt)
                        .priority(rnd.nextInt(3))
                        .arrival(step)
                        .build();
                outputLength.put(r, 1 + rnd.nextInt(Math.min(20, 63 - prompt.length)));
                s.add(r);
            }
            List<KvRequest> runningBefore = s.running();
            s.schedule();
            for (int i = 0; i < s.batchSize() && s.preemptedLastStep(); i++) {
                assertThat(runningBefore)
                        .as(
                                "seed %d step %d: %s admitted in a step that preempted",
                                seed, step, s.batchRequest(i).id())
                        .contains(s.batchRequest(i));
            }
            List<KvRequest> done = new ArrayList<>();
            for (int i = 0; i < s.batchSize(); i++) {
                KvRequest r = s.batchRequest(i);
                int n = s.batchTokens(i);
                for (int p = r.numComputed(); p < r.numComputed() + n; p++) {
                    long f = PrefixFingerprint.of(r, p);
                    k.set(ValueLayout.JAVA_LONG, 0, f);
                    v.set(ValueLayout.JAVA_LONG, 0, ~f);
                    m.pages().writeSlot(0, r.block(p / BS), p % BS, k, v);
                }
                r.advanceComputed(n);
                if (r.numComputed() == r.numTokens()) {
                    if (r.numOutputTokens() + 1 >= outputLength.get(r)) {
                        done.add(r);
                    } else {
                        r.appendToken(rnd.nextInt(50));
                    }
                }
            }
            m.checkInvariants();
            for (KvRequest r : s.running()) {
                for (int p = 0; p < r.numComputed(); p++) {
                    if (p % BS == 0) {
                        m.pages().readPage(0, r.block(p / BS), page);
                    }
                    long f = PrefixFingerprint.of(r, p);
                    assertThat(page.get(ValueLayout.JAVA_LONG, (long) (p % BS) * 8))
                            .as(
                                    "seed %d step %d: K of %s position %d in block %d",
                                    seed, step, r.id(), p, r.block(p / BS))
                            .isEqualTo(f);
                    assertThat(page.get(ValueLayout.JAVA_LONG, (long) (BS + p % BS) * 8))
                            .as("seed %d step %d: V of %s position %d", seed, step, r.id(), p)
                            .isEqualTo(~f);
                }
            }
            for (KvRequest r : done) {
                s.finish(r);
                assertThat(r.status()).isEqualTo(RequestStatus.FINISHED);
                finished++;
            }
            m.checkInvariants();
        }
        assertThat(finished).as("seed %d finished every request", seed).isEqualTo(ids);
        assertThat(m.stats().usage()).isZero();
        return m;
    }

    private static int[] tokens(SplittableRandom r, int n) {
        int[] t = new int[n];
        for (int i = 0; i < n; i++) {
            t[i] = r.nextInt(50);
        }
        return t;
    }

    private static int[] concat(int[] a, int[] b) {
        int[] out = java.util.Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, out, a.length, b.length);
        return out;
    }
}
