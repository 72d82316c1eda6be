package io.gpumem.kvcache.pool;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * Seeded random operations against a simple model: reference counts and cached entries must match the
 * model, and every invariant must hold after each step. Keys are drawn from a tiny space so the hash
 * map sees many duplicate keys and long probe runs with removals.
 */
class KvBlockPoolRandomTest {
    @Test
    void randomOperationsKeepTheModelAndInvariants() {
        for (long seed = 1; seed <= 20; seed++) {
            run(seed);
        }
    }

    private void run(long seed) {
        System.out.println("seed=" + seed);
        SplittableRandom rnd = new SplittableRandom(seed);
        int n = 2 + rnd.nextInt(40);
        KvBlockPool pool = new KvBlockPool(n, 2, true);
        int[] refs = new int[n];
        Map<Integer, long[]> cached = new HashMap<>();
        List<int[]> held = new ArrayList<>();
        for (int step = 0; step < 400; step++) {
            int op = rnd.nextInt(4);
            if (op == 0 && pool.freeCount() > 0) {
                int k = 1 + rnd.nextInt(Math.min(4, pool.freeCount()));
                int[] t = new int[k];
                pool.allocate(k, t, 0);
                for (int b : t) {
                    assertThat(refs[b])
                            .as("seed %d: allocated a referenced block", seed)
                            .isZero();
                    refs[b] = 1;
                    cached.remove(b);
                }
                held.add(t);
            } else if (op == 1 && !held.isEmpty()) {
                int[] t = held.remove(rnd.nextInt(held.size()));
                pool.free(t, 0, t.length);
                for (int b : t) {
                    refs[b]--;
                }
            } else if (op == 2 && !held.isEmpty()) {
                int[] t = held.get(rnd.nextInt(held.size()));
                int b = t[rnd.nextInt(t.length)];
                if (!pool.isCached(b)) {
                    long key = rnd.nextInt(3);
                    int[] toks = {rnd.nextInt(2), 0};
                    pool.cache(b, key, key, KvBlockPool.NONE, toks, 0, 0, 0);
                    cached.put(b, new long[] {key, toks[0]});
                }
            } else if (op == 3 && !cached.isEmpty()) {
                Integer[] ids = cached.keySet().toArray(new Integer[0]);
                Arrays.sort(ids);
                int b = ids[rnd.nextInt(ids.length)];
                long[] e = cached.get(b);
                int hit = pool.lookup(e[0], e[0], KvBlockPool.NONE, new int[] {(int) e[1], 0}, 0, 0, 0);
                assertThat(hit).as("seed %d", seed).isNotEqualTo(KvBlockPool.NONE);
                assertThat(cached.get(hit))
                        .as("seed %d: hit must carry the same key and tokens", seed)
                        .containsExactly(e);
                if (rnd.nextBoolean()) {
                    pool.touch(hit);
                    refs[hit]++;
                    held.add(new int[] {hit});
                }
            }
            pool.checkInvariants();
            for (int b = 1; b < n; b++) {
                assertThat(pool.refCount(b)).as("seed %d block %d", seed, b).isEqualTo(refs[b]);
                assertThat(pool.isCached(b))
                        .as("seed %d block %d cached", seed, b)
                        .isEqualTo(cached.containsKey(b));
            }
        }
    }
}
