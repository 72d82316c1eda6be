package io.gpumem.kvcache.manager;

import io.gpumem.kvcache.KvCacheException;
import io.gpumem.kvcache.KvCacheSpec;
import io.gpumem.kvcache.hash.BlockHasher;
import io.gpumem.kvcache.memory.HostSwapSpace;
import io.gpumem.kvcache.memory.KvMemory;
import io.gpumem.kvcache.memory.KvPages;
import io.gpumem.kvcache.pool.KvBlockPool;
import io.gpumem.kvcache.tier.BlockIdentity;
import io.gpumem.kvcache.tier.KvTiers;
import io.gpumem.kvcache.tier.TierStats;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The paged KV cache manager (vLLM v1's {@code KVCacheManager} for one full-attention group): prefix
 * lookup, all-or-nothing slot allocation, copy-on-write forks, freeing, preemption by recompute or swap.
 *
 * <h2>Algorithm</h2>
 * <ul>
 *   <li>{@link #lookupCachedTokens}: walks the request's chained block keys left to right over at most
 *       {@code (numTokens − 1) / blockSize} blocks (the last token is always recomputed, for its logits)
 *       and stops at the first block the pool cannot verify, or whose KV the request granted it has not
 *       computed yet (never a hit: its owner may still leave without writing it). The hits are remembered on the request;
 *       a repeated lookup of a request that was not admitted in between is not counted twice in the hit rate.</li>
 *   <li>{@link #allocateSlots}: counts new blocks, copy-on-write copies and hit blocks that sit idle in
 *       the free list; if they exceed the free blocks (or the admission watermark) it returns false with
 *       nothing changed. Otherwise it takes the hits, copies shared blocks it will write into, allocates
 *       the rest, and caches the blocks that became full, up to computed + new tokens: lookahead
 *       (speculative) slots are never cached.</li>
 *   <li>{@link #free} releases the table in reverse order; {@link #preempt} either frees (recompute, the
 *       cache entries survive for the resumed request) or copies the blocks to the host swap space first. Both
 *       first drop the entries of blocks cached at grant time whose tokens were never computed.</li>
 * </ul>
 *
 * <h2>Lower tiers (optional {@link KvTiers})</h2>
 * A cached block the pool evicts is demoted (queued for host, then disk); with a remote store every
 * block is published once its tokens are computed. {@link #lookupCachedTokens} continues a device miss
 * in the tiers: each verified record is promoted into a device block taken from the free list (which
 * may demote the least recently used one), cached under its key after its parent, and left idle like
 * any cached block, so the rest of the manager sees an ordinary device hit. Promotion stops before it
 * would take one of the walk's own idle hits, and is skipped when the request's whole prompt would not
 * fit in the free list (it could not be admitted, and its promoted blocks would be evicted again before
 * its next try). The owner calls {@link #pumpTiers} once per step.
 *
 * <h2>Invariants ({@link #checkInvariants})</h2>
 * The pool's own invariants, plus: every non-null block's count equals the number of live request
 * tables that hold it. Every refused or failed call leaves both intact. Not thread-safe.
 */
public final class KvCacheManager implements AutoCloseable {
    private final KvCacheSpec spec;
    private final KvCacheConfig config;
    private final int blockSize;
    private final KvBlockPool pool;
    private final KvPages pages;
    private final HostSwapSpace swapSpace;
    private final BlockHasher hasher;
    private final long[] keyScratch = new long[2];
    private final PrefixHitWindow hitWindow;
    /** Lookups of requests resumed after a recompute preemption, kept out of {@link #hitWindow} as vLLM does. */
    private long preemptedQueriedTokens;

    private long preemptedHitTokens;
    private final int watermarkBlocks;
    private final Set<KvRequest> live = Collections.newSetFromMap(new IdentityHashMap<>());
    private final Set<KvRequest> swapped = Collections.newSetFromMap(new IdentityHashMap<>());
    private final Map<String, Integer> saltIds = new HashMap<>();
    private final KvTiers tiers;
    /** Per block: the parent's key (or first-block flag) recorded when it was cached, for the tiers. */
    private final long[] parentKeyHi;

    private final long[] parentKeyLo;
    private final boolean[] firstBlock;
    /**
     * Per block: cached at grant time (vLLM caches at allocation) and its KV not yet written by the request that
     * was granted it. Set whenever the manager caches a block, cleared when that request's computed count passes
     * the block's end; meaningful only while the block is cached.
     */
    private final boolean[] kvPending;

    private long[] saltFingerprints = new long[8];
    private final int[] blockTokens;
    /** The block a tier call is about (reused: demotion, publication and lookup allocate nothing). */
    private final BlockIdentity tierBlock = new BlockIdentity();

    private final int[] oneBlock = new int[1];

    private long recomputePreemptions;
    private long swapPreemptions;
    private long swapFallbacks;
    private long copyOnWriteBlocks;
    private long refusedAllocations;
    private long swapInReusedBlocks;
    private long demotedBlocks;
    private long promotedBlocks;

    public KvCacheManager(KvCacheSpec spec, KvMemory memory) {
        this(spec, memory, KvCacheConfig.defaults());
    }

    public KvCacheManager(KvCacheSpec spec, KvMemory memory, KvCacheConfig config) {
        this(spec, memory, config, null);
    }

    /**
     * A manager whose evicted blocks go down into {@code tiers} (null or empty: none). The manager owns
     * the tiers from here on and closes them. Without prefix caching no block is ever cached, so none is
     * demoted, published or looked up: tiers given then (or empty ones) are closed at once, releasing their
     * off-heap memory and disk files, and {@link #tiers()} is null.
     *
     * @throws KvCacheException when tiers with a remote store were built for another block-key hash than
     *     {@code config}'s ({@link KvTiers.Builder#hash}); the caller keeps the tiers then
     */
    public KvCacheManager(KvCacheSpec spec, KvMemory memory, KvCacheConfig config, KvTiers tiers) {
        if (tiers != null
                && config.prefixCaching()
                && tiers.hasRemote()
                && (tiers.hashAlgorithm() != config.hashAlgorithm() || tiers.hashSeed() != config.hashSeed())) {
            // refused before anything is allocated; the caller keeps the tiers
            throw new KvCacheException("tiers were built for hash " + tiers.hashAlgorithm() + " seed "
                    + tiers.hashSeed() + " but the manager's hashAlgorithm is " + config.hashAlgorithm() + " seed "
                    + config.hashSeed() + ": set KvTiers.Builder.hash to match, or their remote namespace would"
                    + " name the wrong hash");
        }
        this.spec = spec;
        this.config = config;
        this.blockSize = spec.blockSize();
        this.pool = new KvBlockPool(spec.numBlocks(), blockSize, config.prefixCaching());
        this.hasher = BlockHasher.create(config.hashAlgorithm(), config.hashSeed());
        this.hitWindow = new PrefixHitWindow(config.hitRateWindow());
        this.watermarkBlocks = (int) Math.ceil(config.watermark() * (spec.numBlocks() - 1));
        this.swapSpace = new HostSwapSpace(config.swapSpaceBytes());
        this.pages = new KvPages(spec, memory);
        this.tiers = tiers == null || tiers.isEmpty() || !config.prefixCaching() ? null : tiers;
        if (tiers != null && this.tiers == null) {
            tiers.close();
        }
        int tracked = this.tiers == null ? 0 : spec.numBlocks();
        this.parentKeyHi = new long[tracked];
        this.parentKeyLo = new long[tracked];
        this.firstBlock = new boolean[tracked];
        this.kvPending = new boolean[spec.numBlocks()];
        this.blockTokens = new int[this.tiers == null ? 0 : blockSize];
        if (this.tiers != null) {
            pool.setEvictionListener(this::demote);
        }
    }

    public KvCacheSpec spec() {
        return spec;
    }

    public KvCacheConfig config() {
        return config;
    }

    public KvBlockPool pool() {
        return pool;
    }

    public KvPages pages() {
        return pages;
    }

    public HostSwapSpace swapSpace() {
        return swapSpace;
    }

    public int blockSize() {
        return blockSize;
    }
    /** The lower tiers, or null when there are none. */
    public KvTiers tiers() {
        return tiers;
    }

    /** Writes queued blocks into the tiers (call once per scheduler step); no-op without tiers. */
    public void pumpTiers() {
        if (tiers != null) {
            tiers.pump();
        }
    }

    /** One snapshot per lower tier, in lookup order (empty without tiers). */
    public List<TierStats> tierStats() {
        return tiers == null ? List.of() : tiers.stats();
    }

    // ------------------------------------------------------------------ prefix lookup

    /**
     * Looks up the longest verified cached prefix of a request that holds no blocks (new, or resumed
     * after recompute); remembers the hit blocks for the next {@link #allocateSlots} and records the
     * lookup in the hit-rate window.
     *
     * @return the number of prompt tokens whose KV is already cached (a multiple of the block size)
     */
    public int lookupCachedTokens(KvRequest r) {
        own(r);
        if (r.numBlocks != 0 || (r.status != RequestStatus.WAITING && r.status != RequestStatus.PREEMPTED)) {
            throw new KvCacheException("request " + r.id() + " is " + r.status + " with " + r.numBlocks
                    + " blocks; prefix lookup is only for waiting or preempted requests");
        }
        boolean retry = r.hasPendingLookup; // a request that could not be admitted is not counted twice
        r.hasPendingLookup = true;
        r.pendingHitBlocks = 0;
        if (!config.prefixCaching()) {
            return 0;
        }
        int maxBlocks = (r.numTokens - 1) / blockSize;
        ensureKeys(r, maxBlocks);
        if (r.pendingHit.length < maxBlocks) {
            int n = Math.max(maxBlocks, r.pendingHit.length * 2);
            r.pendingHit = Arrays.copyOf(r.pendingHit, n);
            r.pendingHitGeneration = Arrays.copyOf(r.pendingHitGeneration, n);
        }
        int parent = KvBlockPool.NONE;
        int hits = 0;
        while (hits < maxBlocks) {
            int b = pool.lookup(
                    r.keyHi[hits], r.keyLo[hits], parent, r.tokens, hits * blockSize, r.adapterId(), r.saltId);
            if (b == KvBlockPool.NONE || kvPending[b]) {
                break; // a block whose KV is not written yet is no hit: see uncacheUncomputed
            }
            r.pendingHitGeneration[hits] = pool.generation(b);
            r.pendingHit[hits++] = b;
            parent = b;
        }
        if (tiers != null) {
            hits = promoteFromTiers(r, hits, maxBlocks);
        }
        r.pendingHitBlocks = hits;
        if (!retry && r.preemptions == 0) {
            hitWindow.record(r.numTokens, (long) hits * blockSize);
        } else if (!retry) { // vLLM keeps a resumed request's lookups out of the hit rate (preempted_queries, _hits)
            preemptedQueriedTokens += r.numTokens;
            preemptedHitTokens += (long) hits * blockSize;
        }
        return hits * blockSize;
    }

    /**
     * Continues a prefix walk that missed on the device in the lower tiers: each block found (verified)
     * is copied into a fresh device block, cached after the previous hit and returned to the free list
     * as an idle cached block. Stops at the first miss, or when taking a block would take one of this
     * walk's idle hits (or none is free).
     */
    private int promoteFromTiers(KvRequest r, int hits, int maxBlocks) {
        // A request that could not be admitted even with every free block would only evict what it
        // promotes before its next try: promote only when its whole prompt fits in the free list.
        if (pool.freeCount() < (r.numTokens + blockSize - 1) / blockSize) {
            return hits;
        }
        while (hits < maxBlocks) {
            int next = pool.peekFree();
            if (next == KvBlockPool.NONE || isPendingHit(r, hits, next)) {
                break;
            }
            boolean first = hits == 0;
            long pHi = first ? 0 : r.keyHi[hits - 1];
            long pLo = first ? 0 : r.keyLo[hits - 1];
            tierBlock.set(
                    r.keyHi[hits],
                    r.keyLo[hits],
                    pHi,
                    pLo,
                    first,
                    r.saltFingerprint,
                    r.adapterId(),
                    r.tokens,
                    hits * blockSize);
            if (tiers.fetch(tierBlock) < 0) {
                break;
            }
            int b = pool.allocate();
            oneBlock[0] = b;
            try {
                tiers.restore(pages, b);
            } catch (RuntimeException e) {
                pool.free(oneBlock, 0, 1);
                throw e;
            }
            pool.cache(
                    b,
                    r.keyHi[hits],
                    r.keyLo[hits],
                    first ? KvBlockPool.NONE : r.pendingHit[hits - 1],
                    r.tokens,
                    hits * blockSize,
                    r.adapterId(),
                    r.saltId);
            parentKeyHi[b] = pHi;
            parentKeyLo[b] = pLo;
            firstBlock[b] = first;
            kvPending[b] = false; // its KV came with the record
            pool.free(oneBlock, 0, 1);
            promotedBlocks++;
            r.pendingHitGeneration[hits] = pool.generation(b);
            r.pendingHit[hits++] = b;
        }
        return hits;
    }

    private static boolean isPendingHit(KvRequest r, int hits, int block) {
        for (int j = 0; j < hits; j++) {
            if (r.pendingHit[j] == block) {
                return true;
            }
        }
        return false;
    }

    /** Eviction listener: the block's key, tokens and KV are intact until this returns. */
    private void demote(int b) {
        pool.copyTokens(b, blockTokens);
        int salt = pool.saltId(b);
        tierBlock.set(
                pool.keyHi(b),
                pool.keyLo(b),
                parentKeyHi[b],
                parentKeyLo[b],
                firstBlock[b],
                salt < saltFingerprints.length ? saltFingerprints[salt] : 0,
                pool.adapter(b),
                blockTokens,
                0);
        if (tiers.demote(pages, b, tierBlock)) {
            demotedBlocks++;
        }
    }

    /** Queues a request's newly computed cached blocks for the remote store (write-through). */
    private void publishComputed(KvRequest r) {
        if (tiers == null || !tiers.hasRemote()) {
            return;
        }
        int computedBlocks = Math.min(Math.min(r.numComputed, r.numTokens) / blockSize, r.numCachedBlocks);
        for (int j = r.numPublished; j < computedBlocks; j++) {
            int b = r.table[j];
            if (pool.isCached(b)) {
                tierBlock.set(
                        r.keyHi[j],
                        r.keyLo[j],
                        j == 0 ? 0 : r.keyHi[j - 1],
                        j == 0 ? 0 : r.keyLo[j - 1],
                        j == 0,
                        r.saltFingerprint,
                        r.adapterId(),
                        r.tokens,
                        j * blockSize);
                tiers.publish(pages, b, tierBlock);
            }
        }
        r.numPublished = Math.max(r.numPublished, computedBlocks);
    }

    // ------------------------------------------------------------------ allocation

    /**
     * Makes room for {@code newTokens} tokens to be computed after the already computed ones (and after
     * the prefix hits of a request being admitted), plus {@code lookahead} speculative slots.
     *
     * @return true if everything was allocated; false if the pool (or the admission watermark) cannot
     *         take it, in which case nothing changed
     * @throws KvCacheException for bad input: unknown tokens, tokens beyond the model length, a finished
     *         or swapped-out request; nothing changes either
     */
    public boolean allocateSlots(KvRequest r, int newTokens, int lookahead) {
        own(r);
        if (r.status == RequestStatus.FINISHED || r.status == RequestStatus.SWAPPED) {
            throw new KvCacheException("request " + r.id() + " is " + r.status + "; cannot allocate slots"
                    + (r.status == RequestStatus.SWAPPED ? " before swapIn" : ""));
        }
        if (newTokens < 0 || lookahead < 0) {
            throw new KvCacheException("request " + r.id() + ": newTokens (" + newTokens + ") and lookahead ("
                    + lookahead + ") must not be negative");
        }
        boolean admitting = r.numBlocks == 0;
        if (!admitting) {
            publishComputed(r);
        }
        int hitBlocks = admitting && r.hasPendingLookup ? validHits(r) : 0;
        int computed = admitting ? hitBlocks * blockSize : r.numComputed;
        // Compared before adding: computed + newTokens wraps in int for a huge newTokens, and a negative end
        // would pass every check below and "allocate" nothing.
        if (newTokens > r.numTokens - computed) {
            throw new KvCacheException("request " + r.id() + ": " + newTokens + " new tokens after " + computed
                    + " computed exceed its " + r.numTokens + " known tokens");
        }
        int end = computed + newTokens;
        if (end > spec.maxModelLen()) {
            throw new KvCacheException(
                    "request " + r.id() + ": " + end + " tokens exceed the max model length " + spec.maxModelLen());
        }
        int slots = (int) Math.min((long) end + lookahead, spec.maxModelLen()); // long: a huge lookahead caps too
        int required = (slots + blockSize - 1) / blockSize;
        int held = r.numBlocks + hitBlocks;
        int newBlocks = Math.max(0, required - held);
        int cowBlocks = 0;
        if (!admitting) {
            for (int j = computed / blockSize; j < r.numBlocks && j * blockSize < slots; j++) {
                if (pool.refCount(r.table[j]) > 1) {
                    cowBlocks++;
                }
            }
        }
        int idleHits = 0;
        for (int j = 0; j < hitBlocks; j++) {
            if (pool.refCount(r.pendingHit[j]) == 0) {
                idleHits++;
            }
        }
        int needed = newBlocks + cowBlocks + idleHits;
        int free = pool.freeCount();
        if (needed > free
                || (admitting
                        && watermarkBlocks > 0
                        && free < spec.numBlocks() - 1
                        && free - needed < watermarkBlocks)) {
            refusedAllocations++;
            return false;
        }
        // From here on only a failing device copy (copy-on-write) can interrupt; every step taken before it
        // leaves the request and the pool consistent, and the failed copy's block is given back.
        ensureTable(r, held + newBlocks);
        if (admitting) {
            for (int j = 0; j < hitBlocks; j++) {
                pool.touch(r.pendingHit[j]);
                r.table[j] = r.pendingHit[j];
            }
            r.numBlocks = hitBlocks;
            r.numComputed = computed;
            r.numCachedBlocks = hitBlocks;
            r.numPublished = hitBlocks;
            r.hasPendingLookup = false;
            r.status = RequestStatus.RUNNING;
            live.add(r);
        } else if (cowBlocks > 0) {
            for (int j = computed / blockSize; j < r.numBlocks && j * blockSize < slots; j++) {
                int old = r.table[j];
                if (pool.refCount(old) > 1) {
                    int fresh = pool.allocate();
                    try {
                        pages.copyBlock(old, fresh);
                    } catch (RuntimeException e) {
                        pool.free(new int[] {fresh}, 0, 1);
                        throw e;
                    }
                    pool.releaseShared(old);
                    r.table[j] = fresh;
                    copyOnWriteBlocks++;
                }
            }
        }
        pool.allocate(newBlocks, r.table, r.numBlocks);
        r.numBlocks += newBlocks;
        cacheFullBlocks(r, end / blockSize);
        return true;
    }

    /**
     * Hits found by {@link #lookupCachedTokens} that still hold what they were found with: a hit block
     * evicted (and maybe reused) since the lookup ends the usable prefix there.
     */
    private int validHits(KvRequest r) {
        int n = 0;
        while (n < r.pendingHitBlocks
                && pool.isCached(r.pendingHit[n])
                && pool.generation(r.pendingHit[n]) == r.pendingHitGeneration[n]) {
            n++;
        }
        return n;
    }

    private void cacheFullBlocks(KvRequest r, int fullBlocks) {
        if (!config.prefixCaching() || fullBlocks <= r.numCachedBlocks) {
            return;
        }
        ensureKeys(r, fullBlocks);
        for (int j = r.numCachedBlocks; j < fullBlocks; j++) {
            int b = r.table[j];
            if (!pool.isCached(b)) {
                pool.cache(
                        b,
                        r.keyHi[j],
                        r.keyLo[j],
                        j == 0 ? KvBlockPool.NONE : r.table[j - 1],
                        r.tokens,
                        j * blockSize,
                        r.adapterId(),
                        r.saltId);
                kvPending[b] = (long) (j + 1) * blockSize > r.numComputed;
                if (tiers != null) {
                    parentKeyHi[b] = j == 0 ? 0 : r.keyHi[j - 1];
                    parentKeyLo[b] = j == 0 ? 0 : r.keyLo[j - 1];
                    firstBlock[b] = j == 0;
                }
            }
        }
        r.numCachedBlocks = fullBlocks;
    }

    /**
     * Told by {@link KvRequest#advanceComputed} that {@code r} wrote the KV of tokens {@code [from, to)}: the
     * blocks those tokens fill up hold their KV now, and a lookup may count them.
     */
    void kvWritten(KvRequest r, int from, int to) {
        for (int j = from / blockSize; j < to / blockSize && j < r.numBlocks; j++) {
            kvPending[r.table[j]] = false;
        }
    }

    private void ensureKeys(KvRequest r, int blocks) {
        if (r.numKeyed >= blocks) {
            return;
        }
        if (r.keyHi.length < blocks) {
            int n = Math.max(blocks, r.keyHi.length * 2);
            r.keyHi = Arrays.copyOf(r.keyHi, n);
            r.keyLo = Arrays.copyOf(r.keyLo, n);
        }
        long adapterKey = (long) r.adapterId() * 0x9E3779B97F4A7C15L;
        for (int j = r.numKeyed; j < blocks; j++) {
            long parentHi = j == 0 ? hasher.rootHi() : r.keyHi[j - 1];
            long parentLo = j == 0 ? hasher.rootLo() : r.keyLo[j - 1];
            long extra = j == 0 ? adapterKey ^ r.saltFingerprint : adapterKey;
            hasher.hash(parentHi, parentLo, r.tokens, j * blockSize, blockSize, extra, keyScratch);
            r.keyHi[j] = keyScratch[0];
            r.keyLo[j] = keyScratch[1];
        }
        r.numKeyed = blocks;
    }

    private static void ensureTable(KvRequest r, int blocks) {
        if (r.table.length < blocks) {
            r.table = Arrays.copyOf(r.table, Math.max(blocks, r.table.length * 2));
        }
    }

    // ------------------------------------------------------------------ free, fork, preempt

    /**
     * Releases a request's blocks (reverse order) or its swapped copy; freeing twice is an error. A
     * request freed before its last grant was computed (aborted mid-step) first loses the cache entries
     * of the blocks that grant filled, as on preemption.
     */
    public void free(KvRequest r) {
        own(r);
        if (r.status == RequestStatus.FINISHED) {
            throw new KvCacheException("request " + r.id() + " freed twice");
        }
        if (r.status == RequestStatus.SWAPPED) {
            swapSpace.release(pages, r.swap);
            r.swap = null;
            swapped.remove(r);
        }
        publishComputed(r);
        uncacheUncomputed(r);
        releaseBlocks(r);
        r.status = RequestStatus.FINISHED;
    }

    /**
     * Blocks are cached when granted (vLLM caches at allocation), before their tokens are computed. A
     * request leaving the pool before computing them must take those entries with it, or a later lookup
     * would share KV that was never written. This holds even when another request shares such a block:
     * a fork taken before the grant was computed never writes into it (writes into shared blocks copy
     * first) and never counted it as computed, so nothing else will ever fill it.
     *
     * <p>No request can have counted such a block as a prefix hit: lookups stop at a block whose KV is
     * still pending ({@code kvPending}). vLLM lets a request hit a block granted to another in the same
     * step, because its engine computes both in that step's batch; but the manager's API lets the owner be
     * preempted or freed after the hit and before computing, which would leave the hitter counting tokens
     * whose KV is never written. Refusing the hit costs only a hit the bundled {@link
     * io.gpumem.kvcache.sched.Scheduler} could take when two waiting requests sharing a new prefix are
     * admitted in one step (the second recomputes it), and it also covers a hitter that was swapped out
     * meanwhile, which rolling hitters back on preemption would not reach. So the worst case of dropping
     * an entry is a lost hit, never a wrong one.
     */
    private void uncacheUncomputed(KvRequest r) {
        for (int j = r.numComputed / blockSize; j < r.numBlocks; j++) {
            int b = r.table[j];
            if (pool.isCached(b)) {
                pool.evict(b);
            }
        }
    }

    private void releaseBlocks(KvRequest r) {
        pool.free(r.table, 0, r.numBlocks);
        r.numBlocks = 0;
        r.numCachedBlocks = 0;
        r.numPublished = 0;
        live.remove(r);
    }

    /**
     * Forks a running request (parallel sampling, beam search): the child shares every block (counts go
     * up) and its tokens; the first write into a shared block copies it ({@link #allocateSlots}).
     */
    public KvRequest fork(KvRequest parent, String childId) {
        own(parent);
        if (parent.status != RequestStatus.RUNNING) {
            throw new KvCacheException(
                    "request " + parent.id() + " is " + parent.status + "; only running requests can fork");
        }
        KvRequest child = parent.copyForFork(childId);
        child.owner = this;
        for (int j = 0; j < child.numBlocks; j++) {
            pool.touch(child.table[j]);
        }
        child.status = RequestStatus.RUNNING;
        live.add(child);
        return child;
    }

    /**
     * Preempts a running request. RECOMPUTE frees its blocks (cache entries stay, so the resumed request
     * re-hits them) and resets its computed tokens; SWAP copies its blocks to the host swap space first, and
     * falls back to recompute when the host budget cannot take them.
     *
     * @return the mode actually applied
     */
    public PreemptionMode preempt(KvRequest r, PreemptionMode mode) {
        own(r);
        if (r.status != RequestStatus.RUNNING) {
            throw new KvCacheException(
                    "request " + r.id() + " is " + r.status + "; only running requests can be preempted");
        }
        boolean fellBack = false;
        if (mode == PreemptionMode.SWAP && !swapSpace.fits(pages, r.numBlocks)) {
            swapFallbacks++;
            mode = PreemptionMode.RECOMPUTE;
            fellBack = true;
        }
        HostSwapSpace.Handle handle = null;
        if (mode == PreemptionMode.SWAP) {
            handle = swapSpace.swapOut(pages, r.table, r.numBlocks); // a failed copy throws before any change
        }
        KvPreemptionEvent.emit(r.id(), mode, fellBack, r.numBlocks, r.numComputed);
        r.preemptions++;
        publishComputed(r);
        // Blocks cached optimistically for tokens granted this step but not computed hold no valid KV yet.
        uncacheUncomputed(r);
        if (mode == PreemptionMode.SWAP) {
            r.swap = handle;
            swapped.add(r);
            releaseBlocks(r);
            r.status = RequestStatus.SWAPPED;
            swapPreemptions++;
        } else {
            releaseBlocks(r);
            r.numComputed = 0;
            r.hasPendingLookup = false;
            r.status = RequestStatus.PREEMPTED;
            recomputePreemptions++;
        }
        return mode;
    }

    /**
     * Brings a swapped request back. Its leading full blocks that are still cached in the pool (they went
     * back to the free list with their keys at swap-out and may not have been reused since) are taken
     * again, verified like any prefix hit; only the other blocks get new pages and are copied back from
     * the host swap space. Returns false (nothing changed) when the pool or the watermark cannot take it.
     */
    public boolean swapIn(KvRequest r) {
        own(r);
        if (r.status != RequestStatus.SWAPPED) {
            throw new KvCacheException("request " + r.id() + " is " + r.status + ", not swapped out");
        }
        int n = r.swap.blocks();
        int reuse = 0;
        int idle = 0;
        if (config.prefixCaching()) {
            int maxReuse = Math.min(Math.min(r.numComputed, r.numTokens) / blockSize, n);
            ensureKeys(r, maxReuse);
            if (r.pendingHit.length < maxReuse) {
                r.pendingHit = Arrays.copyOf(r.pendingHit, maxReuse);
                r.pendingHitGeneration = Arrays.copyOf(r.pendingHitGeneration, maxReuse);
            }
            int parent = KvBlockPool.NONE;
            while (reuse < maxReuse) {
                int b = pool.lookup(
                        r.keyHi[reuse], r.keyLo[reuse], parent, r.tokens, reuse * blockSize, r.adapterId(), r.saltId);
                if (b == KvBlockPool.NONE || kvPending[b]) {
                    break;
                }
                if (pool.refCount(b) == 0) {
                    idle++;
                }
                r.pendingHit[reuse++] = b;
                parent = b;
            }
        }
        int needed = n - reuse + idle;
        int free = pool.freeCount();
        if (needed > free || (watermarkBlocks > 0 && free < spec.numBlocks() - 1 && free - needed < watermarkBlocks)) {
            refusedAllocations++;
            return false;
        }
        ensureTable(r, n);
        for (int j = 0; j < reuse; j++) {
            pool.touch(r.pendingHit[j]);
            r.table[j] = r.pendingHit[j];
        }
        pool.allocate(n - reuse, r.table, reuse);
        try {
            swapSpace.swapIn(pages, r.swap, r.table, reuse);
        } catch (RuntimeException e) {
            pool.free(r.table, 0, n); // the request stays swapped out; its host copy is intact
            throw e;
        }
        swapped.remove(r);
        swapInReusedBlocks += reuse;
        r.swap = null;
        r.numBlocks = n;
        r.numCachedBlocks = reuse;
        r.numPublished = Math.min(r.numComputed, r.numTokens) / blockSize; // published before the swap-out
        r.status = RequestStatus.RUNNING;
        live.add(r);
        cacheFullBlocks(r, Math.min(r.numComputed, r.numTokens) / blockSize);
        return true;
    }

    private void own(KvRequest r) {
        if (r.owner == null) {
            r.owner = this;
            String salt = r.salt();
            if (salt == null) {
                r.saltId = 0;
            } else {
                r.saltId = saltIds.computeIfAbsent(salt, s -> saltIds.size() + 1);
                long f = 0xCBF29CE484222325L;
                for (int i = 0; i < salt.length(); i++) {
                    f = (f ^ salt.charAt(i)) * 0x100000001B3L;
                }
                r.saltFingerprint = f;
                if (r.saltId >= saltFingerprints.length) {
                    saltFingerprints = Arrays.copyOf(saltFingerprints, r.saltId * 2);
                }
                saltFingerprints[r.saltId] = f;
            }
        } else if (r.owner != this) {
            throw new KvCacheException("request " + r.id() + " belongs to another KV cache manager");
        }
    }

    // ------------------------------------------------------------------ metrics

    /** Every counter and gauge at once, as one immutable value. */
    public KvCacheStats stats() {
        return new KvCacheStats(
                pool.usage(),
                pool.usageIncludingCached(),
                hitWindow.rate(),
                hitWindow.totalQueried(),
                hitWindow.totalHits(),
                preemptedQueriedTokens,
                preemptedHitTokens,
                recomputePreemptions,
                swapPreemptions,
                swapFallbacks,
                copyOnWriteBlocks,
                swapInReusedBlocks,
                refusedAllocations,
                live.size(),
                swapped.size(),
                pool.evictions(),
                demotedBlocks,
                promotedBlocks);
    }

    /** Pool invariants plus: each block's count equals the number of live tables holding it. */
    public void checkInvariants() {
        pool.checkInvariants();
        int[] counts = new int[spec.numBlocks()];
        for (KvRequest r : live) {
            if (r.status != RequestStatus.RUNNING) {
                throw new IllegalStateException("live request " + r.id() + " is " + r.status);
            }
            for (int j = 0; j < r.numBlocks; j++) {
                counts[r.table[j]]++;
            }
        }
        for (int b = 1; b < counts.length; b++) {
            if (counts[b] != pool.refCount(b)) {
                throw new IllegalStateException(
                        "block " + b + " has count " + pool.refCount(b) + " but " + counts[b] + " live tables hold it");
            }
        }
    }

    /** Finishes every request still holding blocks or host memory and frees the device regions. */
    @Override
    public void close() {
        for (KvRequest r : live.toArray(new KvRequest[0])) {
            releaseBlocks(r);
            r.status = RequestStatus.FINISHED;
        }
        for (KvRequest r : swapped) {
            swapSpace.release(pages, r.swap);
            r.swap = null;
            r.status = RequestStatus.FINISHED;
        }
        swapped.clear();
        pages.close();
        if (tiers != null) {
            tiers.close();
        }
    }
}
