package io.gpumem.kvcache.manager;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.device.SimulatedDevice;
import io.gpumem.kvcache.KvCacheSpec;
import io.gpumem.kvcache.memory.KvMemory;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * Seeded random use of the manager where a grant is not always computed at once: between
 * {@code allocateSlots} and the compute of its tokens other requests are admitted (and may hit the
 * blocks cached at grant time), forked, preempted (recompute or swap, possibly before their own grant
 * was computed, which drops it) and freed. Each computed position's "KV" is a fingerprint of its prefix;
 * after every operation every running request must read back exactly its computed fingerprints, and
 * the invariants must hold. A request that hit a block whose grant is still pending is only checked
 * once that grant was computed (the same step in a real engine).
 */
class PendingGrantRandomTest {
    private static final int BS = 4;

    @Test
    void grantsComputedLaterOrDroppedNeverLeaveWrongKvVisible() {
        long hits = 0;
        long swaps = 0;
        long cow = 0;
        for (long seed = 1; seed <= 30; seed++) {
            KvCacheManager m = run(seed);
            hits += m.stats().prefixHitTokens();
            swaps += m.stats().swapPreemptions();
            cow += m.stats().copyOnWriteBlocks();
        }
        assertThat(hits).as("prefix hits exercised").isPositive();
        assertThat(swaps).as("swap exercised").isPositive();
        assertThat(cow).as("copy-on-write exercised").isPositive();
    }

    private KvCacheManager run(long seed) {
        System.out.println("seed=" + seed);
        SplittableRandom rnd = new SplittableRandom(seed);
        KvCacheSpec spec = KvCacheSpec.builder()
                .layers(1)
                .kvHeads(1)
                .headSize(2)
                .elementSize(4)
                .blockSize(BS)
                .numBlocks(18)
                .maxModelLen(64)
                .build();
        KvCacheManager m = new KvCacheManager(
                spec,
                KvMemory.direct(SimulatedDevice.builder()
                        .capacity(1L << 24)
                        .backed(true)
                        .build()),
                KvCacheConfig.defaults().withSwapSpaceBytes(8 * spec.pageBytes()));
        Arena arena = Arena.ofAuto(); // freed with the test, whatever way it ends
        MemorySegment k = arena.allocate(spec.tokenBytes(), 8);
        MemorySegment v = arena.allocate(spec.tokenBytes(), 8);
        MemorySegment page = arena.allocate(spec.pageBytes(), 8);
        int[][] prefixes = new int[3][];
        for (int i = 0; i < prefixes.length; i++) {
            prefixes[i] = tokens(rnd, 4 + rnd.nextInt(10));
        }
        List<KvRequest> running = new ArrayList<>();
        List<KvRequest> parked = new ArrayList<>();
        Map<KvRequest, Integer> pending =
                new LinkedHashMap<>(); // granted, not yet computed (KvRequest has identity equality)
        // Grants outstanding when another request was admitted: that request may have hit their blocks,
        // so (as in a real engine, where both are in one step) they are computed, never dropped.
        Set<KvRequest> sealed = new LinkedHashSet<>();
        int ids = 0;
        for (int op = 0; op < 400; op++) {
            int kind = rnd.nextInt(12);
            if (kind < 2) {
                int[] prompt = concat(prefixes[rnd.nextInt(prefixes.length)], tokens(rnd, rnd.nextInt(8)));
                KvRequest r = KvRequest.of("n" + ids++, prompt);
                int hit = m.lookupCachedTokens(r);
                int n = 1 + rnd.nextInt(r.numTokens() - hit); // maybe a chunk of the prefill
                if (m.allocateSlots(r, n, rnd.nextInt(3))) {
                    sealed.addAll(pending.keySet());
                    running.add(r);
                    pending.put(r, r.numComputed() + n);
                } else {
                    parked.add(r);
                }
            } else if (kind < 5 && !pending.isEmpty()) {
                KvRequest r = pending.keySet().iterator().next();
                int end = pending.remove(r);
                sealed.remove(r);
                for (int p = r.numComputed(); p < end; p++) {
                    long f = PrefixFingerprint.of(r, p);
                    k.set(ValueLayout.JAVA_LONG, 0, f);
                    v.set(ValueLayout.JAVA_LONG, 0, ~f);
                    m.pages().writeSlot(0, r.block(p / BS), p % BS, k, v);
                }
                r.advanceComputed(end - r.numComputed());
            } else if (kind < 7 && !running.isEmpty()) {
                KvRequest r = running.get(rnd.nextInt(running.size()));
                if (!pending.containsKey(r) && r.numTokens() + 1 < spec.maxModelLen()) {
                    if (r.numComputed() == r.numTokens()) {
                        r.appendToken(rnd.nextInt(50));
                    }
                    int n = r.numTokens() - r.numComputed();
                    if (m.allocateSlots(r, n, rnd.nextInt(3))) {
                        pending.put(r, r.numComputed() + n);
                    }
                }
            } else if (kind == 7 && !running.isEmpty()) {
                KvRequest r = running.get(rnd.nextInt(running.size()));
                if (m.pool().freeCount() > 2) {
                    running.add(m.fork(r, "f" + ids++));
                }
            } else if (kind == 8 && !running.isEmpty()) {
                KvRequest r = running.get(rnd.nextInt(running.size()));
                if (sealed.contains(r)) {
                    continue;
                }
                running.remove(r);
                pending.remove(r); // its grant is dropped
                m.preempt(r, rnd.nextBoolean() ? PreemptionMode.SWAP : PreemptionMode.RECOMPUTE);
                parked.add(r);
            } else if (kind == 9 && !parked.isEmpty()) {
                KvRequest r = parked.get(0);
                boolean resumed;
                if (r.status() == RequestStatus.SWAPPED) {
                    resumed = m.swapIn(r);
                } else {
                    int hit = m.lookupCachedTokens(r);
                    resumed = m.allocateSlots(r, r.numTokens() - hit, 0);
                    if (resumed) {
                        sealed.addAll(pending.keySet());
                        pending.put(r, r.numTokens());
                    }
                }
                if (resumed) {
                    parked.remove(0);
                    running.add(r);
                }
            } else if (kind == 10 && !running.isEmpty()) {
                KvRequest r = running.get(rnd.nextInt(running.size()));
                if (sealed.contains(r)) {
                    continue;
                }
                running.remove(r);
                pending.remove(r);
                m.free(r);
            }
            m.checkInvariants();
            if (pending.isEmpty()) {
                for (KvRequest r : running) {
                    for (int p = 0; p < r.numComputed(); p++) {
                        if (p % BS == 0) {
                            m.pages().readPage(0, r.block(p / BS), page);
                        }
                        assertThat(page.get(ValueLayout.JAVA_LONG, (long) (p % BS) * 8))
                                .as(
                                        "seed %d op %d: K of %s position %d in block %d",
                                        seed, op, r.id(), p, r.block(p / BS))
                                .isEqualTo(PrefixFingerprint.of(r, p));
                    }
                }
            }
        }
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
