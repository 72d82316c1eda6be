package io.gpumem.kvcache.attention;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.device.SimulatedDevice;
import io.gpumem.kvcache.KvCacheSpec;
import io.gpumem.kvcache.manager.KvCacheConfig;
import io.gpumem.kvcache.manager.KvCacheManager;
import io.gpumem.kvcache.manager.KvRequest;
import io.gpumem.kvcache.memory.KvMemory;
import io.gpumem.kvcache.redis.RedisKvStore;
import io.gpumem.kvcache.redis.RedisServer;
import io.gpumem.kvcache.tier.KvTiers;
import io.gpumem.kvcache.tier.TierStats;
import java.nio.file.Path;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Blocks another instance published to a real Redis come back bit-exact (attention over them equals
 * attention over a contiguous copy); with Redis killed the same lookup is a miss and the prefix is
 * recomputed, still exact, and the failed operations are counted.
 */
class RedisTierAttentionTest extends ToyModelAttention {
    @TempDir
    Path dir;

    private final SplittableRandom rnd = new SplittableRandom(seed + 21);
    private final int[] prefix = tokens(rnd, 16);

    private KvCacheManager instance(RedisKvStore store) {
        System.out.println("seed=" + seed);
        KvCacheSpec spec = KvCacheSpec.builder()
                .layers(LAYERS)
                .kvHeads(KV_HEADS)
                .headSize(HEAD)
                .elementSize(4)
                .blockSize(BS)
                .numBlocks(16)
                .maxModelLen(44)
                .build();
        SimulatedDevice device =
                SimulatedDevice.builder().capacity(16L << 20).backed(true).build();
        return new KvCacheManager(
                spec,
                KvMemory.direct(device),
                KvCacheConfig.defaults(),
                KvTiers.builder(spec)
                        .model("toy")
                        .remote(store, null)
                        .remoteBackoffOps(0)
                        .build());
    }

    private long admitSamePrefixAndCheck(KvCacheManager m, String id) {
        KvRequest c = KvRequest.of(id, concat(prefix, tokens(rnd, 6)));
        admit(m, c);
        long hit = m.stats().prefixHitTokens();
        decode(m, c, 3);
        assertAttentionMatches(m, c);
        m.checkInvariants();
        return hit;
    }

    private static TierStats remote(KvCacheManager m) {
        return m.tierStats().getFirst();
    }

    @Test
    void blocksFromRedisGiveExactAttentionAndAKilledServerIsAMiss() throws Exception {
        try (RedisServer server = RedisServer.start(dir.resolve("redis"));
                RedisKvStore store = RedisKvStore.connect(server.uri());
                KvCacheManager first = instance(store);
                KvCacheManager second = instance(store);
                KvCacheManager third = instance(store)) {
            KvRequest a = KvRequest.of("a", concat(prefix, tokens(rnd, 5)));
            admit(first, a);
            first.free(a);
            first.tiers().drain();
            assertThat(admitSamePrefixAndCheck(second, "b")).isEqualTo(16);
            assertThat(remote(second).hits()).isEqualTo(4);

            server.kill();
            long t0 = System.nanoTime();
            assertThat(admitSamePrefixAndCheck(third, "c")).isZero();
            assertThat(remote(third).failed()).isPositive();
            third.tiers().drain();
            System.out.println(
                    "lookup + publish against the killed server took " + (System.nanoTime() - t0) / 1_000_000 + " ms");
        }
    }
}
