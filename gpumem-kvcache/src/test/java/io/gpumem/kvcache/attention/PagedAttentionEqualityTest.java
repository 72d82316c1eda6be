package io.gpumem.kvcache.attention;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.alloc.CachingAllocator;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.kvcache.KvCacheSpec;
import io.gpumem.kvcache.manager.KvCacheConfig;
import io.gpumem.kvcache.manager.KvCacheManager;
import io.gpumem.kvcache.manager.KvRequest;
import io.gpumem.kvcache.manager.PreemptionMode;
import io.gpumem.kvcache.memory.KvMemory;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * Proves block tables right with real bytes: a toy model whose K/V for a position depend on the whole
 * prefix up to it writes only the tokens the cache says must be computed; attention over the paged
 * cache must equal attention over a contiguous copy built from scratch, bit for bit, after plain
 * decoding, copy-on-write forks, swap and recompute preemption, and eviction followed by re-hits.
 */
class PagedAttentionEqualityTest extends ToyModelAttention {
    private KvCacheManager manager(int blocks, KvCacheConfig config) {
        return manager(blocks, config, false);
    }

    private KvCacheManager manager(int blocks, KvCacheConfig config, boolean onAllocator) {
        System.out.println("seed=" + seed);
        KvCacheSpec spec = KvCacheSpec.builder()
                .layers(LAYERS)
                .kvHeads(KV_HEADS)
                .headSize(HEAD)
                .elementSize(4)
                .blockSize(BS)
                .numBlocks(blocks)
                .maxModelLen(Math.min(128, (blocks - 1) * BS))
                .build();
        SimulatedDevice device =
                SimulatedDevice.builder().capacity(16L << 20).backed(true).build();
        return new KvCacheManager(
                spec,
                onAllocator ? KvMemory.cachingAllocator(new CachingAllocator(device)) : KvMemory.direct(device),
                config);
    }

    @Test
    void pagedEqualsContiguousForPlainDecoding() {
        KvCacheManager m = manager(64, KvCacheConfig.defaults());
        SplittableRandom rnd = new SplittableRandom(seed);
        KvRequest a = KvRequest.of("a", tokens(rnd, 37));
        KvRequest other = KvRequest.of("o", tokens(rnd, 9));
        admit(m, other);
        admit(m, a);
        for (int i = 0; i < 9; i++) {
            decode(m, a, rnd.nextInt(1000));
            decode(m, other, rnd.nextInt(1000));
        }
        assertAttentionMatches(m, a);
        assertAttentionMatches(m, other);
        m.checkInvariants();
    }

    @Test
    void pagedEqualsContiguousAfterCopyOnWrite() {
        copyOnWriteScenario(manager(64, KvCacheConfig.defaults()));
    }

    @Test
    void pagedEqualsContiguousOnCachingAllocatorMemory() {
        copyOnWriteScenario(manager(64, KvCacheConfig.defaults(), true));
    }

    private void copyOnWriteScenario(KvCacheManager m) {
        SplittableRandom rnd = new SplittableRandom(seed + 1);
        KvRequest parent = KvRequest.of("p", tokens(rnd, 10));
        admit(m, parent);
        KvRequest[] beams = {parent, m.fork(parent, "c1"), m.fork(parent, "c2")};
        for (int step = 0; step < 7; step++) {
            for (KvRequest b : beams) {
                decode(m, b, rnd.nextInt(1000));
            }
        }
        assertThat(m.stats().copyOnWriteBlocks()).isGreaterThan(0);
        assertThat(beams[1].block(0)).isEqualTo(parent.block(0));
        for (KvRequest b : beams) {
            assertAttentionMatches(m, b);
        }
        m.free(beams[2]);
        KvRequest grandChild = m.fork(beams[1], "g");
        decode(m, grandChild, 5);
        decode(m, beams[1], 6);
        assertAttentionMatches(m, grandChild);
        assertAttentionMatches(m, beams[1]);
        m.checkInvariants();
    }

    @Test
    void pagedEqualsContiguousAfterSwapPreemption() {
        KvCacheManager m = manager(16, KvCacheConfig.defaults().withSwapSpaceBytes(1 << 20));
        SplittableRandom rnd = new SplittableRandom(seed + 2);
        KvRequest a = KvRequest.of("a", tokens(rnd, 22));
        admit(m, a);
        decode(m, a, 3);
        int[] before = a.blockTable();
        assertThat(m.preempt(a, PreemptionMode.SWAP)).isEqualTo(PreemptionMode.SWAP);
        // another request takes (and overwrites) most of the pool, including a's old blocks
        KvRequest b = KvRequest.of("b", tokens(rnd, 44));
        admit(m, b);
        assertThat(b.blockTable()).containsAnyOf(before);
        assertThat(m.swapIn(a)).isFalse();
        m.free(b);
        KvRequest c = KvRequest.of("c", tokens(rnd, 8));
        admit(m, c);
        assertThat(m.swapIn(a)).isTrue();
        decode(m, a, 4);
        assertAttentionMatches(m, a);
        assertAttentionMatches(m, c);
        m.checkInvariants();
    }

    @Test
    void pagedEqualsContiguousAfterSwapInThatReusesStillCachedBlocks() {
        KvCacheManager m = manager(16, KvCacheConfig.defaults().withSwapSpaceBytes(1 << 20));
        SplittableRandom rnd = new SplittableRandom(seed + 5);
        KvRequest a = KvRequest.of("a", tokens(rnd, 21));
        admit(m, a);
        decode(m, a, 9);
        m.preempt(a, PreemptionMode.SWAP);
        KvRequest b = KvRequest.of("b", tokens(rnd, 10)); // takes a's partial block (head) and two clean ones
        admit(m, b);
        assertThat(m.swapIn(a)).isTrue();
        assertThat(m.stats().swapInReusedBlocks()).isEqualTo(5);
        decode(m, a, 2);
        decode(m, b, 3);
        assertAttentionMatches(m, a);
        assertAttentionMatches(m, b);
        m.checkInvariants();
    }

    @Test
    void pagedEqualsContiguousAfterRecomputePreemptionAndReHit() {
        KvCacheManager m = manager(32, KvCacheConfig.defaults());
        SplittableRandom rnd = new SplittableRandom(seed + 3);
        KvRequest a = KvRequest.of("a", tokens(rnd, 18));
        admit(m, a);
        decode(m, a, 7);
        m.preempt(a, PreemptionMode.RECOMPUTE);
        admit(m, a); // re-hits its still-cached blocks, recomputes the rest
        assertThat(m.stats().preemptedHitTokens())
                .as("counted apart, as vLLM counts it")
                .isEqualTo(16);
        assertThat(m.stats().prefixHitTokens()).isZero();
        decode(m, a, 8);
        assertAttentionMatches(m, a);
        m.checkInvariants();
    }

    @Test
    void pagedEqualsContiguousWhenTheOwnerOfASharedPrefixIsPreemptedBeforeComputingIt() {
        KvCacheManager m = manager(16, KvCacheConfig.defaults());
        SplittableRandom rnd = new SplittableRandom(seed + 3);
        int[] prompt = tokens(rnd, 13);
        KvRequest a = KvRequest.of("a", prompt);
        assertThat(m.lookupCachedTokens(a)).isZero();
        assertThat(m.allocateSlots(a, a.numTokens(), 0)).isTrue(); // 3 full blocks cached at grant time
        KvRequest b = KvRequest.of("b", prompt);
        int hit = m.lookupCachedTokens(b);
        assertThat(m.allocateSlots(b, b.numTokens() - hit, 0)).isTrue();
        m.preempt(a, PreemptionMode.RECOMPUTE); // a never writes its grant
        compute(m, b, b.numTokens() - b.numComputed());
        assertAttentionMatches(m, b);
        admit(m, a); // resumed: re-hits what b computed
        assertThat(a.blockTable()).startsWith(b.block(0), b.block(1), b.block(2));
        assertAttentionMatches(m, a);
        m.checkInvariants();
    }

    @Test
    void pagedEqualsContiguousAfterEvictionAndReHit() {
        KvCacheManager m = manager(12, KvCacheConfig.defaults()); // 11 usable blocks
        SplittableRandom rnd = new SplittableRandom(seed + 4);
        int[] prefix = tokens(rnd, 16);
        KvRequest a = KvRequest.of("a", concat(prefix, tokens(rnd, 5)));
        admit(m, a);
        m.free(a);
        KvRequest b = KvRequest.of("b", concat(prefix, tokens(rnd, 3)));
        admit(m, b);
        assertThat(m.stats().prefixHitTokens()).isEqualTo(16);
        assertAttentionMatches(m, b);
        m.free(b);
        // fill the pool so the cached prefix is evicted, then write other data everywhere
        KvRequest filler = KvRequest.of("f", tokens(rnd, 44));
        admit(m, filler);
        m.free(filler);
        KvRequest c = KvRequest.of("c", concat(prefix, tokens(rnd, 6)));
        long hitsBefore = m.stats().prefixHitTokens();
        admit(m, c);
        assertThat(m.stats().prefixHitTokens() - hitsBefore).isLessThan(16);
        decode(m, c, 1);
        assertAttentionMatches(m, c);
        m.checkInvariants();
    }

    @Test
    void randomOperationsKeepEveryRequestsAttentionExact() {
        long cow = 0;
        long swaps = 0;
        long hits = 0;
        for (long s = 1; s <= 6; s++) {
            KvCacheManager m = randomRun(s);
            cow += m.stats().copyOnWriteBlocks();
            swaps += m.stats().swapPreemptions();
            hits += m.stats().prefixHitTokens();
        }
        assertThat(cow).as("copy-on-write exercised").isPositive();
        assertThat(swaps).as("swap exercised").isPositive();
        assertThat(hits).as("prefix hits exercised").isPositive();
    }

    /**
     * Seeded random admissions (prompts drawn from a few shared prefixes), decodes, forks, recompute and
     * swap preemptions, swap-ins and frees on a small pool; invariants after every operation, attention
     * equality for every running request at checkpoints.
     */
    private KvCacheManager randomRun(long runSeed) {
        System.out.println("seed=" + runSeed);
        KvCacheManager m = manager(24, KvCacheConfig.defaults().withSwapSpaceBytes(1 << 20), runSeed % 2 == 0);
        SplittableRandom rnd = new SplittableRandom(runSeed);
        int[][] prefixes = {tokens(rnd, 9), tokens(rnd, 13), tokens(rnd, 4)};
        java.util.List<KvRequest> running = new java.util.ArrayList<>();
        java.util.List<KvRequest> parked = new java.util.ArrayList<>();
        int ids = 0;
        for (int op = 0; op < 300; op++) {
            int kind = rnd.nextInt(10);
            if (kind < 2) {
                int[] prefix = prefixes[rnd.nextInt(prefixes.length)];
                KvRequest r = KvRequest.of("n" + ids++, concat(prefix, tokens(rnd, rnd.nextInt(6))));
                int hit = m.lookupCachedTokens(r);
                if (m.allocateSlots(r, r.numTokens() - hit, 0)) {
                    compute(m, r, r.numTokens() - r.numComputed());
                    running.add(r);
                } else {
                    parked.add(r);
                }
            } else if (kind < 6 && !running.isEmpty()) {
                KvRequest r = running.get(rnd.nextInt(running.size()));
                if (r.numTokens() + 1 < m.spec().maxModelLen()) {
                    r.appendToken(rnd.nextInt(1000));
                    if (m.allocateSlots(r, 1, rnd.nextInt(3))) {
                        compute(m, r, 1);
                    } else {
                        m.preempt(r, PreemptionMode.RECOMPUTE);
                        running.remove(r);
                        parked.add(r);
                    }
                }
            } else if (kind == 6 && !running.isEmpty() && m.pool().freeCount() > 2) {
                running.add(m.fork(running.get(rnd.nextInt(running.size())), "f" + ids++));
            } else if (kind == 7 && !running.isEmpty()) {
                KvRequest r = running.remove(rnd.nextInt(running.size()));
                m.preempt(r, rnd.nextBoolean() ? PreemptionMode.SWAP : PreemptionMode.RECOMPUTE);
                parked.add(r);
            } else if (kind == 8 && !parked.isEmpty()) {
                KvRequest r = parked.get(0);
                boolean resumed;
                if (r.status() == io.gpumem.kvcache.manager.RequestStatus.SWAPPED) {
                    resumed = m.swapIn(r);
                } else {
                    int hit = m.lookupCachedTokens(r);
                    resumed = m.allocateSlots(r, r.numTokens() - hit, 0);
                    if (resumed) {
                        compute(m, r, r.numTokens() - r.numComputed());
                    }
                }
                if (resumed) {
                    parked.remove(0);
                    running.add(r);
                }
            } else if (kind == 9 && !running.isEmpty()) {
                m.free(running.remove(rnd.nextInt(running.size())));
            }
            m.checkInvariants();
            if (op % 50 == 49) {
                for (KvRequest r : running) {
                    if (r.numComputed() > 0) {
                        assertAttentionMatches(m, r);
                    }
                }
            }
        }
        assertThat(m.pool().evictions())
                .as("seed %d exercised eviction", runSeed)
                .isPositive();
        return m;
    }
}
