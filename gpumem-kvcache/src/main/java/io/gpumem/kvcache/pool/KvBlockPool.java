package io.gpumem.kvcache.pool;

import io.gpumem.kvcache.KvCacheException;
import java.util.Arrays;

/**
 * The physical block pool of a paged KV cache, with vLLM v1's semantics and no object per block.
 *
 * <h2>State (all primitive arrays indexed by block id)</h2>
 * <ul>
 *   <li>{@code refCount}: how many requests hold the block. Block 0 is the <b>null block</b>
 *       (placeholder for skipped positions): never free, its count is not maintained.</li>
 *   <li>{@code prev}/{@code next}: an intrusive doubly linked <b>free list</b> (LRU: head is reused
 *       first) holding every block with count 0: clean blocks and <i>cached-but-unreferenced</i>
 *       blocks, which keep their key and contents until popped (lazy eviction). Initially ordered by
 *       id. O(1) pop-head, push-head, push-tail and remove-anywhere.</li>
 *   <li>key ({@code keyHi}/{@code keyLo}), the block's tokens, adapter, salt id, parent block and the
 *       parent's generation: set once when the block becomes full and is cached, cleared on eviction
 *       (which also bumps the block's {@code generation}, as does handing out again a block that holds no cache
 *       entry: a child cached after such a parent must not match once the parent holds other tokens).</li>
 *   <li>a {@link BlockHashMap} from key to block ids (duplicates allowed: no de-duplication, because
 *       block tables are append-only).</li>
 * </ul>
 *
 * <h2>Rules (kv-cache.md §1.3–§1.4)</h2>
 * <ul>
 *   <li>{@link #allocate} pops the head; if the popped block is cached its key is evicted then.</li>
 *   <li>{@link #touch} takes a prefix-hit block: out of the free list if its count was 0, count+1.</li>
 *   <li>{@link #free(int[], int, int)} releases a request's blocks in <b>reverse</b> table order; a block
 *       reaching 0 goes to the <b>tail</b> if cached (so a chain's tail is evicted before its head) and
 *       to the <b>head</b> if not cached (fresh blocks are reused before any cache entry is lost).</li>
 *   <li>{@link #lookup} never trusts the key alone: a candidate must have the same tokens, adapter,
 *       and the same parent <i>block</i> (still holding the same cached contents, checked through its
 *       generation) or a verified duplicate of it, or, for the first block, the same salt. So a colliding
 *       key cannot give a wrong hit.</li>
 * </ul>
 *
 * <h2>Invariants ({@link #checkInvariants})</h2>
 * A non-null block is in the free list iff its count is 0; counts are never negative; the list is
 * consistent and its length is {@link #freeCount()}; a block is in the map iff it is cached, under its
 * own key, exactly once. Not thread-safe: one manager owns it.
 */
public final class KvBlockPool {
    /** The null block's id. */
    public static final int NULL_BLOCK = 0;
    /** "No block" (empty list end, no parent). */
    public static final int NONE = -1;

    private static final byte IN_FREE = 1;
    private static final byte CACHED = 2;

    private final int numBlocks;
    private final int blockSize;
    private final boolean cachingEnabled;

    private final int[] refCount;
    private final int[] prev;
    private final int[] next;
    private final byte[] flags;
    private final long[] keyHi;
    private final long[] keyLo;
    private final int[] generation;
    private final int[] parentBlock;
    private final int[] parentGeneration;
    private final int[] adapter;
    private final int[] salt;
    private final int[] tokens;
    private final BlockHashMap map;

    private EvictionListener evictionListener;
    private int head = NONE;
    private int tail = NONE;
    private int freeCount;
    private int freeCachedCount;
    private long evictions;

    /**
     * @param numBlocks blocks including the null block; at least 2
     * @param blockSize tokens per block
     * @param cachingEnabled whether full blocks may be cached for prefix reuse
     */
    public KvBlockPool(int numBlocks, int blockSize, boolean cachingEnabled) {
        if (numBlocks < 2) {
            throw new KvCacheException(
                    "KvBlockPool: numBlocks must be at least 2 (the null block and one real block), got " + numBlocks);
        }
        if (blockSize <= 0) {
            throw new KvCacheException("KvBlockPool: blockSize must be positive, got " + blockSize);
        }
        this.numBlocks = numBlocks;
        this.blockSize = blockSize;
        this.cachingEnabled = cachingEnabled;
        refCount = new int[numBlocks];
        prev = new int[numBlocks];
        next = new int[numBlocks];
        flags = new byte[numBlocks];
        keyHi = new long[numBlocks];
        keyLo = new long[numBlocks];
        generation = new int[numBlocks];
        parentBlock = new int[numBlocks];
        parentGeneration = new int[numBlocks];
        adapter = new int[numBlocks];
        salt = new int[numBlocks];
        tokens = cachingEnabled ? new int[Math.multiplyExact(numBlocks, blockSize)] : new int[0];
        map = new BlockHashMap(cachingEnabled ? numBlocks : 1);
        Arrays.fill(parentBlock, NONE);
        prev[NULL_BLOCK] = NONE;
        next[NULL_BLOCK] = NONE;
        for (int b = 1; b < numBlocks; b++) {
            pushTail(b);
        }
    }

    /**
     * Told about a cached block just before allocation takes it and drops its entry: its key, tokens and
     * device contents are still intact during the call, which must not change the pool. Explicit
     * invalidation ({@link #evict}, {@link #resetPrefixCache}) is not reported: that KV is not to be kept.
     */
    @FunctionalInterface
    public interface EvictionListener {
        void evicting(int block);
    }

    /** Installs the listener told about blocks evicted by allocation (null: none). */
    public void setEvictionListener(EvictionListener listener) {
        this.evictionListener = listener;
    }

    public int numBlocks() {
        return numBlocks;
    }

    public int blockSize() {
        return blockSize;
    }

    public boolean cachingEnabled() {
        return cachingEnabled;
    }

    /** Blocks in the free list (clean plus cached-idle). */
    public int freeCount() {
        return freeCount;
    }

    /** Blocks in the free list that still hold a cache entry. */
    public int freeCachedCount() {
        return freeCachedCount;
    }

    /** Cache entries evicted so far (lazily, when their block was reused, or explicitly). */
    public long evictions() {
        return evictions;
    }

    /** Number of blocks currently cached (referenced or idle). */
    public int cachedCount() {
        return map.size();
    }

    public int refCount(int block) {
        return refCount[checkId(block)];
    }

    public boolean isCached(int block) {
        return (flags[checkId(block)] & CACHED) != 0;
    }

    public boolean isFree(int block) {
        return (flags[checkId(block)] & IN_FREE) != 0;
    }

    /**
     * The block's generation: it changes whenever the block's contents may change (it loses its cache entry, or
     * is handed out again without one), so a caller holding a lookup result can tell whether the block still holds
     * the contents it was found with, and a cached child whether its parent still does.
     */
    public int generation(int block) {
        return generation[checkId(block)];
    }

    /** High half of the block's key (meaningful only when cached). */
    public long keyHi(int block) {
        return keyHi[block];
    }

    /** Low half of the block's key (meaningful only when cached). */
    public long keyLo(int block) {
        return keyLo[block];
    }

    /** The block {@link #allocate()} would take next, or {@link #NONE}. */
    public int peekFree() {
        return head;
    }

    /** The adapter id a cached block was cached with. */
    public int adapter(int block) {
        return adapter[checkId(block)];
    }

    /** The salt id a cached block was cached with. */
    public int saltId(int block) {
        return salt[checkId(block)];
    }

    /** Copies a cached block's tokens into {@code dst[0..blockSize)}. */
    public void copyTokens(int block, int[] dst) {
        System.arraycopy(tokens, checkId(block) * blockSize, dst, 0, blockSize);
    }

    /** vLLM's usage: {@code 1 − free/(N−1)}; cached-idle blocks count as free. */
    public double usage() {
        return 1.0 - (double) freeCount / (numBlocks - 1);
    }

    /** Usage that counts cached-idle blocks as used: the cache's real residency. */
    public double usageIncludingCached() {
        return 1.0 - (double) (freeCount - freeCachedCount) / (numBlocks - 1);
    }

    // ------------------------------------------------------------------ allocation

    /** Pops the least recently used free block, evicting its cache entry if any; count becomes 1. */
    public int allocate() {
        int b = head;
        if (b == NONE) {
            throw new KvCacheException(
                    "KvBlockPool: no free block (all " + (numBlocks - 1) + " blocks are referenced)");
        }
        unlink(b);
        if ((flags[b] & CACHED) != 0) {
            if (evictionListener != null) {
                evictionListener.evicting(b);
            }
            uncache(b);
        } else {
            generation[b]++; // new contents: a block cached after this one as its parent must not match any more
        }
        refCount[b] = 1;
        return b;
    }

    /** Allocates {@code n} blocks into {@code dst[offset..]}, all or nothing. */
    public void allocate(int n, int[] dst, int offset) {
        if (n > freeCount) {
            throw new KvCacheException("KvBlockPool: asked for " + n + " blocks, only " + freeCount + " free");
        }
        // Batched pop: walk n blocks from the head, then cut the list once.
        int b = head;
        int cachedTaken = 0;
        for (int i = 0; i < n; i++) {
            dst[offset + i] = b;
            byte f = flags[b];
            if ((f & CACHED) != 0) {
                cachedTaken++;
                if (evictionListener != null) {
                    evictionListener.evicting(b);
                }
                uncache(b);
            } else {
                generation[b]++;
            }
            flags[b] &= ~IN_FREE;
            refCount[b] = 1;
            int nb = next[b];
            prev[b] = NONE;
            next[b] = NONE;
            b = nb;
        }
        head = b;
        if (b == NONE) {
            tail = NONE;
        } else {
            prev[b] = NONE;
        }
        freeCount -= n;
        freeCachedCount -= cachedTaken;
    }

    /** Takes one more reference to a block (a prefix hit or a fork); removes it from the free list at 0. */
    public void touch(int block) {
        checkId(block);
        if (block == NULL_BLOCK) {
            return;
        }
        if (refCount[block] == 0) {
            unlink(block);
        }
        refCount[block]++;
    }

    /**
     * Drops one reference from a block the caller knows is still shared (count above 1); used by
     * copy-on-write. Never puts a block in the free list.
     */
    public void releaseShared(int block) {
        checkId(block);
        if (block == NULL_BLOCK) {
            return;
        }
        if (refCount[block] <= 1) {
            throw new KvCacheException(
                    "KvBlockPool: releaseShared on block " + block + " with count " + refCount[block]);
        }
        refCount[block]--;
    }

    /**
     * Releases the blocks {@code table[from..to)} of one request, in reverse order; blocks reaching
     * count 0 return to the free list (cached ones at the tail, fresh ones at the head). Every block is
     * checked first, so a bad id or a double release changes nothing.
     */
    public void free(int[] table, int from, int to) {
        for (int i = from; i < to; i++) {
            checkId(table[i]);
        }
        // Count down first, so that a block listed twice in one call is checked against the count it has by then
        // (each release must find a reference), and undo every step if one does not.
        for (int i = from; i < to; i++) {
            int b = table[i];
            if (b == NULL_BLOCK) {
                continue;
            }
            if (refCount[b] <= 0) {
                for (int j = from; j < i; j++) {
                    if (table[j] != NULL_BLOCK) {
                        refCount[table[j]]++;
                    }
                }
                throw new KvCacheException("KvBlockPool: block " + b + " released while not referenced (double free)");
            }
            refCount[b]--;
        }
        for (int i = to - 1; i >= from; i--) {
            int b = table[i];
            if (b != NULL_BLOCK && refCount[b] == 0 && (flags[b] & (CACHED | IN_FREE)) == CACHED) {
                pushTail(b);
            }
        }
        // Fresh blocks go to the head, the request's last block ending up first (PR #33710: reuse blocks
        // without a cache entry before evicting any entry).
        for (int i = from; i < to; i++) {
            int b = table[i];
            if (b != NULL_BLOCK && refCount[b] == 0 && (flags[b] & IN_FREE) == 0) {
                pushHead(b);
            }
        }
    }

    // ------------------------------------------------------------------ prefix cache

    /**
     * Caches a full, referenced block under {@code key}, remembering its tokens, adapter, salt and parent
     * block (NONE for a request's first block) for verification.
     */
    public void cache(
            int block, long hi, long lo, int parent, int[] blockTokens, int offset, int adapterId, int saltId) {
        checkId(block);
        if (!cachingEnabled) {
            throw new KvCacheException("KvBlockPool: prefix caching is off");
        }
        if (block == NULL_BLOCK || refCount[block] <= 0) {
            throw new KvCacheException("KvBlockPool: cannot cache block " + block + " (null or unreferenced)");
        }
        if ((flags[block] & CACHED) != 0) {
            throw new KvCacheException("KvBlockPool: block " + block + " is already cached");
        }
        if (parent != NONE) {
            checkId(parent);
        }
        flags[block] |= CACHED;
        keyHi[block] = hi;
        keyLo[block] = lo;
        parentBlock[block] = parent;
        parentGeneration[block] = parent == NONE ? 0 : generation[parent];
        adapter[block] = adapterId;
        salt[block] = saltId;
        System.arraycopy(blockTokens, offset, tokens, block * blockSize, blockSize);
        map.put(hi, lo, block);
    }

    /**
     * Finds a cached block with this key whose contents provably follow {@code parent}: same tokens,
     * same adapter, and either both are first blocks with the same salt, or its recorded parent is
     * unchanged since (same generation) and is {@code parent} or a duplicate of it (see
     * {@link #samePrefix}). Returns the block id, or {@link #NONE}.
     */
    public int lookup(long hi, long lo, int parent, int[] blockTokens, int offset, int adapterId, int saltId) {
        if (!cachingEnabled) {
            return NONE;
        }
        int[] ids = map.block;
        for (int s = map.homeSlot(hi, lo); ids[s] != BlockHashMap.EMPTY; s = map.nextSlot(s)) {
            if (map.keyHi[s] != hi || map.keyLo[s] != lo) {
                continue;
            }
            int c = ids[s];
            if (adapter[c] != adapterId) {
                continue;
            }
            int p = parentBlock[c];
            if (parent == NONE
                    ? p != NONE || salt[c] != saltId
                    : p == NONE || parentGeneration[c] != generation[p] || (p != parent && !samePrefix(p, parent))) {
                continue;
            }
            if (Arrays.equals(
                    tokens, c * blockSize, c * blockSize + blockSize, blockTokens, offset, offset + blockSize)) {
                return c;
            }
        }
        return NONE;
    }

    /**
     * Whether two cached blocks hold the KV of the same prefix. Blocks are not de-duplicated, so the same
     * prefix block can exist twice (a request whose last prompt token had to be recomputed computes that
     * block again), and a chain may continue from either copy; a walk that took the other copy must still
     * find it, as vLLM's key-only lookup does. Compared level by level up to where the two chains meet
     * (or both reach a first block with the same salt): key, adapter and tokens equal, every parent link
     * still valid. Only runs when a candidate's parent is not the walk's block, i.e. for duplicates or
     * colliding keys.
     */
    private boolean samePrefix(int x, int y) {
        while (x != y) {
            if ((flags[x] & CACHED) == 0
                    || (flags[y] & CACHED) == 0
                    || keyHi[x] != keyHi[y]
                    || keyLo[x] != keyLo[y]
                    || adapter[x] != adapter[y]
                    || !Arrays.equals(
                            tokens,
                            x * blockSize,
                            x * blockSize + blockSize,
                            tokens,
                            y * blockSize,
                            y * blockSize + blockSize)) {
                return false;
            }
            int px = parentBlock[x];
            int py = parentBlock[y];
            if (px == NONE || py == NONE) {
                return px == py && salt[x] == salt[y];
            }
            if (parentGeneration[x] != generation[px] || parentGeneration[y] != generation[py]) {
                return false;
            }
            x = px;
            y = py;
        }
        return true;
    }

    /** Drops the cache entry of a block (explicit invalidation); contents and count are unchanged. */
    public boolean evict(int block) {
        checkId(block);
        if ((flags[block] & CACHED) == 0) {
            return false;
        }
        if ((flags[block] & IN_FREE) != 0) {
            freeCachedCount--;
        }
        uncache(block);
        return true;
    }

    /**
     * Clears every cache entry; only allowed when no block is referenced (as vLLM). Free-list order is
     * restored to block-id order, so repeated resets do not scatter later block tables (vLLM RFC #40244).
     */
    public boolean resetPrefixCache() {
        if (freeCount != numBlocks - 1) {
            return false;
        }
        map.clear();
        head = tail = NONE;
        freeCount = 0;
        freeCachedCount = 0;
        for (int b = 1; b < numBlocks; b++) {
            if ((flags[b] & CACHED) != 0) {
                generation[b]++;
                evictions++; // explicit evictions count as the lazy ones do
            }
            flags[b] = 0;
            parentBlock[b] = NONE;
            pushTail(b);
        }
        return true;
    }

    private void uncache(int b) {
        map.remove(keyHi[b], keyLo[b], b);
        flags[b] &= ~CACHED;
        parentBlock[b] = NONE;
        generation[b]++;
        evictions++;
    }

    // ------------------------------------------------------------------ free list

    /** Block ids of the free list from head (reused first) to tail; for tests and reports. */
    public int[] freeListOrder() {
        int[] out = new int[freeCount];
        int i = 0;
        for (int b = head; b != NONE; b = next[b]) {
            out[i++] = b;
        }
        return out;
    }

    private void pushTail(int b) {
        prev[b] = tail;
        next[b] = NONE;
        if (tail == NONE) {
            head = b;
        } else {
            next[tail] = b;
        }
        tail = b;
        linked(b);
    }

    private void pushHead(int b) {
        next[b] = head;
        prev[b] = NONE;
        if (head == NONE) {
            tail = b;
        } else {
            prev[head] = b;
        }
        head = b;
        linked(b);
    }

    private void linked(int b) {
        flags[b] |= IN_FREE;
        freeCount++;
        if ((flags[b] & CACHED) != 0) {
            freeCachedCount++;
        }
    }

    private void unlink(int b) {
        int p = prev[b];
        int n = next[b];
        if (p == NONE) {
            head = n;
        } else {
            next[p] = n;
        }
        if (n == NONE) {
            tail = p;
        } else {
            prev[n] = p;
        }
        prev[b] = NONE;
        next[b] = NONE;
        flags[b] &= ~IN_FREE;
        freeCount--;
        if ((flags[b] & CACHED) != 0) {
            freeCachedCount--;
        }
    }

    private int checkId(int block) {
        if (block < 0 || block >= numBlocks) {
            throw new KvCacheException("KvBlockPool: block id " + block + " out of range [0, " + numBlocks + ")");
        }
        return block;
    }

    // ------------------------------------------------------------------ invariants

    /** Verifies every invariant in the class comment; throws {@link IllegalStateException} naming the first breach. */
    public void checkInvariants() {
        if ((flags[NULL_BLOCK] & (IN_FREE | CACHED)) != 0) {
            throw new IllegalStateException("null block is free or cached");
        }
        int listed = 0;
        int listedCached = 0;
        int last = NONE;
        for (int b = head; b != NONE; b = next[b]) {
            if (++listed > numBlocks) {
                throw new IllegalStateException("free list has a cycle");
            }
            if (prev[b] != last) {
                throw new IllegalStateException(
                        "free list: prev of block " + b + " is " + prev[b] + ", expected " + last);
            }
            if ((flags[b] & IN_FREE) == 0) {
                throw new IllegalStateException("block " + b + " is linked in the free list but not flagged free");
            }
            if ((flags[b] & CACHED) != 0) {
                listedCached++;
            }
            last = b;
        }
        if (last != tail) {
            throw new IllegalStateException("free list tail is " + tail + ", walk ended at " + last);
        }
        if (listed != freeCount || listedCached != freeCachedCount) {
            throw new IllegalStateException("free list holds " + listed + " blocks (" + listedCached
                    + " cached), counters say " + freeCount + " (" + freeCachedCount + ")");
        }
        int cached = 0;
        for (int b = 1; b < numBlocks; b++) {
            if (refCount[b] < 0) {
                throw new IllegalStateException("block " + b + " has negative count " + refCount[b]);
            }
            boolean inFree = (flags[b] & IN_FREE) != 0;
            if (inFree != (refCount[b] == 0)) {
                throw new IllegalStateException(
                        "block " + b + " count " + refCount[b] + " but " + (inFree ? "" : "not ") + "in the free list");
            }
            if ((flags[b] & CACHED) != 0) {
                cached++;
                if (!map.contains(keyHi[b], keyLo[b], b)) {
                    throw new IllegalStateException("cached block " + b + " missing from the hash map");
                }
            }
        }
        if (cached != map.size()) {
            throw new IllegalStateException(
                    "hash map holds " + map.size() + " entries for " + cached + " cached blocks");
        }
    }
}
