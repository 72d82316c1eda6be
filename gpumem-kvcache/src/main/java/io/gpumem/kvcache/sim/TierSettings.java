package io.gpumem.kvcache.sim;

import io.gpumem.kvcache.KvCacheSpec;
import io.gpumem.kvcache.manager.KvCacheConfig;
import io.gpumem.kvcache.tier.KvTiers;
import io.gpumem.kvcache.tier.RemoteKvStore;
import java.nio.file.Path;

/**
 * The lower tiers each simulated instance gets: host and disk budgets (0 = none; instance {@code i}
 * keeps its disk files in {@code diskDir/instance-i}), an optional remote store shared by all
 * instances, the write queues' size and drain rate per step, and the model name that keys the remote
 * store's namespace (instances of one run share it, so they share blocks).
 */
public record TierSettings(
        long hostBytes,
        long diskBytes,
        Path diskDir,
        RemoteKvStore remote,
        int queueBlocks,
        int drainBlocks,
        String model) {

    /** The model name of simulated runs unless one is given: every simulated model's KV is made up alike. */
    public static final String DEFAULT_MODEL = "kv-sim";

    /** No tiers: the device pool alone. */
    public static final TierSettings NONE = new TierSettings(0, 0, null, null, 256, 64, DEFAULT_MODEL);

    public boolean any() {
        return hostBytes > 0 || diskBytes > 0 || remote != null;
    }

    KvTiers build(KvCacheSpec spec, KvCacheConfig cache, int instance) {
        KvTiers.Builder b = KvTiers.builder(spec)
                .host(hostBytes)
                .queueBlocks(queueBlocks)
                .drainBlocks(drainBlocks)
                .model(model)
                .hash(cache.hashAlgorithm(), cache.hashSeed());
        if (diskBytes > 0) {
            b.disk(diskDir.resolve("instance-" + instance), diskBytes);
        }
        if (remote != null) {
            b.remote(remote, null);
        }
        return b.build();
    }
}
