package io.gpumem.kvcache.tier;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.kvcache.KvCacheSpec;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Budgets and least-recently-used order of the local tiers, with raw records. */
class BlockTierTest {
    private final KvCacheSpec spec = KvCacheSpec.builder()
            .layers(1)
            .kvHeads(1)
            .headSize(4)
            .elementSize(2)
            .blockSize(4)
            .numBlocks(8)
            .maxModelLen(16)
            .build();
    private final BlockRecord layout = new BlockRecord(spec);
    private final MemorySegment record = Arena.ofAuto().allocate(layout.size());
    private final MemorySegment out = Arena.ofAuto().allocate(layout.size());

    @TempDir
    Path dir;

    private MemorySegment record(long key) {
        record.fill((byte) key);
        record.set(ValueLayout.JAVA_LONG_UNALIGNED, 16, key);
        return record;
    }

    private void leastRecentlyUsedIsEvictedFirst(BlockTier tier, boolean spillsDown) {
        List<Long> spilled = new ArrayList<>();
        BlockTier.Spill spill = (r, hi, lo) -> spilled.add(lo);
        for (long k = 1; k <= 3; k++) {
            assertThat(tier.store(record(k), 0, k, spill)).isTrue();
        }
        assertThat(tier.load(0, 1, out)).isTrue(); // 1 is now most recently used
        tier.store(record(4), 0, 4, spill);
        if (spillsDown) {
            assertThat(spilled).containsExactly(2L);
        } else {
            assertThat(spilled).isEmpty(); // nothing under the disk locally
        }
        assertThat(tier.contains(0, 2)).isFalse();
        assertThat(tier.load(0, 1, out)).isTrue();
        assertThat(out.get(ValueLayout.JAVA_BYTE, 100)).isEqualTo((byte) 1);
        assertThat(tier.usedBytes()).isEqualTo(3 * layout.size());
        assertThat(tier.stats().evicted()).isEqualTo(1);
    }

    @Test
    void hostTierKeepsItsBudgetLeastRecentlyUsedFirst() {
        try (HostTier host = new HostTier(layout, 3 * layout.size() + 5)) {
            leastRecentlyUsedIsEvictedFirst(host, true);
        }
    }

    @Test
    void diskTierKeepsItsBudgetLeastRecentlyUsedFirst() {
        try (DiskTier disk = new DiskTier(layout, dir, 3 * layout.size())) {
            leastRecentlyUsedIsEvictedFirst(disk, false);
            assertThat(disk.fileOf(0, 2)).doesNotExist();
            assertThat(disk.fileOf(0, 4)).exists();
        }
    }

    @Test
    void inMemoryRemoteStoreEvictsLeastRecentlyUsedBeyondItsBudget() {
        InMemoryRemoteStore store = new InMemoryRemoteStore(25);
        store.put(new byte[] {1}, new byte[10]);
        store.put(new byte[] {2}, new byte[10]);
        store.get(new byte[] {1});
        store.put(new byte[] {3}, new byte[10]);
        assertThat(store.get(new byte[] {2})).isNull();
        assertThat(store.get(new byte[] {1})).hasSize(10);
        assertThat(store.size()).isEqualTo(2);
    }
}
