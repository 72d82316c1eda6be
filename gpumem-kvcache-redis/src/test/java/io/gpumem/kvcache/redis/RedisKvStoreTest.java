package io.gpumem.kvcache.redis;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.device.SimulatedDevice;
import io.gpumem.kvcache.memory.KvMemory;
import io.gpumem.kvcache.sim.ServingSimulator;
import io.gpumem.kvcache.sim.SimConfig;
import io.gpumem.kvcache.sim.SimReport;
import io.gpumem.kvcache.sim.TierSettings;
import io.gpumem.kvcache.sim.TimeModel;
import io.gpumem.kvcache.sim.Workload;
import io.gpumem.kvcache.tier.RemoteKvStore;
import io.gpumem.kvcache.tier.TierStats;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The Redis store against a real {@code redis-server}, alone and under the serving simulator. */
class RedisKvStoreTest {
    @TempDir
    Path dir;

    private static final SimConfig CHAT = SimConfig.builder()
            .workload(Workload.CHAT)
            .requests(30)
            .blocks(160)
            .seed(5)
            .build();

    private static SimReport simulate(SimConfig c, RemoteKvStore store, int instances) {
        System.out.println("seed=" + c.seed());
        TierSettings tiers = new TierSettings(0, 0, null, store, 256, 64, TierSettings.DEFAULT_MODEL);
        return ServingSimulator.run(
                c,
                tiers,
                TimeModel.defaults(),
                instances,
                i -> KvMemory.direct(SimulatedDevice.builder()
                        .capacity(ServingSimulator.deviceBytes(c) + (16L << 20))
                        .backed(true)
                        .build()));
    }

    private static TierStats remote(SimReport r) {
        return r.tiers().stream()
                .filter(t -> t.tier().equals("remote"))
                .findFirst()
                .orElseThrow();
    }

    @Test
    void storesAndReturnsBytesAndAnswersNullForAMissingKey() throws Exception {
        try (RedisServer server = RedisServer.start(dir.resolve("redis"));
                RedisKvStore store = RedisKvStore.connect(server.uri())) {
            byte[] value = new byte[70_000];
            for (int i = 0; i < value.length; i++) {
                value[i] = (byte) (i * 31);
            }
            store.put("k1".getBytes(StandardCharsets.UTF_8), value);
            assertThat(store.get("k1".getBytes(StandardCharsets.UTF_8))).isEqualTo(value);
            assertThat(store.get("absent".getBytes(StandardCharsets.UTF_8))).isNull();
        }
    }

    @Test
    void twoInstancesSharingRedisHitEachOthersPrefixes() throws Exception {
        SimReport alone;
        SimReport shared;
        try (RedisServer server = RedisServer.start(dir.resolve("redis"));
                RedisKvStore store = RedisKvStore.connect(server.uri())) {
            shared = simulate(CHAT, store, 2);
        }
        alone = simulate(CHAT, null, 2);
        assertThat(shared.requestsFinished()).isEqualTo(shared.requestsTotal());
        assertThat(remote(shared).hits()).isPositive();
        System.out.println("remote operations failed (timeouts under load): "
                + remote(shared).failed());
        for (SimReport instance : shared.instances()) {
            assertThat(remote(instance).hits())
                    .as("each instance hits blocks in Redis")
                    .isPositive();
        }
        assertThat(shared.prefixHitRate()).isGreaterThan(alone.prefixHitRate());
        assertThat(shared.timing().recomputedTokens()).isLessThan(alone.timing().recomputedTokens());
    }

    @Test
    void killingRedisMidRunMeansMissesAndRecomputationNeverAnError() throws Exception {
        SimReport r;
        try (RedisServer server = RedisServer.start(dir.resolve("redis"));
                RedisKvStore redis = RedisKvStore.connect(server.uri())) {
            AtomicInteger ops = new AtomicInteger();
            RemoteKvStore killing = new RemoteKvStore() {
                private void count() {
                    if (ops.incrementAndGet() == 400) {
                        try {
                            server.kill();
                            System.out.println("redis-server killed after 400 operations");
                        } catch (InterruptedException e) {
                            Thread.currentThread().interrupt();
                        }
                    }
                }

                @Override
                public byte[] get(byte[] key) {
                    count();
                    return redis.get(key);
                }

                @Override
                public void put(byte[] key, byte[] value) {
                    count();
                    redis.put(key, value);
                }

                @Override
                public String describe() {
                    return redis.describe();
                }
            };
            r = simulate(CHAT, killing, 2);
            assertThat(ops.get()).as("the kill happened mid-run").isGreaterThan(400);
        }
        assertThat(r.requestsFinished()).isEqualTo(r.requestsTotal());
        assertThat(remote(r).failed()).isPositive();
        assertThat(remote(r).hits()).as("hits before the kill").isPositive();
    }
}
