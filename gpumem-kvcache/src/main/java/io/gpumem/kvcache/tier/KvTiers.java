package io.gpumem.kvcache.tier;

import io.gpumem.kvcache.KvCacheException;
import io.gpumem.kvcache.KvCacheSpec;
import io.gpumem.kvcache.hash.HashAlgorithm;
import io.gpumem.kvcache.manager.KvCacheConfig;
import io.gpumem.kvcache.memory.KvPages;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.regex.Pattern;

/**
 * The storage levels under a KV cache's device pool, in lookup order: host memory, local disk, a remote
 * store shared by instances (each optional), as LMCache and SGLang's HiCache put them under vLLM/SGLang.
 *
 * <h2>Where blocks come from</h2>
 * <ul>
 *   <li><b>Demotion</b> ({@link #demote}): a cached device block about to be reused (evicted) is copied
 *       into a record and queued for the first local tier (host, else disk); a block the host evicts to
 *       stay in its budget is queued for the disk. A block the tier already holds is only marked recently
 *       used, and one already waiting in the tier's queue is left there: nothing is copied.</li>
 *   <li><b>Publication</b> ({@link #publish}): with a remote tier, each block is queued for the store as
 *       soon as its tokens are computed (write-through), so another instance can hit it while this one
 *       still has it on the device.</li>
 * </ul>
 * Writes go through one bounded {@link WriteQueue} per tier and reach the tier only in {@link #pump},
 * which the owner calls once per scheduler step (deterministic: no thread), at most
 * {@code drainBlocks} records per tier per call. A full queue drops the write and counts it.
 *
 * <h2>Lookup</h2>
 * {@link #fetch} asks each tier in order for the key (first its write queue: a record on its way to the tier is
 * already in host memory, and counts as the tier's hit), and trusts a record only if its checksum holds
 * and its header is the block asked for (key, parent key or salt, adapter, tokens), as the device pool
 * verifies a hit; a damaged or foreign record is counted corrupt, removed from a local tier, and the next
 * tier is asked. The caller
 * then puts the record into a device block with {@link #restore}.
 *
 * <p>Not thread-safe; one manager owns it. Closing it closes the tiers (a remote store stays open).
 */
public final class KvTiers implements AutoCloseable {
    /**
     * Most write-queue slots per tier: the queue's index arrays are made whole when the tiers are built (a slot's
     * bytes only when first used), and a million blocks waiting for one tier is far past any drain rate that keeps up.
     */
    public static final int MAX_QUEUE_BLOCKS = 1 << 20;

    private final BlockRecord layout;
    private final BlockTier[] tiers;
    private final WriteQueue[] queues;
    private static final Pattern MODEL_NAME = Pattern.compile("[A-Za-z0-9._/-]+");

    private final int localTiers;
    private final RemoteTier remote;
    private final int drainBlocks;
    private final Arena arena = Arena.ofShared();
    private final MemorySegment scratch;
    private final BlockTier.Spill[] spills;
    private final HashAlgorithm hashAlgorithm;
    private final long hashSeed;

    private KvTiers(Builder b) {
        this.layout = b.layout;
        this.hashAlgorithm = b.hashAlgorithm;
        this.hashSeed = b.hashSeed;
        List<BlockTier> list = new ArrayList<>();
        if (b.hostBytes > 0) {
            list.add(new HostTier(layout, b.hostBytes));
        }
        if (b.diskBytes > 0) {
            list.add(new DiskTier(layout, b.diskDir, b.diskBytes));
        }
        this.localTiers = list.size();
        this.remote = b.remoteStore == null
                ? null
                : new RemoteTier(
                        layout, b.remoteStore, b.namespace != null ? b.namespace : b.defaultNamespace(), b.backoffOps);
        if (remote != null) {
            list.add(remote);
        }
        this.tiers = list.toArray(new BlockTier[0]);
        this.queues = new WriteQueue[tiers.length];
        for (int i = 0; i < tiers.length; i++) {
            queues[i] = new WriteQueue(arena, layout.size(), b.queueBlocks);
        }
        this.drainBlocks = b.drainBlocks;
        this.scratch = arena.allocate(layout.size(), 64);
        this.spills = new BlockTier.Spill[tiers.length];
        for (int t = 0; t < tiers.length; t++) {
            int next = t + 1 < localTiers ? t + 1 : -1;
            spills[t] = next < 0 ? (r, hi, lo) -> {} : (r, hi, lo) -> spill(next, r, hi, lo);
        }
    }

    public static Builder builder(KvCacheSpec spec) {
        return new Builder(spec);
    }

    public BlockRecord layout() {
        return layout;
    }

    /** Whether any tier is configured. */
    public boolean isEmpty() {
        return tiers.length == 0;
    }

    /** The block-key hash the tiers were built for ({@link Builder#hash}); a manager must hash the same way. */
    public HashAlgorithm hashAlgorithm() {
        return hashAlgorithm;
    }

    /** The seed of the block-key hash the tiers were built for. */
    public long hashSeed() {
        return hashSeed;
    }

    /** Whether computed blocks are published to a remote store. */
    public boolean hasRemote() {
        return remote != null;
    }

    /** The tiers in lookup order. */
    public List<BlockTier> tiers() {
        return List.of(tiers);
    }

    /** Records waiting in the write queue of tier {@code i}. */
    public int queued(int i) {
        return queues[i].size();
    }

    /**
     * Queues an evicted device block for the first local tier, unless the tier holds it (then it is only marked
     * recently used) or has it queued already.
     *
     * @return true if the block was copied into the queue; false if the tier holds or has queued it already, the
     *     queue was full (dropped) or there is no local tier
     */
    public boolean demote(KvPages pages, int block, BlockIdentity id) {
        if (localTiers == 0) {
            return false;
        }
        return enqueue(0, pages, block, id);
    }

    /** Queues a freshly computed device block for the remote store (no-op without one). */
    public boolean publish(KvPages pages, int block, BlockIdentity id) {
        if (remote == null) {
            return false;
        }
        return enqueue(tiers.length - 1, pages, block, id);
    }

    private boolean enqueue(int t, KvPages pages, int block, BlockIdentity id) {
        BlockTier tier = tiers[t];
        if (tier.contains(id.hi, id.lo)) {
            tier.touch(id.hi, id.lo);
            return false;
        }
        if (queues[t].contains(id.hi, id.lo)) {
            return false; // evicted (or published) again before the pump: the record on its way is the same block
        }
        MemorySegment slot = queues[t].claim();
        if (slot == null) {
            tier.dropped++;
            return false;
        }
        layout.capture(slot, pages, block, id);
        queues[t].commit(id.hi, id.lo);
        return true;
    }

    /**
     * Writes up to {@code drainBlocks} queued records into each tier, slowest last, so a record the host
     * evicts in this call can reach the disk queue in the same call.
     */
    public void pump() {
        for (int t = 0; t < tiers.length; t++) {
            WriteQueue q = queues[t];
            BlockTier tier = tiers[t];
            for (int n = 0; n < drainBlocks && q.size() > 0; n++) {
                MemorySegment record = q.headRecord();
                // Counts as a write: a key reaches a queue only when the tier neither holds nor has queued it.
                if (tier.store(record, q.headHi(), q.headLo(), spills[t])) {
                    tier.stored++;
                    tier.bytesIn += layout.size();
                }
                q.pop();
            }
        }
    }

    /** Pumps until every queue is empty (tests, shutdown). */
    public void drain() {
        boolean more = true;
        while (more) {
            pump();
            more = false;
            for (WriteQueue q : queues) {
                more |= q.size() > 0;
            }
        }
    }

    private void spill(int t, MemorySegment record, long hi, long lo) {
        BlockTier tier = tiers[t];
        if (tier.contains(hi, lo)) {
            tier.touch(hi, lo);
            return;
        }
        if (queues[t].contains(hi, lo)) {
            return;
        }
        MemorySegment slot = queues[t].claim();
        if (slot == null) {
            tier.dropped++;
            return;
        }
        MemorySegment.copy(record, 0, slot, 0, layout.size());
        queues[t].commit(hi, lo);
    }

    /**
     * Looks for the block {@code id} names in each tier in order; on success the record waits in a scratch buffer for
     * {@link #restore}.
     *
     * @return the index of the tier that had it, or −1
     */
    public int fetch(BlockIdentity id) {
        for (int t = 0; t < tiers.length; t++) {
            BlockTier tier = tiers[t];
            MemorySegment queued = queues[t].recordOf(id.hi, id.lo);
            if (queued != null) {
                // Evicted (or published) since the last pump: the record waits, whole, in the queue. One naming
                // another block under the key is of no use, and the tier is asked as if it were not there.
                MemorySegment.copy(queued, 0, scratch, 0, layout.size());
                if (layout.intact(scratch) && layout.matches(scratch, id)) {
                    tier.hits++;
                    tier.bytesOut += layout.size();
                    return t;
                }
            }
            if (!tier.load(id.hi, id.lo, scratch)) {
                tier.misses++;
                continue;
            }
            tier.bytesOut += layout.size();
            // A damaged record, or an intact one naming another block under this key (a hash collision, another
            // geometry), is of no use to anyone asking for this key: a local tier keeps one record per key and
            // never replaces it, so left in place it would keep the right block out for good. Both count as corrupt
            // and go (a remote tier leaves the value for its store to overwrite or evict).
            if (!layout.intact(scratch) || !layout.matches(scratch, id)) {
                tier.corrupt++;
                tier.misses++;
                tier.remove(id.hi, id.lo);
                continue;
            }
            tier.hits++;
            tier.touch(id.hi, id.lo);
            return t;
        }
        return -1;
    }

    /** Copies the record found by the last successful {@link #fetch} into a device block. */
    public void restore(KvPages pages, int block) {
        layout.restore(scratch, pages, block);
    }

    /** One snapshot per tier, in lookup order. */
    public List<TierStats> stats() {
        List<TierStats> out = new ArrayList<>(tiers.length);
        for (BlockTier t : tiers) {
            out.add(t.stats());
        }
        return out;
    }

    @Override
    public void close() {
        for (BlockTier t : tiers) {
            t.close();
        }
        arena.close();
    }

    /**
     * Settings: budgets of 0 leave a tier out. Defaults: queues of 256 blocks per tier, 64 blocks written
     * per tier per {@link #pump}, remote back-off of 64 operations after a failure, the block-key hash of
     * {@link KvCacheConfig#defaults()} (FAST128, seed 0). A remote tier with the default namespace needs the
     * model's name.
     */
    public static final class Builder {
        private final BlockRecord layout;
        private final KvCacheSpec spec;
        private long hostBytes;
        private long diskBytes;
        private Path diskDir;
        private RemoteKvStore remoteStore;
        private String namespace;
        private String model;
        private HashAlgorithm hashAlgorithm = KvCacheConfig.defaults().hashAlgorithm();
        private long hashSeed = KvCacheConfig.defaults().hashSeed();
        private int queueBlocks = 256;
        private int drainBlocks = 64;
        private int backoffOps = 64;

        private Builder(KvCacheSpec spec) {
            this.spec = spec;
            this.layout = new BlockRecord(spec);
        }

        public Builder host(long bytes) {
            this.hostBytes = nonNegative("host tier bytes", bytes);
            return this;
        }

        public Builder disk(Path dir, long bytes) {
            this.diskDir = dir;
            this.diskBytes = nonNegative("disk tier bytes", bytes);
            return this;
        }

        /**
         * A shared store; keys are prefixed with {@code namespace} (null: one naming the model, the KV geometry
         * and the block-key hash, {@code
         * gpumem:kv:<model>:<layers>x<kvHeads>x<headSize>x<elementSize>:<blockSize>:<hash>-<seed>:}, which needs
         * {@link #model}). Instances sharing a store read each other's blocks exactly when their namespaces are
         * equal.
         */
        public Builder remote(RemoteKvStore store, String namespace) {
            this.remoteStore = store;
            this.namespace = namespace;
            return this;
        }

        /**
         * The name of the model whose KV the tiers hold (e.g. {@code meta-llama/Llama-3.1-8B}): letters, digits
         * and {@code . _ - /}. It goes into the default remote namespace, because two models of the same KV
         * geometry give the same block keys for the same tokens but different KV.
         */
        public Builder model(String name) {
            if (name == null || !MODEL_NAME.matcher(name).matches()) {
                throw new KvCacheException("model name must be letters, digits and . _ - / (at least one), got "
                        + (name == null ? "null" : "'" + name + "'"));
            }
            this.model = name;
            return this;
        }

        /**
         * The block-key hash of the manager these tiers go under (its {@link KvCacheConfig#hashAlgorithm()} and
         * {@link KvCacheConfig#hashSeed()}); it names the default remote namespace, and the manager refuses tiers
         * built for another hash.
         */
        public Builder hash(HashAlgorithm algorithm, long seed) {
            if (algorithm == null) {
                throw new KvCacheException("hash algorithm must not be null");
            }
            this.hashAlgorithm = algorithm;
            this.hashSeed = seed;
            return this;
        }

        private String defaultNamespace() {
            return "gpumem:kv:" + model + ":" + spec.layers() + "x" + spec.kvHeads() + "x" + spec.headSize() + "x"
                    + spec.elementSize() + ":" + spec.blockSize() + ":"
                    + hashAlgorithm.name().toLowerCase(Locale.ROOT)
                    + "-" + hashSeed + ":";
        }

        /** Write-queue slots per tier, 1 to {@link #MAX_QUEUE_BLOCKS}. */
        public Builder queueBlocks(int n) {
            if (n > MAX_QUEUE_BLOCKS) {
                throw new KvCacheException("queue blocks " + n + " is over the limit of " + MAX_QUEUE_BLOCKS);
            }
            this.queueBlocks = (int) positive("queue blocks", n);
            return this;
        }

        public Builder drainBlocks(int n) {
            this.drainBlocks = (int) positive("drain blocks", n);
            return this;
        }

        public Builder remoteBackoffOps(int n) {
            this.backoffOps = (int) nonNegative("remote back-off operations", n);
            return this;
        }

        public KvTiers build() {
            if (diskBytes > 0 && diskDir == null) {
                throw new KvCacheException("disk tier: a directory is needed");
            }
            if (remoteStore != null && namespace == null && model == null) {
                throw new KvCacheException(
                        "remote tier: the default namespace needs the model name (model(...)),"
                                + " so that models of the same KV geometry never read each other's blocks; or give a namespace");
            }
            return new KvTiers(this);
        }

        private static long nonNegative(String what, long v) {
            if (v < 0) {
                throw new KvCacheException(what + " must not be negative, got " + v);
            }
            return v;
        }

        private static long positive(String what, long v) {
            if (v <= 0) {
                throw new KvCacheException(what + " must be positive, got " + v);
            }
            return v;
        }
    }
}
