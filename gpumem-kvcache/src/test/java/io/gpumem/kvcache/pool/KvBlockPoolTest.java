package io.gpumem.kvcache.pool;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.kvcache.KvCacheException;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

/** Golden tests for the free-list and cache rules of kv-cache.md §1.3–§1.4 and §1.8. */
class KvBlockPoolTest {
    private static final int BS = 4;

    private static int[] tokens(int seed) {
        return new int[] {seed, seed + 1, seed + 2, seed + 3};
    }

    /** Caches a block with a key derived from {@code seed} as a first block (no parent). */
    private static void cacheFirst(KvBlockPool pool, int block, int seed) {
        pool.cache(block, seed, ~seed, KvBlockPool.NONE, tokens(seed), 0, 0, 0);
    }

    @Test
    void startsWithEveryBlockButTheNullBlockFreeInIdOrder() {
        KvBlockPool pool = new KvBlockPool(6, BS, true);
        assertThat(pool.freeListOrder()).containsExactly(1, 2, 3, 4, 5);
        assertThat(pool.freeCount()).isEqualTo(5);
        assertThat(pool.usage()).isZero();
        assertThat(pool.allocate()).isEqualTo(1);
        assertThat(pool.refCount(1)).isEqualTo(1);
        pool.checkInvariants();
    }

    /**
     * A block listed twice in one release is a double release too: refused with nothing changed (each entry was
     * checked against the count before the call, and the count went to -1).
     */
    @Test
    void aBlockReleasedTwiceInOneCallIsRefusedWithNothingChanged() {
        KvBlockPool pool = new KvBlockPool(8, BS, true);
        int other = pool.allocate();
        int b = pool.allocate();
        int[] before = pool.freeListOrder();
        assertThatThrownBy(() -> pool.free(new int[] {other, b, b}, 0, 3))
                .isInstanceOf(KvCacheException.class)
                .hasMessageContaining("block " + b + " released while not referenced");
        assertThat(pool.refCount(b)).isEqualTo(1);
        assertThat(pool.refCount(other)).isEqualTo(1);
        assertThat(pool.freeListOrder()).containsExactly(before);
        pool.checkInvariants();
        pool.free(new int[] {other, b}, 0, 2);
        assertThat(pool.refCount(b)).isZero();
        pool.checkInvariants();
    }

    /**
     * A child cached after a parent block that holds no cache entry (a copy-on-write copy, say) must stop matching
     * once that parent is handed out again for other tokens, even under a colliding key: the parent's generation
     * changes when it is reused, not only when it loses a cache entry.
     */
    @Test
    void aChildStopsMatchingOnceItsUncachedParentHoldsOtherTokens() {
        KvBlockPool pool = new KvBlockPool(8, BS, true);
        int parent = pool.allocate(); // holds {1, 2}, never cached
        int child = pool.allocate();
        int[] childTokens = new int[BS];
        Arrays.fill(childTokens, 5);
        pool.cache(child, 7, 7, parent, childTokens, 0, 0, 0);
        assertThat(pool.lookup(7, 7, parent, childTokens, 0, 0, 0)).isEqualTo(child);
        pool.free(new int[] {parent, child}, 0, 2);
        int reused = pool.allocate();
        assertThat(reused).isEqualTo(parent);
        int[] otherTokens = new int[BS];
        Arrays.fill(otherTokens, 3);
        pool.cache(reused, 9, 9, KvBlockPool.NONE, otherTokens, 0, 0, 0);
        assertThat(pool.lookup(7, 7, reused, childTokens, 0, 0, 0))
                .as("KV computed after the parent's old tokens, offered after its new ones")
                .isEqualTo(KvBlockPool.NONE);
        pool.checkInvariants();
    }

    @Test
    void freesARequestInReverseOrderSoTheChainTailIsEvictedFirst() {
        KvBlockPool pool = new KvBlockPool(6, BS, true);
        int[] table = new int[3];
        pool.allocate(3, table, 0); // 1, 2, 3
        for (int j = 0; j < 3; j++) {
            pool.cache(table[j], 100 + j, j, j == 0 ? KvBlockPool.NONE : table[j - 1], tokens(10 * j), 0, 0, 0);
        }
        pool.free(table, 0, 3);
        // clean blocks 4,5 first, then the cached chain tail-first: 3, 2, 1
        assertThat(pool.freeListOrder()).containsExactly(4, 5, 3, 2, 1);
        assertThat(pool.freeCachedCount()).isEqualTo(3);
        pool.checkInvariants();
    }

    @Test
    void prependsBlocksWithoutACacheEntrySoTheyAreReusedBeforeAnyEntryIsLost() {
        KvBlockPool pool = new KvBlockPool(8, BS, true);
        int[] table = new int[4];
        pool.allocate(4, table, 0); // 1, 2, 3, 4: 1 and 2 cached (full), 3 and 4 not
        cacheFirst(pool, 1, 1);
        pool.cache(2, 7, 7, 1, tokens(5), 0, 0, 0);
        pool.free(table, 0, 4);
        // unhashed 4 then 3 at the head (the request's last block first), clean 5,6,7, cached chain 2, 1 at the tail
        assertThat(pool.freeListOrder()).containsExactly(4, 3, 5, 6, 7, 2, 1);
        assertThat(pool.allocate()).isEqualTo(4);
        assertThat(pool.isCached(2)).isTrue();
        pool.checkInvariants();
    }

    @Test
    void evictsLazilyInLeastRecentlyUsedOrderWhenACachedBlockIsReused() {
        KvBlockPool pool = new KvBlockPool(4, BS, true);
        int[] a = new int[3];
        pool.allocate(3, a, 0);
        cacheFirst(pool, 1, 10);
        cacheFirst(pool, 2, 20);
        cacheFirst(pool, 3, 30);
        pool.free(new int[] {2}, 0, 1);
        pool.free(new int[] {1}, 0, 1);
        pool.free(new int[] {3}, 0, 1);
        assertThat(pool.freeListOrder()).containsExactly(2, 1, 3);
        // idle cached blocks still hit until they are popped
        assertThat(pool.lookup(20, ~20, KvBlockPool.NONE, tokens(20), 0, 0, 0)).isEqualTo(2);
        assertThat(pool.allocate()).isEqualTo(2);
        assertThat(pool.isCached(2)).isFalse();
        assertThat(pool.lookup(20, ~20, KvBlockPool.NONE, tokens(20), 0, 0, 0)).isEqualTo(KvBlockPool.NONE);
        assertThat(pool.lookup(10, ~10, KvBlockPool.NONE, tokens(10), 0, 0, 0)).isEqualTo(1);
        assertThat(pool.evictions()).isEqualTo(1);
        pool.checkInvariants();
    }

    @Test
    void aBatchedAllocationEvictsTheEntriesOfTheCachedBlocksItPops() {
        KvBlockPool pool = new KvBlockPool(5, BS, true);
        int[] t = new int[2];
        pool.allocate(2, t, 0); // 1, 2
        cacheFirst(pool, 1, 10);
        pool.cache(2, 20, 20, 1, tokens(20), 0, 0, 0);
        pool.free(t, 0, 2);
        assertThat(pool.freeListOrder()).containsExactly(3, 4, 2, 1);
        int[] got = new int[3];
        pool.allocate(3, got, 0); // the two clean blocks, then the chain tail
        assertThat(got).containsExactly(3, 4, 2);
        assertThat(pool.isCached(2)).isFalse();
        assertThat(pool.lookup(20, 20, 1, tokens(20), 0, 0, 0)).isEqualTo(KvBlockPool.NONE);
        assertThat(pool.lookup(10, ~10, KvBlockPool.NONE, tokens(10), 0, 0, 0)).isEqualTo(1);
        assertThat(pool.cachedCount()).isEqualTo(1);
        assertThat(pool.freeCachedCount()).isEqualTo(1);
        assertThat(pool.evictions()).isEqualTo(1);
        pool.checkInvariants();
    }

    @Test
    void aBlockAnotherRequestStillHoldsStaysOutOfTheFreeList() {
        KvBlockPool pool = new KvBlockPool(6, BS, true);
        int[] a = new int[3];
        pool.allocate(3, a, 0); // 1, 2, 3: 1 and 2 cached
        cacheFirst(pool, 1, 10);
        pool.cache(2, 20, 20, 1, tokens(20), 0, 0, 0);
        pool.touch(1); // a second request hit the cached prefix
        pool.touch(2);
        pool.free(a, 0, 3);
        assertThat(pool.freeListOrder()).containsExactly(3, 4, 5);
        assertThat(pool.refCount(1)).isEqualTo(1);
        assertThat(pool.refCount(2)).isEqualTo(1);
        pool.free(new int[] {1, 2}, 0, 2);
        assertThat(pool.freeListOrder()).containsExactly(3, 4, 5, 2, 1);
        pool.checkInvariants();
    }

    @Test
    void theNullBlockIsNeverHandedOutFreedOrCached() {
        KvBlockPool pool = new KvBlockPool(3, BS, true);
        int[] t = new int[2];
        pool.allocate(2, t, 0);
        assertThat(t).containsExactly(1, 2);
        assertThat(pool.freeCount()).isZero();
        assertThatThrownBy(pool::allocate).isInstanceOf(KvCacheException.class).hasMessageContaining("no free block");
        // a table padded with the null block (skipped positions): taking and releasing it changes nothing
        pool.touch(KvBlockPool.NULL_BLOCK);
        pool.free(new int[] {KvBlockPool.NULL_BLOCK, 1, 2}, 0, 3);
        assertThat(pool.freeListOrder()).containsExactly(2, 1);
        assertThat(pool.isFree(KvBlockPool.NULL_BLOCK)).isFalse();
        assertThat(pool.refCount(KvBlockPool.NULL_BLOCK)).isZero();
        assertThatThrownBy(() -> cacheFirst(pool, KvBlockPool.NULL_BLOCK, 1))
                .isInstanceOf(KvCacheException.class)
                .hasMessageContaining("null");
        pool.checkInvariants();
    }

    @Test
    void touchTakesAnIdleCachedBlockOutOfTheFreeList() {
        KvBlockPool pool = new KvBlockPool(4, BS, true);
        int b = pool.allocate();
        cacheFirst(pool, b, 3);
        pool.free(new int[] {b}, 0, 1);
        assertThat(pool.usage()).isZero();
        assertThat(pool.usageIncludingCached()).isCloseTo(1.0 / 3, org.assertj.core.api.Assertions.within(1e-12));
        pool.touch(b);
        assertThat(pool.isFree(b)).isFalse();
        assertThat(pool.refCount(b)).isEqualTo(1);
        assertThat(pool.freeListOrder()).containsExactly(2, 3);
        pool.touch(b);
        pool.free(new int[] {b}, 0, 1);
        assertThat(pool.isFree(b)).isFalse();
        pool.checkInvariants();
    }

    @Test
    void aDoubleFreeIsRefusedAndChangesNothing() {
        KvBlockPool pool = new KvBlockPool(6, BS, true);
        int[] table = new int[2];
        pool.allocate(2, table, 0);
        pool.free(table, 0, 2);
        int[] before = pool.freeListOrder();
        assertThatThrownBy(() -> pool.free(table, 0, 2))
                .isInstanceOf(KvCacheException.class)
                .hasMessageContaining("double free");
        assertThat(pool.freeListOrder()).containsExactly(before);
        pool.checkInvariants();
    }

    @Test
    void refusesToAllocateMoreThanIsFreeWithoutTakingAny() {
        KvBlockPool pool = new KvBlockPool(4, BS, true);
        int[] dst = new int[4];
        assertThatThrownBy(() -> pool.allocate(4, dst, 0))
                .isInstanceOf(KvCacheException.class)
                .hasMessageContaining("only 3 free");
        assertThat(pool.freeCount()).isEqualTo(3);
        pool.checkInvariants();
    }

    @Test
    void aKeyCollisionNeverGivesAWrongHit() {
        KvBlockPool pool = new KvBlockPool(8, BS, true);
        // Every block gets the same key: verification must separate them by tokens, salt and parent.
        int a0 = pool.allocate();
        int a1 = pool.allocate();
        int b0 = pool.allocate();
        pool.cache(a0, 1, 1, KvBlockPool.NONE, tokens(0), 0, 0, 0);
        pool.cache(a1, 1, 1, a0, tokens(100), 0, 0, 0);
        pool.cache(b0, 1, 1, KvBlockPool.NONE, tokens(50), 0, 0, 0);
        assertThat(pool.lookup(1, 1, KvBlockPool.NONE, tokens(0), 0, 0, 0)).isEqualTo(a0);
        assertThat(pool.lookup(1, 1, KvBlockPool.NONE, tokens(50), 0, 0, 0)).isEqualTo(b0);
        assertThat(pool.lookup(1, 1, KvBlockPool.NONE, tokens(9), 0, 0, 0)).isEqualTo(KvBlockPool.NONE);
        // same first-block tokens under another tenant salt or adapter: miss
        assertThat(pool.lookup(1, 1, KvBlockPool.NONE, tokens(0), 0, 0, 7)).isEqualTo(KvBlockPool.NONE);
        assertThat(pool.lookup(1, 1, KvBlockPool.NONE, tokens(0), 0, 3, 0)).isEqualTo(KvBlockPool.NONE);
        // a1's tokens after the other chain's first block: miss (its KV was computed after a0)
        assertThat(pool.lookup(1, 1, b0, tokens(100), 0, 0, 0)).isEqualTo(KvBlockPool.NONE);
        assertThat(pool.lookup(1, 1, a0, tokens(100), 0, 0, 0)).isEqualTo(a1);
        pool.checkInvariants();
    }

    @Test
    void aChildOfADuplicateParentIsHitOnlyWhileBothChainsProvablyHoldTheSamePrefix() {
        KvBlockPool pool = new KvBlockPool(10, BS, true);
        int a0 = pool.allocate();
        int a1 = pool.allocate();
        int b1 = pool.allocate();
        int b2 = pool.allocate();
        int x1 = pool.allocate();
        int s0 = pool.allocate();
        int s1 = pool.allocate();
        pool.cache(a0, 1, 1, KvBlockPool.NONE, tokens(0), 0, 0, 0);
        pool.cache(a1, 2, 2, a0, tokens(4), 0, 0, 0);
        pool.cache(b1, 2, 2, a0, tokens(4), 0, 0, 0); // the same block computed twice (no de-duplication)
        pool.cache(b2, 3, 3, b1, tokens(8), 0, 0, 0); // the chain continues from the second copy
        pool.cache(x1, 2, 2, a0, tokens(40), 0, 0, 0); // same key as a1, other tokens (a collision)
        pool.cache(s0, 1, 1, KvBlockPool.NONE, tokens(0), 0, 0, 5); // a0's tokens under another salt
        pool.cache(s1, 2, 2, s0, tokens(4), 0, 0, 5);
        assertThat(pool.lookup(3, 3, b1, tokens(8), 0, 0, 0)).isEqualTo(b2);
        assertThat(pool.lookup(3, 3, a1, tokens(8), 0, 0, 0))
                .as("after the other copy")
                .isEqualTo(b2);
        assertThat(pool.lookup(3, 3, x1, tokens(8), 0, 0, 0))
                .as("after a colliding block")
                .isEqualTo(KvBlockPool.NONE);
        assertThat(pool.lookup(3, 3, s1, tokens(8), 0, 0, 5))
                .as("after another tenant's chain")
                .isEqualTo(KvBlockPool.NONE);
        pool.evict(b1); // b2's own parent lost its contents
        assertThat(pool.lookup(3, 3, a1, tokens(8), 0, 0, 0)).isEqualTo(KvBlockPool.NONE);
        pool.checkInvariants();
    }

    @Test
    void aChildIsNotHitOnceItsParentBlockWasEvictedAndReused() {
        KvBlockPool pool = new KvBlockPool(3, BS, true);
        int p = pool.allocate();
        int c = pool.allocate();
        pool.cache(p, 1, 1, KvBlockPool.NONE, tokens(0), 0, 0, 0);
        pool.cache(c, 2, 2, p, tokens(4), 0, 0, 0);
        pool.free(new int[] {c}, 0, 1);
        pool.free(new int[] {p}, 0, 1); // free list: c, p  -> p (parent) is reused last... force it:
        pool.touch(c); // keep the child referenced
        int reused = pool.allocate(); // pops p, evicting it
        assertThat(reused).isEqualTo(p);
        pool.cache(p, 1, 1, KvBlockPool.NONE, tokens(0), 0, 0, 0); // same contents cached again, new generation
        assertThat(pool.lookup(2, 2, p, tokens(4), 0, 0, 0)).isEqualTo(KvBlockPool.NONE);
        pool.checkInvariants();
    }

    @Test
    void resetClearsEveryEntryAndRestoresIdOrderOnlyWhenNothingIsReferenced() {
        KvBlockPool pool = new KvBlockPool(5, BS, true);
        int[] t = new int[3];
        pool.allocate(3, t, 0);
        cacheFirst(pool, t[0], 1);
        assertThat(pool.resetPrefixCache()).isFalse();
        pool.free(t, 0, 3);
        long evictedBefore = pool.evictions();
        assertThat(pool.resetPrefixCache()).isTrue();
        assertThat(pool.freeListOrder()).containsExactly(1, 2, 3, 4);
        assertThat(pool.cachedCount()).isZero();
        assertThat(pool.evictions()).as("the reset's entry counts as evicted").isEqualTo(evictedBefore + 1);
        pool.checkInvariants();
    }

    @Test
    void withCachingOffEveryFreedBlockIsReusedFirst() {
        KvBlockPool pool = new KvBlockPool(5, BS, false);
        int[] t = new int[2];
        pool.allocate(2, t, 0);
        pool.free(t, 0, 2);
        assertThat(pool.freeListOrder()).containsExactly(2, 1, 3, 4);
        assertThat(pool.lookup(1, 1, KvBlockPool.NONE, tokens(0), 0, 0, 0)).isEqualTo(KvBlockPool.NONE);
    }
}
