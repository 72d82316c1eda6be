package io.gpumem.kvcache.attention;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.device.SimulatedDevice;
import io.gpumem.kvcache.KvCacheException;
import io.gpumem.kvcache.KvCacheSpec;
import io.gpumem.kvcache.hash.HashAlgorithm;
import io.gpumem.kvcache.manager.KvCacheConfig;
import io.gpumem.kvcache.manager.KvCacheManager;
import io.gpumem.kvcache.manager.KvRequest;
import io.gpumem.kvcache.memory.KvMemory;
import io.gpumem.kvcache.tier.DiskTier;
import io.gpumem.kvcache.tier.InMemoryRemoteStore;
import io.gpumem.kvcache.tier.KvTiers;
import io.gpumem.kvcache.tier.RemoteTier;
import io.gpumem.kvcache.tier.TierStats;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.SplittableRandom;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Blocks that went down to a lower tier and came back must give the same attention, bit for bit, as a
 * contiguous copy built from scratch; a damaged disk record or a missing remote key is a miss (the
 * tokens are recomputed), never wrong KV. Scenario: request {@code a} computes a 16-token prefix (4
 * blocks) and leaves; a filler takes every device block, evicting the prefix; request {@code c} with the
 * same prefix then finds it only in the tiers. A tenant's (salted) prefix comes back for that tenant only, and
 * blocks are promoted only when the whole prompt fits in the free blocks; a shared store is shared only by
 * instances of the same model name (and hash).
 */
class TieredAttentionEqualityTest extends ToyModelAttention {
    private static final int BLOCKS = 12; // 11 usable: the filler below evicts everything

    @TempDir
    Path dir;

    /** The toy model's geometry every test here uses. */
    private static KvCacheSpec toySpec() {
        return KvCacheSpec.builder()
                .layers(LAYERS)
                .kvHeads(KV_HEADS)
                .headSize(HEAD)
                .elementSize(4)
                .blockSize(BS)
                .numBlocks(BLOCKS)
                .maxModelLen(44)
                .build();
    }

    private KvCacheManager manager(UnaryOperator<KvTiers.Builder> tiers) {
        System.out.println("seed=" + seed);
        KvCacheSpec spec = toySpec();
        SimulatedDevice device =
                SimulatedDevice.builder().capacity(16L << 20).backed(true).build();
        return new KvCacheManager(
                spec,
                KvMemory.direct(device),
                KvCacheConfig.defaults(),
                tiers.apply(KvTiers.builder(spec)).build());
    }

    private final SplittableRandom rnd = new SplittableRandom(seed + 11);
    private final int[] prefix = tokens(rnd, 16);
    private final long[] prefixKeyHi = new long[4];
    private final long[] prefixKeyLo = new long[4];

    /** Computes the prefix in request a, records its block keys, then evicts it with a filler. */
    private void computePrefixThenEvict(KvCacheManager m) {
        computePrefixThenEvict(m, null);
    }

    /** As {@link #computePrefixThenEvict(KvCacheManager)}, request a of tenant {@code salt} ({@code null}: none). */
    private void computePrefixThenEvict(KvCacheManager m, String salt) {
        computePrefixThenEvict(m, salt, true);
    }

    /** As above; with {@code pump} false the evicted blocks are left in the tiers' write queues. */
    private void computePrefixThenEvict(KvCacheManager m, String salt, boolean pump) {
        KvRequest a = withSalt("a", concat(prefix, tokens(rnd, 5)), salt);
        admit(m, a);
        for (int j = 0; j < 4; j++) {
            prefixKeyHi[j] = m.pool().keyHi(a.block(j));
            prefixKeyLo[j] = m.pool().keyLo(a.block(j));
        }
        m.free(a);
        m.tiers().drain();
        KvRequest filler = KvRequest.of("f", tokens(rnd, 44));
        admit(m, filler);
        m.free(filler);
        if (pump) {
            m.tiers().drain();
        }
        assertThat(m.pool().cachedCount()).as("filler's blocks only").isEqualTo(11);
    }

    private static KvRequest withSalt(String id, int[] tokens, String salt) {
        return salt == null
                ? KvRequest.of(id, tokens)
                : KvRequest.builder(id, tokens).salt(salt).build();
    }

    /** Admits c (same prefix), decodes, checks attention; returns the prefix tokens it hit. */
    private long admitSamePrefixAndCheck(KvCacheManager m) {
        return admitSamePrefixAndCheck(m, null);
    }

    /** As {@link #admitSamePrefixAndCheck(KvCacheManager)}, request c of tenant {@code salt}. */
    private long admitSamePrefixAndCheck(KvCacheManager m, String salt) {
        KvRequest c = withSalt("c", concat(prefix, tokens(rnd, 6)), salt);
        long before = m.stats().prefixHitTokens();
        admit(m, c);
        long hit = m.stats().prefixHitTokens() - before;
        decode(m, c, 3);
        decode(m, c, 4);
        assertAttentionMatches(m, c);
        m.checkInvariants();
        return hit;
    }

    private static TierStats tier(KvCacheManager m, String name) {
        return m.tierStats().stream()
                .filter(t -> t.tier().equals(name))
                .findFirst()
                .orElseThrow();
    }

    @Test
    void blocksBackFromTheHostTierGiveExactAttention() {
        try (KvCacheManager m = manager(b -> b.host(1 << 20))) {
            computePrefixThenEvict(m);
            assertThat(admitSamePrefixAndCheck(m)).isEqualTo(16);
            TierStats host = tier(m, "host");
            long record = m.tiers().layout().size();
            assertThat(host.hits()).isEqualTo(4);
            assertThat(host.misses())
                    .as("one per lookup that reached the tier and stopped there: a's first block (the tier was"
                            + " empty), the filler's first, c's fifth (not a's)")
                    .isEqualTo(3);
            assertThat(host.stored()).as("a's five full blocks").isEqualTo(5);
            assertThat(host.bytesIn()).isEqualTo(5 * record);
            assertThat(host.bytesOut()).isEqualTo(4 * record);
            assertThat(host.corrupt()).isZero();
            assertThat(m.stats().promotedBlocks()).isEqualTo(4);
        }
    }

    @Test
    void blocksEvictedSinceTheLastPumpComeBackFromTheWriteQueueWithExactAttention() {
        try (KvCacheManager m = manager(b -> b.host(1 << 20))) {
            computePrefixThenEvict(m, null, false);
            assertThat(m.tiers().queued(0))
                    .as("the prefix's blocks wait for the host tier")
                    .isEqualTo(5);
            assertThat(admitSamePrefixAndCheck(m))
                    .as("a block evicted a moment ago is a hit, not recomputed")
                    .isEqualTo(16);
            TierStats host = tier(m, "host");
            assertThat(host.hits()).isEqualTo(4);
            assertThat(host.stored()).as("nothing written yet").isZero();
            assertThat(host.bytesOut()).isEqualTo(4 * m.tiers().layout().size());
        }
    }

    @Test
    void aTenantsPrefixComesBackFromTheHostTierForThatTenantOnly() {
        try (KvCacheManager m = manager(b -> b.host(1 << 20))) {
            computePrefixThenEvict(m, "tenant-1");
            assertThat(m.stats().demotedBlocks())
                    .as("the prefix's 4 blocks and the one after, then the filler's none (it is never evicted)")
                    .isEqualTo(5);
            KvRequest other = KvRequest.builder("other", concat(prefix, tokens(rnd, 6)))
                    .salt("tenant-2")
                    .build();
            KvRequest plain = KvRequest.of("plain", concat(prefix, tokens(rnd, 6)));
            assertThat(m.lookupCachedTokens(other)).as("another tenant").isZero();
            assertThat(m.lookupCachedTokens(plain)).as("no tenant").isZero();
            assertThat(m.stats().promotedBlocks()).isZero();
            assertThat(admitSamePrefixAndCheck(m, "tenant-1")).isEqualTo(16);
            assertThat(m.stats().promotedBlocks()).isEqualTo(4);
        }
    }

    @Test
    void blocksArePromotedOnlyWhenTheWholePromptFitsInTheFreeBlocks() {
        try (KvCacheManager m = manager(b -> b.host(1 << 20))) {
            computePrefixThenEvict(m);
            // c's prompt is 22 tokens: 6 blocks. A holder keeps 11 - free blocks live.
            KvRequest holder = KvRequest.of("holder", tokens(rnd, 6 * BS));
            admit(m, holder);
            assertThat(m.pool().freeCount()).isEqualTo(5);
            KvRequest c = KvRequest.of("c", concat(prefix, tokens(rnd, 6)));
            assertThat(m.lookupCachedTokens(c))
                    .as("5 free blocks: not promoted")
                    .isZero();
            assertThat(m.stats().promotedBlocks()).isZero();
            m.free(holder);
            KvRequest smaller = KvRequest.of("holder2", tokens(rnd, 5 * BS));
            admit(m, smaller);
            assertThat(m.pool().freeCount()).isEqualTo(6);
            assertThat(m.lookupCachedTokens(c))
                    .as("6 free blocks: the prefix comes back")
                    .isEqualTo(16);
            assertThat(m.stats().promotedBlocks()).isEqualTo(4);
            m.checkInvariants();
        }
    }

    @Test
    void blocksBackFromTheDiskTierGiveExactAttention() {
        try (KvCacheManager m = manager(b -> b.disk(dir, 1 << 20))) {
            computePrefixThenEvict(m);
            assertThat(admitSamePrefixAndCheck(m)).isEqualTo(16);
            assertThat(tier(m, "disk").hits()).isEqualTo(4);
        }
    }

    @Test
    void hostEvictionsCascadeToDiskAndComeBackExact() {
        long record = KvTiers.builder(toySpec()).build().layout().size();
        try (KvCacheManager m = manager(b -> b.host(2 * record).disk(dir, 1 << 20))) {
            computePrefixThenEvict(m);
            long hit = admitSamePrefixAndCheck(m);
            assertThat(hit).isEqualTo(16);
            assertThat(tier(m, "host").evicted()).isPositive();
            assertThat(tier(m, "disk").hits()).isPositive();
        }
    }

    @Test
    void blocksBackFromTheRemoteTierGiveExactAttention() {
        InMemoryRemoteStore store = new InMemoryRemoteStore(1 << 20);
        try (KvCacheManager m = manager(b -> b.model("toy").remote(store, null))) {
            computePrefixThenEvict(m);
            assertThat(admitSamePrefixAndCheck(m)).isEqualTo(16);
            assertThat(tier(m, "remote").hits()).isEqualTo(4);
        }
    }

    @Test
    void anotherInstanceHitsWhatTheFirstPublishedToTheSharedStore() {
        InMemoryRemoteStore store = new InMemoryRemoteStore(1 << 20);
        try (KvCacheManager first = manager(b -> b.model("toy").remote(store, null));
                KvCacheManager second = manager(b -> b.model("toy").remote(store, null))) {
            KvRequest a = KvRequest.of("a", concat(prefix, tokens(rnd, 5)));
            admit(first, a);
            first.free(a);
            first.tiers().drain();
            assertThat(admitSamePrefixAndCheck(second)).isEqualTo(16);
        }
    }

    @Test
    void modelsOfOneGeometryShareAStoreOnlyUnderTheSameModelName() {
        InMemoryRemoteStore store = new InMemoryRemoteStore(1 << 20);
        try (KvCacheManager llama = manager(b -> b.model("llama").remote(store, null));
                KvCacheManager mistral = manager(b -> b.model("mistral").remote(store, null));
                KvCacheManager llamaAgain = manager(b -> b.model("llama").remote(store, null))) {
            KvRequest a = KvRequest.of("a", concat(prefix, tokens(rnd, 5)));
            admit(llama, a);
            llama.free(a);
            llama.tiers().drain();
            assertThat(store.size()).isEqualTo(5);
            // same tokens, same geometry, same hash: the block keys are equal, only the model name differs
            assertThat(mistral.lookupCachedTokens(KvRequest.of("m", concat(prefix, tokens(rnd, 6)))))
                    .as("another model's KV")
                    .isZero();
            assertThat(tier(mistral, "remote").hits()).isZero();
            assertThat(admitSamePrefixAndCheck(llamaAgain))
                    .as("the same model's KV")
                    .isEqualTo(16);
            assertThat(tier(llamaAgain, "remote").hits()).isEqualTo(4);
        }
    }

    @Test
    void theDefaultNamespaceNamesTheModelTheGeometryAndTheHash() {
        InMemoryRemoteStore store = new InMemoryRemoteStore(1 << 20);
        KvCacheSpec spec = toySpec();
        try (KvTiers fast = KvTiers.builder(spec)
                        .model("meta-llama/Llama-3.1-8B")
                        .remote(store, null)
                        .build();
                KvTiers sha = KvTiers.builder(spec)
                        .model("meta-llama/Llama-3.1-8B")
                        .hash(HashAlgorithm.SHA256, 7)
                        .remote(store, null)
                        .build();
                KvTiers named = KvTiers.builder(spec).remote(store, "mine:").build()) {
            assertThat(storeKey(fast)).isEqualTo("gpumem:kv:meta-llama/Llama-3.1-8B:2x2x8x4:4:fast128-0:" + KEY_HEX);
            assertThat(storeKey(sha)).isEqualTo("gpumem:kv:meta-llama/Llama-3.1-8B:2x2x8x4:4:sha256-7:" + KEY_HEX);
            assertThat(storeKey(named)).as("a namespace given is used as is").isEqualTo("mine:" + KEY_HEX);
        }
        assertThatThrownBy(() -> KvTiers.builder(spec).remote(store, null).build())
                .isInstanceOf(KvCacheException.class)
                .hasMessageContaining("remote tier: the default namespace needs the model name");
        assertThatThrownBy(() -> KvTiers.builder(spec).model("a:b"))
                .isInstanceOf(KvCacheException.class)
                .hasMessage("model name must be letters, digits and . _ - / (at least one), got 'a:b'");
    }

    @Test
    void aManagerRefusesRemoteTiersBuiltForAnotherHash() {
        InMemoryRemoteStore store = new InMemoryRemoteStore(1 << 20);
        KvCacheSpec spec = toySpec();
        SimulatedDevice device =
                SimulatedDevice.builder().capacity(16L << 20).backed(true).build();
        KvCacheConfig sha = KvCacheConfig.defaults().withHashAlgorithm(HashAlgorithm.SHA256);
        try (KvTiers fastTiers =
                KvTiers.builder(spec).model("toy").remote(store, null).build()) {
            assertThatThrownBy(() -> new KvCacheManager(spec, KvMemory.direct(device), sha, fastTiers))
                    .isInstanceOf(KvCacheException.class)
                    .hasMessageContaining("tiers were built for hash FAST128 seed 0")
                    .hasMessageContaining("hashAlgorithm is SHA256 seed 0");
            assertThat(device.mallocCount())
                    .as("refused before taking device memory")
                    .isZero();
        }
        try (KvCacheManager m = new KvCacheManager(
                spec,
                KvMemory.direct(device),
                sha,
                KvTiers.builder(spec)
                        .model("toy")
                        .hash(HashAlgorithm.SHA256, 0)
                        .remote(store, null)
                        .build())) {
            assertThat(m.tiers().hasRemote()).isTrue();
        }
    }

    private static final String KEY_HEX = "0000000000000001" + "0000000000000002";

    private static String storeKey(KvTiers tiers) {
        return new String(((RemoteTier) tiers.tiers().get(0)).storeKey(1, 2), StandardCharsets.US_ASCII);
    }

    @Test
    void aCorruptDiskBlockIsAMissAndItsTokensAreRecomputed() throws IOException {
        try (KvCacheManager m = manager(b -> b.disk(dir, 1 << 20))) {
            computePrefixThenEvict(m);
            DiskTier disk = (DiskTier) m.tiers().tiers().get(0);
            Path file = disk.fileOf(prefixKeyHi[2], prefixKeyLo[2]);
            assertThat(Files.exists(file)).isTrue();
            try (RandomAccessFile f = new RandomAccessFile(file.toFile(), "rw")) {
                long at = f.length() - 100; // inside the KV payload
                f.seek(at);
                int b = f.read();
                f.seek(at);
                f.write(b ^ 0x40);
            }
            assertThat(admitSamePrefixAndCheck(m)).as("blocks 0 and 1 only").isEqualTo(8);
            assertThat(tier(m, "disk").corrupt()).isEqualTo(1);
            assertThat(Files.exists(file)).as("the damaged file is removed").isFalse();
        }
    }

    @Test
    void aMissingRemoteKeyIsAMiss() {
        InMemoryRemoteStore store = new InMemoryRemoteStore(1 << 20);
        try (KvCacheManager m = manager(b -> b.model("toy").remote(store, null))) {
            computePrefixThenEvict(m);
            RemoteTier remote = (RemoteTier) m.tiers().tiers().get(0);
            store.delete(remote.storeKey(prefixKeyHi[1], prefixKeyLo[1]));
            assertThat(admitSamePrefixAndCheck(m)).as("block 0 only").isEqualTo(4);
        }
    }

    @Test
    void anUnreachableRemoteStoreIsAMissNeverAnError() {
        InMemoryRemoteStore store = new InMemoryRemoteStore(1 << 20);
        try (KvCacheManager m = manager(b -> b.model("toy").remote(store, null).remoteBackoffOps(0))) {
            computePrefixThenEvict(m);
            store.setAvailable(false);
            assertThat(admitSamePrefixAndCheck(m)).isZero();
            m.tiers().drain(); // c's blocks cannot be published either
            assertThat(tier(m, "remote").failed()).isGreaterThanOrEqualTo(2);
        }
    }

    @Test
    void aBlockEvictedTwiceBeforeThePumpIsQueuedAndStoredOnce() {
        try (KvCacheManager m = manager(b -> b.host(1 << 20))) {
            long record = m.tiers().layout().size();
            int[] prompt = concat(prefix, tokens(rnd, 5)); // 5 full blocks
            KvRequest a = KvRequest.of("a", prompt);
            admit(m, a);
            m.free(a);
            KvRequest f1 = KvRequest.of("f1", tokens(rnd, 44));
            admit(m, f1); // evicts a's 5 blocks: queued for the host, not pumped yet
            m.free(f1);
            assertThat(m.tiers().queued(0)).isEqualTo(5);
            // b computes a's 5 blocks again (the queued records are not looked up), then loses them the same way
            KvRequest b = KvRequest.of("b", prompt);
            admit(m, b);
            m.free(b);
            KvRequest f2 = KvRequest.of("f2", tokens(rnd, 44));
            admit(m, f2);
            m.free(f2);
            assertThat(m.tiers().queued(0))
                    .as("a's 5 and f1's 11 blocks; b's 5 have keys already queued")
                    .isEqualTo(16);
            assertThat(m.stats().demotedBlocks()).isEqualTo(16);
            m.tiers().drain();
            TierStats host = tier(m, "host");
            assertThat(host.usedBytes()).isEqualTo(16 * record);
            assertThat(host.stored()).as("records written, each once").isEqualTo(16);
            assertThat(host.bytesIn()).isEqualTo(16 * record);
            assertThat(admitSamePrefixAndCheck(m)).isEqualTo(16);
        }
    }

    @Test
    void aFullWriteQueueDropsInsteadOfWaiting() {
        try (KvCacheManager m = manager(b -> b.host(1 << 20).queueBlocks(2))) {
            KvRequest a = KvRequest.of("a", concat(prefix, tokens(rnd, 5)));
            admit(m, a);
            m.free(a);
            KvRequest filler = KvRequest.of("f", tokens(rnd, 44));
            admit(m, filler); // evicts 5 cached blocks in one step, the queue holds 2
            assertThat(m.tiers().queued(0)).isEqualTo(2);
            assertThat(tier(m, "host").dropped()).isEqualTo(3);
            m.free(filler);
            m.tiers().drain();
            assertThat(tier(m, "host").stored()).isEqualTo(2);
            admitSamePrefixAndCheck(m);
        }
    }
}
