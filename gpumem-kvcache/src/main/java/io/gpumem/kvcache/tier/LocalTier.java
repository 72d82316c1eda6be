package io.gpumem.kvcache.tier;

import io.gpumem.kvcache.KvCacheException;
import java.util.LinkedHashMap;

/**
 * What the two tiers on this machine (host memory and local disk) share: a byte budget cut into whole
 * {@link BlockRecord}s and an index of the held keys in access order, least recently used first, which is
 * the order they evict in. {@code V} is what a tier keeps per key (a host slot, or nothing for a disk file).
 *
 * <p>Invariant: {@code index.size() × recordBytes ≤ capacityBytes}; the budget holds at least one record.
 */
abstract sealed class LocalTier<V> extends BlockTier permits HostTier, DiskTier {
    final long recordBytes;
    final long capacityBytes;
    final LinkedHashMap<BlockKey, V> index = new LinkedHashMap<>(16, 0.75f, true);

    LocalTier(String name, BlockRecord layout, long capacityBytes) {
        super(name);
        if (capacityBytes < layout.size()) {
            throw new KvCacheException(name + " tier: budget of " + capacityBytes + " bytes holds no block of "
                    + layout.size() + " bytes");
        }
        this.recordBytes = layout.size();
        this.capacityBytes = capacityBytes;
    }

    @Override
    final boolean contains(long hi, long lo) {
        return index.containsKey(new BlockKey(hi, lo));
    }

    @Override
    final void touch(long hi, long lo) {
        index.get(new BlockKey(hi, lo));
    }

    @Override
    final long usedBytes() {
        return index.size() * recordBytes;
    }

    @Override
    final long capacityBytes() {
        return capacityBytes;
    }
}
