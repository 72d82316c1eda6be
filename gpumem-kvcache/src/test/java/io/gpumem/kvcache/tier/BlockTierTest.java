package io.gpumem.kvcache.tier;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.device.SimulatedDevice;
import io.gpumem.kvcache.KvCacheException;
import io.gpumem.kvcache.KvCacheSpec;
import io.gpumem.kvcache.manager.KvCacheConfig;
import io.gpumem.kvcache.manager.KvCacheManager;
import io.gpumem.kvcache.memory.KvMemory;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The tiers with raw records: the local tiers' budgets and least-recently-used order; the disk tier's files gone,
 * cut short or unwritable (a miss or a lost write, counted once); the remote tier's backoff after an unreachable
 * store and its check of a value's length; a record that names another block than its key is removed; tiers a
 * manager cannot use (prefix caching off) are closed.
 */
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
    void aWriteQueueTakesOneToAMillionSlots() {
        assertThatThrownBy(() -> KvTiers.builder(spec).queueBlocks(KvTiers.MAX_QUEUE_BLOCKS + 1))
                .isInstanceOf(KvCacheException.class)
                .hasMessage("queue blocks 1048577 is over the limit of 1048576");
        assertThatThrownBy(() -> KvTiers.builder(spec).queueBlocks(0))
                .hasMessage("queue blocks must be positive, got 0");
        try (KvTiers tiers = KvTiers.builder(spec)
                .host(1 << 20)
                .queueBlocks(KvTiers.MAX_QUEUE_BLOCKS)
                .build()) {
            assertThat(tiers).isNotNull();
        }
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

    @Test
    void aDiskRecordThatVanishedOrWasCutShortIsAMissAndTheTierForgetsIt() throws IOException {
        BlockTier.Spill none = (r, hi, lo) -> {};
        try (DiskTier disk = new DiskTier(layout, dir, 8 * layout.size())) {
            for (long k = 1; k <= 3; k++) {
                assertThat(disk.store(record(k), 0, k, none)).isTrue();
            }
            assertThat(disk.store(record(9), 0, 1, none))
                    .as("a key already stored is kept")
                    .isTrue();
            assertThat(disk.load(0, 1, out)).isTrue();
            assertThat(out.get(ValueLayout.JAVA_BYTE, 100))
                    .as("the first record, not the second")
                    .isEqualTo((byte) 1);

            Files.delete(disk.fileOf(0, 2));
            assertThat(disk.load(0, 2, out))
                    .as("deleted behind the tier's back")
                    .isFalse();
            assertThat(disk.stats().failed()).isEqualTo(1);
            assertThat(disk.contains(0, 2)).isFalse();

            try (FileChannel ch = FileChannel.open(disk.fileOf(0, 3), StandardOpenOption.WRITE)) {
                ch.truncate(layout.size() - 1);
            }
            assertThat(disk.load(0, 3, out)).as("cut short").isFalse();
            assertThat(disk.stats().corrupt()).isEqualTo(1);
            assertThat(disk.contains(0, 3)).isFalse();
            assertThat(disk.fileOf(0, 3)).doesNotExist();
            assertThat(disk.usedBytes()).isEqualTo(layout.size());
        }
    }

    @Test
    void aDiskTierThatCannotWriteDropsTheRecordAndCountsTheFailure() throws IOException {
        Path sub = dir.resolve("tier");
        DiskTier disk = new DiskTier(layout, sub, 8 * layout.size());
        try (disk) {
            assertThat(disk.store(record(1), 0, 1, (r, hi, lo) -> {})).isTrue();
            // the directory is replaced by a plain file: every new record fails to open
            Files.delete(disk.fileOf(0, 1));
            Files.delete(sub);
            Files.writeString(sub, "not a directory");
            assertThat(disk.store(record(2), 0, 2, (r, hi, lo) -> {})).isFalse();
            assertThat(disk.stats().failed()).isEqualTo(1);
            assertThat(disk.contains(0, 2)).isFalse();
        }
        Files.delete(sub);
        Files.createDirectories(sub);
        DiskTier again = new DiskTier(layout, sub, 8 * layout.size());
        again.store(record(5), 0, 5, (r, hi, lo) -> {});
        assertThat(again.fileOf(0, 5)).exists();
        again.close();
        assertThat(again.fileOf(0, 5)).as("closing deletes the tier's files").doesNotExist();
    }

    @Test
    void anUnreachableRemoteStoreIsLeftAloneForTheBackoffThenAskedAgain() {
        InMemoryRemoteStore store = new InMemoryRemoteStore(1 << 20);
        RemoteTier remote = new RemoteTier(layout, store, "test:", 3);
        BlockTier.Spill none = (r, hi, lo) -> {};
        store.setAvailable(false);
        assertThat(remote.load(0, 1, out)).isFalse();
        assertThat(remote.stats().failed()).isEqualTo(1);
        store.setAvailable(true);
        store.put(remote.storeKey(0, 1), record(1).toArray(ValueLayout.JAVA_BYTE));
        for (int op = 0; op < 3; op++) {
            assertThat(remote.load(0, 1, out))
                    .as("skipped op %d of the backoff", op)
                    .isFalse();
        }
        assertThat(remote.store(record(2), 0, 2, none))
                .as("the backoff is over: asked again")
                .isTrue();
        assertThat(remote.stats().failed())
                .as("the failure and the three skipped ops")
                .isEqualTo(4);
        assertThat(remote.load(0, 1, out)).isTrue();
        assertThat(out.get(ValueLayout.JAVA_BYTE, 100)).isEqualTo((byte) 1);

        store.put(remote.storeKey(0, 3), new byte[7]);
        assertThat(remote.load(0, 3, out)).as("a value of the wrong length").isFalse();
        assertThat(remote.stats().corrupt()).isEqualTo(1);
        assertThat(remote.load(0, 4, out)).as("no such key").isFalse();
        assertThat(remote.stats().failed()).isEqualTo(4);
    }

    /**
     * A sealed record (checksum right) of block key (0, 7), not a first block, whose parent key is (0, parentLo) and
     * whose tokens are all 7; laid out as {@link BlockRecord}'s comment says.
     */
    private MemorySegment sealedRecord(long parentLo) {
        ValueLayout.OfInt i32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
        ValueLayout.OfLong i64 = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
        MemorySegment r = Arena.ofAuto().allocate(layout.size());
        r.set(i32, 0, BlockRecord.MAGIC);
        r.set(i32, 4, spec.blockSize());
        r.set(i32, 8, spec.layers());
        r.set(i32, 12, (int) spec.pageBytes());
        r.set(i64, 24, 7L);
        r.set(i64, 40, parentLo);
        for (int t = 0; t < spec.blockSize(); t++) {
            r.set(i32, 64 + 4L * t, 7);
        }
        CRC32C crc = new CRC32C();
        crc.update(r.asSlice(0, layout.size() - 4).asByteBuffer());
        r.set(i32, layout.size() - 4, (int) crc.getValue());
        return r;
    }

    @Test
    void aRecordOfAnotherBlockUnderTheKeyIsCountedCorruptAndRemovedSoTheRightOneCanBeStored() {
        BlockIdentity wanted = new BlockIdentity().set(0, 7, 0, 5, false, 0, 0, new int[] {7, 7, 7, 7}, 0);
        try (KvTiers tiers = KvTiers.builder(spec).host(4 * layout.size()).build()) {
            BlockTier host = tiers.tiers().get(0);
            BlockTier.Spill none = (r, hi, lo) -> {};
            assertThat(host.store(sealedRecord(99), 0, 7, none)).isTrue(); // intact, but the parent is another
            assertThat(tiers.fetch(wanted)).as("a foreign record is a miss").isEqualTo(-1);
            TierStats s = tiers.stats().get(0);
            assertThat(s.corrupt()).as("failed the header check").isEqualTo(1);
            assertThat(s.misses()).isEqualTo(1);
            assertThat(s.usedBytes()).as("removed").isZero();
            assertThat(host.contains(0, 7)).isFalse();

            host.store(sealedRecord(5), 0, 7, none); // the block the lookup wants, demoted later
            assertThat(tiers.fetch(wanted))
                    .as("no longer kept out by the foreign record")
                    .isZero();
            assertThat(tiers.stats().get(0).hits()).isEqualTo(1);
        }
    }

    @Test
    void tiersGivenToAManagerWithoutPrefixCachingAreClosedAtOnce() {
        KvTiers tiers = KvTiers.builder(spec)
                .host(4 * layout.size())
                .disk(dir, 4 * layout.size())
                .build();
        HostTier host = (HostTier) tiers.tiers().get(0);
        DiskTier disk = (DiskTier) tiers.tiers().get(1);
        BlockTier.Spill none = (r, hi, lo) -> {};
        assertThat(disk.store(record(1), 0, 1, none)).isTrue();
        assertThat(disk.fileOf(0, 1)).exists();
        SimulatedDevice device =
                SimulatedDevice.builder().capacity(16L << 20).backed(true).build();
        try (KvCacheManager m = new KvCacheManager(
                spec, KvMemory.direct(device), KvCacheConfig.defaults().withPrefixCaching(false), tiers)) {
            assertThat(m.tiers()).as("nothing would ever be cached for them").isNull();
            assertThat(disk.fileOf(0, 1))
                    .as("the disk tier was closed: its files are gone")
                    .doesNotExist();
            assertThatThrownBy(() -> host.store(record(2), 0, 2, none))
                    .as("the host tier was closed: its off-heap memory is released")
                    .isInstanceOf(IllegalStateException.class);
        }
    }

    @Test
    void aHostTierOfSeveralChunksKeepsEveryRecordApart() {
        int records = 2 * 256 + 3; // past two of the host tier's 256-slot chunks
        BlockTier.Spill none = (r, hi, lo) -> {};
        try (HostTier host = new HostTier(layout, records * layout.size())) {
            for (long k = 1; k <= records; k++) {
                assertThat(host.store(record(k), 0, k, none)).isTrue();
            }
            assertThat(host.usedBytes()).isEqualTo(records * layout.size());
            for (long k = 1; k <= records; k++) {
                assertThat(host.load(0, k, out)).isTrue();
                assertThat(out.get(ValueLayout.JAVA_LONG_UNALIGNED, 16))
                        .as("record %d", k)
                        .isEqualTo(k);
                assertThat(out.get(ValueLayout.JAVA_BYTE, layout.size() - 1)).isEqualTo((byte) k);
            }
            assertThat(host.stats().evicted()).isZero();
        }
    }
}
