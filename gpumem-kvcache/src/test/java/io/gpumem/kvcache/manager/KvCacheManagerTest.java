package io.gpumem.kvcache.manager;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.device.SimulatedDevice;
import io.gpumem.kvcache.KvCacheException;
import io.gpumem.kvcache.KvCacheSpec;
import io.gpumem.kvcache.hash.BlockHasher;
import io.gpumem.kvcache.hash.HashAlgorithm;
import io.gpumem.kvcache.memory.KvMemory;
import io.gpumem.kvcache.pool.KvBlockPool;
import java.util.List;
import java.util.stream.IntStream;
import org.assertj.core.api.ThrowableAssert.ThrowingCallable;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** Golden tests for kv-cache.md §1.5–§1.8 and the manager's bad-input handling. */
class KvCacheManagerTest {
    static final int BS = 4;

    static KvCacheManager manager(int numBlocks, KvCacheConfig config) {
        KvCacheSpec spec = KvCacheSpec.builder()
                .layers(2)
                .kvHeads(2)
                .headSize(4)
                .elementSize(4)
                .blockSize(BS)
                .numBlocks(numBlocks)
                .maxModelLen(Math.min(64, (numBlocks - 1) * BS))
                .build();
        SimulatedDevice device =
                SimulatedDevice.builder().capacity(64L << 20).backed(true).build();
        return new KvCacheManager(spec, KvMemory.direct(device), config);
    }

    static int[] seq(int from, int n) {
        return IntStream.range(from, from + n).toArray();
    }

    /** Admits a request with prefix lookup and computes its whole prompt. */
    static KvRequest admit(KvCacheManager m, KvRequest r) {
        int hit = m.lookupCachedTokens(r);
        assertThat(m.allocateSlots(r, r.numTokens() - hit, 0)).isTrue();
        r.advanceComputed(r.numTokens() - r.numComputed());
        return r;
    }

    @Test
    void theLastPromptTokenIsAlwaysRecomputed() {
        KvCacheManager m = manager(16, KvCacheConfig.defaults());
        KvRequest a = admit(m, KvRequest.of("a", seq(0, 8)));
        m.free(a);
        // same 8 tokens (two full blocks): only the first block may hit, the last token needs its logits
        KvRequest b = KvRequest.of("b", seq(0, 8));
        assertThat(m.lookupCachedTokens(b)).isEqualTo(4);
        // one more token: both full blocks hit
        KvRequest c = KvRequest.of("c", seq(0, 9));
        assertThat(m.lookupCachedTokens(c)).isEqualTo(8);
        m.checkInvariants();
    }

    @Test
    void aPrefixHitSharesTheCachedBlocksAndCountsThemOnce() {
        KvCacheManager m = manager(16, KvCacheConfig.defaults());
        KvRequest a = admit(m, KvRequest.of("a", seq(0, 10)));
        KvRequest b = KvRequest.of("b", seq(0, 12));
        assertThat(m.lookupCachedTokens(b)).isEqualTo(8);
        assertThat(m.allocateSlots(b, 4, 0)).isTrue();
        assertThat(b.block(0)).isEqualTo(a.block(0));
        assertThat(b.block(1)).isEqualTo(a.block(1));
        assertThat(b.block(2)).isNotEqualTo(a.block(2));
        assertThat(m.pool().refCount(a.block(0))).isEqualTo(2);
        assertThat(b.numComputed()).isEqualTo(8);
        m.checkInvariants();
    }

    @Test
    void aPrefixContinuedFromADuplicateBlockIsStillHit() {
        KvCacheManager m = manager(16, KvCacheConfig.defaults());
        admit(m, KvRequest.of("a", seq(0, 8))); // blocks 0 and 1 cached
        KvRequest b = admit(m, KvRequest.of("b", seq(0, 8))); // hits block 0 only (last token recomputed):
        for (int t = 8; t < 12; t++) { // computes block 1 again, a duplicate entry
            b.appendToken(t);
        }
        assertThat(m.allocateSlots(b, 4, 0)).isTrue(); // b's block 2 follows b's own block 1
        b.advanceComputed(4);
        // the walk may take a's block 1 (same tokens, same parent); b's block 2 still follows that prefix
        assertThat(m.lookupCachedTokens(KvRequest.of("c", seq(0, 13)))).isEqualTo(12);
        m.checkInvariants();
    }

    @Test
    void lookaheadSlotsStopAtTheModelLengthHoweverManyAreAsked() {
        KvCacheManager m = manager(20, KvCacheConfig.defaults()); // max model length 64: 16 blocks
        KvRequest a = KvRequest.of("a", seq(0, 6));
        m.lookupCachedTokens(a);
        assertThat(m.allocateSlots(a, 6, Integer.MAX_VALUE)).isTrue(); // not a sum that wraps below zero
        assertThat(a.numBlocks()).isEqualTo(16);
        assertThat(m.pool().isCached(a.block(0))).isTrue();
        a.advanceComputed(6);
        a.appendToken(100);
        assertThat(m.allocateSlots(a, 1, Integer.MAX_VALUE)).isTrue();
        assertThat(a.numBlocks()).isEqualTo(16);
        m.checkInvariants();
    }

    @Test
    void onlyFullBlocksAreCachedAndLookaheadSlotsNever() {
        KvCacheManager m = manager(16, KvCacheConfig.defaults());
        KvRequest a = KvRequest.of("a", seq(0, 6));
        m.lookupCachedTokens(a);
        assertThat(m.allocateSlots(a, 6, 5)).isTrue(); // 11 slots -> 3 blocks
        assertThat(a.numBlocks()).isEqualTo(3);
        assertThat(m.pool().isCached(a.block(0))).isTrue();
        assertThat(m.pool().isCached(a.block(1))).isFalse(); // 2 of 4 tokens known, rest lookahead
        assertThat(m.pool().isCached(a.block(2))).isFalse();
        a.advanceComputed(6);
        a.appendToken(100);
        a.appendToken(101);
        assertThat(m.allocateSlots(a, 2, 0)).isTrue(); // block 1 now full with real tokens
        assertThat(m.pool().isCached(a.block(1))).isTrue();
        m.checkInvariants();
    }

    @Test
    void allocateSlotsIsAllOrNothing() {
        KvCacheManager m = manager(6, KvCacheConfig.defaults()); // 5 usable blocks
        KvRequest a = admit(m, KvRequest.of("a", seq(0, 12))); // 3 blocks
        KvRequest b = KvRequest.of("b", seq(100, 12));
        m.lookupCachedTokens(b);
        int[] before = m.pool().freeListOrder();
        assertThat(m.allocateSlots(b, 12, 0)).isFalse();
        assertThat(m.pool().freeListOrder()).containsExactly(before);
        assertThat(b.numBlocks()).isZero();
        assertThat(b.status()).isEqualTo(RequestStatus.WAITING);
        // a running request that cannot grow stays as it was
        admit(m, KvRequest.of("s", seq(200, 4))); // 1 block left free
        a.appendToken(1);
        assertThat(m.allocateSlots(a, 1, 7)).isFalse(); // 20 slots = 2 more blocks
        assertThat(a.numBlocks()).isEqualTo(3);
        assertThat(m.stats().refusedAllocations()).isEqualTo(2);
        m.checkInvariants();
    }

    @Test
    void idlePrefixHitsConsumeFreeCapacity() {
        KvCacheManager m = manager(5, KvCacheConfig.defaults()); // 4 usable
        KvRequest a = admit(m, KvRequest.of("a", seq(0, 9))); // 3 blocks, 2 cached
        m.free(a);
        KvRequest other = admit(m, KvRequest.of("o", seq(500, 4))); // takes the clean block...
        KvRequest b = KvRequest.of("b", seq(0, 13));
        assertThat(m.lookupCachedTokens(b)).isEqualTo(8);
        // needs 2 idle hit blocks + 2 new, only 3 free: refused even though just 2 blocks are "new"
        assertThat(m.pool().freeCount()).isEqualTo(3);
        assertThat(m.allocateSlots(b, 5, 0)).isFalse();
        m.free(other);
        assertThat(m.allocateSlots(b, 5, 0)).isTrue();
        m.checkInvariants();
    }

    @Test
    void hitsEvictedBetweenLookupAndAllocationAreNotUsed() {
        KvCacheManager m = manager(8, KvCacheConfig.defaults()); // 7 usable
        KvRequest a = admit(m, KvRequest.of("a", seq(0, 9))); // blocks 1, 2 cached, 3 partial
        m.free(a); // free list: 3, 4, 5, 6, 7, 2, 1
        KvRequest b = KvRequest.of("b", seq(0, 9));
        assertThat(m.lookupCachedTokens(b)).isEqualTo(8); // hits: blocks 1 and 2
        KvRequest other = admit(m, KvRequest.of("o", seq(100, 24))); // 6 blocks: pops 3..7 and 2
        assertThat(other.blockTable()).contains(2);
        // block 2 now holds (and is cached with) other's tokens: the stale hit must not be taken
        // only block 1 is still a valid hit: 4 tokens computed, one block more needed, plus idle block 1: 2 > 1 free
        assertThat(m.allocateSlots(b, 1, 0)).isFalse();
        m.free(other);
        assertThat(m.allocateSlots(b, 1, 0)).isTrue();
        assertThat(b.numComputed()).isEqualTo(4);
        assertThat(b.block(0)).isEqualTo(1);
        m.checkInvariants();
    }

    @Test
    void exactlyTheBlocksNeededFreeIsEnoughAndLookaheadAloneReservesSlots() {
        KvCacheManager m = manager(6, KvCacheConfig.defaults()); // 5 usable blocks
        KvRequest a = admit(m, KvRequest.of("a", seq(0, 12))); // 3 blocks
        KvRequest b = KvRequest.of("b", seq(100, 8));
        m.lookupCachedTokens(b);
        assertThat(m.allocateSlots(b, 8, 0)).as("2 blocks of 2 free").isTrue();
        assertThat(m.pool().freeCount()).isZero();
        m.free(b);
        assertThat(m.allocateSlots(a, 0, 8))
                .as("no new token, 8 speculative slots: 2 blocks of 2 free")
                .isTrue();
        assertThat(a.numBlocks()).isEqualTo(5);
        assertThat(m.stats().refusedAllocations()).isZero();
        assertThatThrownBy(() -> m.allocateSlots(a, -1, 0)).hasMessageContaining("must not be negative");
        assertThatThrownBy(() -> m.allocateSlots(a, 0, -1)).hasMessageContaining("must not be negative");
        m.checkInvariants();
    }

    @Test
    void copyOnWriteStopsAtTheLastBlockTheNewTokensReach() {
        KvCacheManager m = manager(16, KvCacheConfig.defaults());
        KvRequest p = KvRequest.of("p", seq(0, 6));
        m.lookupCachedTokens(p);
        assertThat(m.allocateSlots(p, 6, 6)).isTrue(); // 12 slots: blocks 0, 1 and a speculative block 2
        p.advanceComputed(6);
        KvRequest c = m.fork(p, "c");
        assertThat(m.pool().refCount(c.block(2))).isEqualTo(2);
        c.appendToken(6);
        c.appendToken(7);
        assertThat(m.allocateSlots(c, 2, 0)).isTrue(); // tokens 6 and 7 end block 1 exactly
        assertThat(m.stats().copyOnWriteBlocks())
                .as("block 1 only; block 2 starts at token 8")
                .isEqualTo(1);
        assertThat(c.block(1)).isNotEqualTo(p.block(1));
        assertThat(c.block(2)).isEqualTo(p.block(2));
        m.checkInvariants();
    }

    @Test
    void forkSharesBlocksAndCopiesOnWrite() {
        KvCacheManager m = manager(16, KvCacheConfig.defaults());
        KvRequest p = admit(m, KvRequest.of("p", seq(0, 6)));
        KvRequest c = m.fork(p, "c");
        assertThat(c.blockTable()).containsExactly(p.blockTable());
        assertThat(m.pool().refCount(p.block(1))).isEqualTo(2);
        p.appendToken(7);
        assertThat(m.allocateSlots(p, 1, 0)).isTrue(); // writes into shared block 1: copied
        assertThat(p.block(1)).isNotEqualTo(c.block(1));
        assertThat(p.block(0)).isEqualTo(c.block(0)); // full block 0 stays shared
        assertThat(m.stats().copyOnWriteBlocks()).isEqualTo(1);
        c.appendToken(8);
        assertThat(m.allocateSlots(c, 1, 0)).isTrue(); // now sole owner: writes in place
        assertThat(m.stats().copyOnWriteBlocks()).isEqualTo(1);
        m.checkInvariants();
    }

    @Test
    void aFailedCopyOnWriteCopyLeavesThePoolConsistent() {
        KvCacheSpec spec = KvCacheSpec.builder()
                .layers(2)
                .kvHeads(2)
                .headSize(4)
                .elementSize(4)
                .blockSize(BS)
                .numBlocks(16)
                .maxModelLen(60)
                .build();
        SimulatedDevice device =
                SimulatedDevice.builder().capacity(64L << 20).backed(true).build();
        KvCacheManager m = new KvCacheManager(spec, KvMemory.direct(device));
        KvRequest p = admit(m, KvRequest.of("p", seq(0, 6)));
        KvRequest c = m.fork(p, "c");
        p.appendToken(7);
        device.failNth(io.gpumem.device.DeviceOp.COPY, 1, io.gpumem.device.DeviceError.CUDA_ERROR_ILLEGAL_ADDRESS);
        int free = m.pool().freeCount();
        assertThatThrownBy(() -> m.allocateSlots(p, 1, 0)).isInstanceOf(io.gpumem.device.DeviceException.class);
        assertThat(m.pool().freeCount()).isEqualTo(free);
        assertThat(p.blockTable()).containsExactly(c.blockTable());
        m.checkInvariants();
        assertThat(m.allocateSlots(p, 1, 0)).isTrue();
        assertThat(p.block(1)).isNotEqualTo(c.block(1));
        m.checkInvariants();
    }

    @Test
    void failedSwapCopiesLeaveTheRequestWhereItWas() {
        KvCacheSpec spec = KvCacheSpec.builder()
                .layers(2)
                .kvHeads(2)
                .headSize(4)
                .elementSize(4)
                .blockSize(BS)
                .numBlocks(16)
                .maxModelLen(60)
                .build();
        SimulatedDevice device =
                SimulatedDevice.builder().capacity(64L << 20).backed(true).build();
        KvCacheManager m = new KvCacheManager(
                spec, KvMemory.direct(device), KvCacheConfig.defaults().withSwapSpaceBytes(1 << 20));
        KvRequest a = admit(m, KvRequest.of("a", seq(0, 10)));
        int[] table = a.blockTable();
        device.failNth(io.gpumem.device.DeviceOp.COPY, 2, io.gpumem.device.DeviceError.CUDA_ERROR_ILLEGAL_ADDRESS);
        assertThatThrownBy(() -> m.preempt(a, PreemptionMode.SWAP))
                .isInstanceOf(io.gpumem.device.DeviceException.class);
        assertThat(a.status()).isEqualTo(RequestStatus.RUNNING);
        assertThat(a.blockTable()).containsExactly(table);
        assertThat(a.preemptions()).isZero();
        assertThat(m.swapSpace().usedBytes()).isZero();
        m.checkInvariants();
        m.preempt(a, PreemptionMode.SWAP);
        admit(m, KvRequest.of("b", seq(100, 44))); // overwrite the pool so nothing is re-hit
        device.failNth(io.gpumem.device.DeviceOp.COPY, 1, io.gpumem.device.DeviceError.CUDA_ERROR_ILLEGAL_ADDRESS);
        int free = m.pool().freeCount();
        assertThatThrownBy(() -> m.swapIn(a)).isInstanceOf(io.gpumem.device.DeviceException.class);
        assertThat(a.status()).isEqualTo(RequestStatus.SWAPPED);
        assertThat(m.pool().freeCount()).isEqualTo(free);
        m.checkInvariants();
        assertThat(m.swapIn(a)).isTrue();
        m.checkInvariants();
    }

    @Test
    void recomputePreemptionKeepsTheHashesSoTheResumedRequestReHits() {
        KvCacheManager m = manager(16, KvCacheConfig.defaults());
        KvRequest a = admit(m, KvRequest.of("a", seq(0, 10)));
        int[] table = a.blockTable();
        assertThat(m.preempt(a, PreemptionMode.RECOMPUTE)).isEqualTo(PreemptionMode.RECOMPUTE);
        assertThat(a.status()).isEqualTo(RequestStatus.PREEMPTED);
        assertThat(a.numComputed()).isZero();
        assertThat(m.stats().preemptions()).isEqualTo(1);
        assertThat(m.lookupCachedTokens(a)).isEqualTo(8);
        assertThat(m.allocateSlots(a, 2, 0)).isTrue();
        assertThat(a.block(0)).isEqualTo(table[0]);
        assertThat(a.block(1)).isEqualTo(table[1]);
        m.checkInvariants();
    }

    @Test
    void preemptingInTheStepOfTheGrantUncachesBlocksThatWereNeverComputed() {
        KvCacheManager m = manager(16, KvCacheConfig.defaults());
        KvRequest a = KvRequest.of("a", seq(0, 13));
        m.lookupCachedTokens(a);
        assertThat(m.allocateSlots(a, 8, 0)).isTrue(); // chunk of 8: blocks 0 and 1 cached
        a.advanceComputed(8);
        assertThat(m.allocateSlots(a, 5, 0)).isTrue(); // block 2 cached at grant time
        int granted = a.block(2);
        assertThat(m.pool().isCached(granted)).isTrue();
        m.preempt(a, PreemptionMode.RECOMPUTE); // preempted before computing it
        assertThat(m.pool().isCached(granted)).isFalse();
        assertThat(m.lookupCachedTokens(a)).isEqualTo(8);
        m.checkInvariants();
    }

    @Test
    void freeingARequestBeforeItsGrantIsComputedUncachesTheBlocksItNeverFilled() {
        KvCacheManager m = manager(16, KvCacheConfig.defaults());
        KvRequest a = KvRequest.of("a", seq(0, 13));
        m.lookupCachedTokens(a);
        assertThat(m.allocateSlots(a, 8, 0)).isTrue(); // chunk of 8: blocks 0 and 1 cached
        a.advanceComputed(8);
        assertThat(m.allocateSlots(a, 5, 0)).isTrue(); // block 2 cached at grant time
        int computedBlock = a.block(1);
        int granted = a.block(2);
        m.free(a); // aborted before that chunk was computed
        assertThat(m.pool().isCached(granted))
                .as("block 2 never received its KV")
                .isFalse();
        assertThat(m.pool().isCached(computedBlock)).isTrue();
        assertThat(m.lookupCachedTokens(KvRequest.of("b", seq(0, 13)))).isEqualTo(8);
        m.checkInvariants();
    }

    @Test
    void aForkTakenBeforeTheGrantWasComputedDoesNotKeepItsBlockInTheCache() {
        KvCacheManager m = manager(16, KvCacheConfig.defaults());
        KvRequest p = admit(m, KvRequest.of("p", seq(0, 6)));
        p.appendToken(6);
        p.appendToken(7);
        assertThat(m.allocateSlots(p, 2, 0)).isTrue(); // fills block 1: cached at grant time
        int granted = p.block(1);
        KvRequest c = m.fork(p, "c"); // shares block 1, positions 6 and 7 not computed
        m.free(p); // aborted before computing them
        assertThat(m.pool().refCount(granted)).isEqualTo(1);
        assertThat(m.pool().isCached(granted))
                .as("block 1 never received the KV of positions 6, 7")
                .isFalse();
        assertThat(m.lookupCachedTokens(KvRequest.of("q", seq(0, 9)))).isEqualTo(4);
        // the child still computes them itself, in place now that it is the only holder
        assertThat(m.allocateSlots(c, 2, 0)).isTrue();
        assertThat(c.block(1)).isEqualTo(granted);
        m.checkInvariants();
    }

    @Test
    void aBlockIsAPrefixHitOnlyOnceTheRequestGrantedItHasWrittenItsKv() {
        KvCacheManager m = manager(16, KvCacheConfig.defaults());
        KvRequest a = KvRequest.of("a", seq(0, 13));
        m.lookupCachedTokens(a);
        assertThat(m.allocateSlots(a, 13, 0)).isTrue(); // blocks 0-2 cached at grant time, nothing computed
        assertThat(m.pool().isCached(a.block(0))).isTrue();
        assertThat(m.lookupCachedTokens(KvRequest.of("b1", seq(0, 13))))
                .as("nothing written yet")
                .isZero();
        a.advanceComputed(6); // block 0 written, block 1 half
        assertThat(m.lookupCachedTokens(KvRequest.of("b2", seq(0, 13)))).isEqualTo(4);
        a.advanceComputed(7);
        assertThat(m.lookupCachedTokens(KvRequest.of("b3", seq(0, 13)))).isEqualTo(12);
        m.checkInvariants();
    }

    @Test
    void preemptingARequestBeforeItComputesItsGrantLeavesNoOtherRequestCountingThatKv() {
        KvCacheManager m = manager(16, KvCacheConfig.defaults());
        KvRequest a = KvRequest.of("a", seq(0, 13));
        m.lookupCachedTokens(a);
        assertThat(m.allocateSlots(a, 13, 0)).isTrue(); // granted, not computed
        int[] granted = a.blockTable();
        KvRequest b = KvRequest.of("b", seq(0, 13));
        int hit = m.lookupCachedTokens(b);
        assertThat(m.allocateSlots(b, 13 - hit, 0)).isTrue();
        m.preempt(a, PreemptionMode.RECOMPUTE); // a leaves without writing blocks 0-2
        assertThat(b.numComputed()).as("b must compute every token itself").isZero();
        for (int j = 0; j < 3; j++) {
            assertThat(b.block(j)).as("b's block %d is its own", j).isNotIn(granted[0], granted[1], granted[2]);
        }
        m.checkInvariants();
    }

    @Test
    void swapPreemptionMovesTheBlocksToTheHostTierAndBack() {
        KvCacheManager m = manager(8, KvCacheConfig.defaults().withSwapSpaceBytes(1 << 20));
        KvRequest a = admit(m, KvRequest.of("a", seq(0, 10)));
        assertThat(m.preempt(a, PreemptionMode.SWAP)).isEqualTo(PreemptionMode.SWAP);
        assertThat(a.status()).isEqualTo(RequestStatus.SWAPPED);
        assertThat(a.numComputed()).isEqualTo(10);
        assertThat(m.swapSpace().usedBytes()).isEqualTo(3L * m.spec().pageBytes() * 2);
        assertThat(m.stats().usage()).isZero();
        assertThat(m.swapIn(a)).isTrue();
        assertThat(a.numBlocks()).isEqualTo(3);
        assertThat(m.swapSpace().usedBytes()).isZero();
        // the two full blocks were still cached: taken back, only the partial block is copied in
        assertThat(m.stats().swapInReusedBlocks()).isEqualTo(2);
        assertThat(m.swapSpace().swappedInBytes()).isEqualTo(m.spec().pageBytes() * 2);
        // a contiguous table travels in one transfer per layer each way
        assertThat(m.swapSpace().transfers()).isEqualTo(4);
        m.checkInvariants();
    }

    @Test
    void swapInNeedsExactlyItsBlocksFreeAndCachesTheFullBlocksItCopiesBack() {
        KvCacheManager m = manager(16, KvCacheConfig.defaults().withSwapSpaceBytes(1 << 20));
        KvRequest a = admit(m, KvRequest.of("a", seq(0, 13))); // 3 full blocks and a partial one
        m.preempt(a, PreemptionMode.SWAP);
        // free: the partial block at the head, 11 clean blocks, a's three cached blocks at the tail
        KvRequest holder = admit(m, KvRequest.of("holder", seq(100, 12 * BS)));
        assertThat(m.pool().freeCount()).isEqualTo(3);
        long refusedBefore = m.stats().refusedAllocations();
        assertThat(m.swapIn(a))
                .as("3 cached blocks to take back and 1 to copy: 4 blocks of the 3 free")
                .isFalse();
        assertThat(a.status()).isEqualTo(RequestStatus.SWAPPED);
        assertThat(m.stats().refusedAllocations()).isEqualTo(refusedBefore + 1);
        assertThat(m.pool().freeCount()).isEqualTo(3);

        m.free(holder);
        KvRequest smaller = admit(m, KvRequest.of("smaller", seq(200, 11 * BS)));
        assertThat(m.pool().freeCount()).isEqualTo(4);
        assertThat(m.pool().isCached(m.pool().freeListOrder()[3]))
                .as("a's chain head is still cached")
                .isTrue();
        assertThat(m.swapIn(a)).as("4 blocks of 4 free").isTrue();
        assertThat(m.pool().freeCount()).isZero();
        m.checkInvariants();

        // again, with a's last full block evicted while it was out: it comes back from the host copy and is
        // cached anew, so the whole 12-token prefix is found again
        m.free(smaller);
        m.preempt(a, PreemptionMode.SWAP);
        // free: a's partial block, smaller's 11 cached blocks, then a's chain tail-first; 13 blocks evict a's tail
        KvRequest evictor = admit(m, KvRequest.of("evictor", seq(300, 13 * BS)));
        m.free(evictor);
        long reusedBefore = m.stats().swapInReusedBlocks();
        assertThat(m.swapIn(a)).isTrue();
        assertThat(m.stats().swapInReusedBlocks() - reusedBefore).isEqualTo(2);
        m.free(a);
        assertThat(m.lookupCachedTokens(KvRequest.of("again", seq(0, 13)))).isEqualTo(12);
        m.checkInvariants();
    }

    @Test
    void closingReleasesHostMemoryOfSwappedRequests() {
        KvCacheManager m = manager(8, KvCacheConfig.defaults().withSwapSpaceBytes(1 << 20));
        KvRequest a = admit(m, KvRequest.of("a", seq(0, 10)));
        KvRequest b = admit(m, KvRequest.of("b", seq(50, 3)));
        m.preempt(a, PreemptionMode.SWAP);
        assertThat(m.stats().swappedRequests()).isEqualTo(1);
        assertThat(m.swapSpace().usedBytes()).isPositive();
        m.close();
        assertThat(m.swapSpace().usedBytes()).isZero();
        assertThat(a.status()).isEqualTo(RequestStatus.FINISHED);
        assertThat(b.status()).isEqualTo(RequestStatus.FINISHED);
    }

    @Test
    void aSwapSpaceOfExactlyTheRequestsBytesTakesIt() {
        KvCacheManager probe = manager(8, KvCacheConfig.defaults());
        long bytes = 3L * probe.spec().pageBytes() * probe.spec().layers(); // a's 3 blocks, every layer
        KvCacheManager exact = manager(8, KvCacheConfig.defaults().withSwapSpaceBytes(bytes));
        KvRequest a = admit(exact, KvRequest.of("a", seq(0, 10)));
        assertThat(exact.preempt(a, PreemptionMode.SWAP)).isEqualTo(PreemptionMode.SWAP);
        assertThat(exact.swapSpace().usedBytes()).isEqualTo(bytes);
        KvCacheManager short1 = manager(8, KvCacheConfig.defaults().withSwapSpaceBytes(bytes - 1));
        KvRequest b = admit(short1, KvRequest.of("b", seq(0, 10)));
        assertThat(short1.preempt(b, PreemptionMode.SWAP)).isEqualTo(PreemptionMode.RECOMPUTE);
    }

    @Test
    void swapFallsBackToRecomputeWhenTheHostTierIsFull() {
        KvCacheManager m = manager(8, KvCacheConfig.defaults());
        KvRequest a = admit(m, KvRequest.of("a", seq(0, 10)));
        assertThat(m.preempt(a, PreemptionMode.SWAP)).isEqualTo(PreemptionMode.RECOMPUTE);
        assertThat(m.stats().swapFallbacks()).isEqualTo(1);
        assertThat(a.status()).isEqualTo(RequestStatus.PREEMPTED);
    }

    @Test
    void saltAndAdapterIsolateTenants() {
        KvCacheManager m = manager(16, KvCacheConfig.defaults());
        admit(m, KvRequest.builder("a", seq(0, 9)).salt("tenant-1").build());
        assertThat(m.lookupCachedTokens(
                        KvRequest.builder("b", seq(0, 9)).salt("tenant-2").build()))
                .isZero();
        assertThat(m.lookupCachedTokens(KvRequest.builder("c", seq(0, 9))
                        .salt("tenant-1")
                        .adapter(3)
                        .build()))
                .isZero();
        assertThat(m.lookupCachedTokens(
                        KvRequest.builder("d", seq(0, 9)).salt("tenant-1").build()))
                .isEqualTo(8);
        assertThat(m.lookupCachedTokens(KvRequest.of("e", seq(0, 9)))).isZero();
    }

    @Test
    void theSaltEntersOnlyTheFirstBlockKeyAndTheAdapterEveryBlockKey() {
        KvCacheManager m = manager(16, KvCacheConfig.defaults());
        int[] prompt = seq(0, 13);
        KvRequest plain = KvRequest.of("plain", prompt);
        KvRequest salted = KvRequest.builder("salted", prompt).salt("tenant-1").build();
        KvRequest adapted = KvRequest.builder("adapted", prompt).adapter(3).build();
        for (KvRequest r : new KvRequest[] {plain, salted, adapted}) {
            m.lookupCachedTokens(r);
            assertThat(r.numKeyed).isEqualTo(3);
        }
        BlockHasher h = BlockHasher.create(HashAlgorithm.FAST128, 0);
        long[] out = new long[2];
        h.hash(h.rootHi(), h.rootLo(), prompt, 0, BS, 0, out);
        assertThat(new long[] {plain.keyHi[0], plain.keyLo[0]}).containsExactly(out[0], out[1]);
        assertThat(salted.keyHi[0]).isNotEqualTo(plain.keyHi[0]);
        assertThat(adapted.keyHi[0]).isNotEqualTo(plain.keyHi[0]);
        for (int j = 1; j < 3; j++) {
            // no extra key after the first block without an adapter, salted or not: the salt reaches later
            // blocks only through the chain
            for (KvRequest r : new KvRequest[] {plain, salted}) {
                h.hash(r.keyHi[j - 1], r.keyLo[j - 1], prompt, j * BS, BS, 0, out);
                assertThat(new long[] {r.keyHi[j], r.keyLo[j]})
                        .as("%s block %d", r.id(), j)
                        .containsExactly(out[0], out[1]);
            }
            assertThat(salted.keyHi[j]).isNotEqualTo(plain.keyHi[j]);
            // the adapter is an extra key of every block
            h.hash(adapted.keyHi[j - 1], adapted.keyLo[j - 1], prompt, j * BS, BS, 0, out);
            assertThat(adapted.keyHi[j]).as("adapter in block %d", j).isNotEqualTo(out[0]);
        }
    }

    @Test
    void aLookupRepeatedWhileWaitingCountsOnceAndAResumedRequestCountsApartAsVllmCountsIt() {
        KvCacheManager m = manager(6, KvCacheConfig.defaults()); // 5 usable
        KvRequest a = admit(m, KvRequest.of("a", seq(0, 9))); // 3 blocks, 2 cached
        KvRequest big = KvRequest.of("big", seq(0, 17));
        assertThat(m.lookupCachedTokens(big)).isEqualTo(8);
        assertThat(m.allocateSlots(big, 9, 0)).isFalse(); // 3 new blocks, 2 free
        assertThat(m.lookupCachedTokens(big)).isEqualTo(8); // asked again in the next step
        assertThat(m.stats().prefixQueriedTokens()).isEqualTo(9 + 17);
        assertThat(m.stats().prefixHitTokens()).isEqualTo(8);
        m.free(a);
        assertThat(m.allocateSlots(big, 9, 0)).isTrue(); // 2 idle hits + 3 new = 5 free
        big.advanceComputed(9);
        m.preempt(big, PreemptionMode.RECOMPUTE);
        assertThat(m.lookupCachedTokens(big)).isEqualTo(16); // a new lookup after preemption
        // vLLM's PrefixCacheStats keeps a resumed request's lookup apart (preempted_queries, preempted_hits): it
        // mostly re-finds its own blocks, and counted with the rest it raised the hit rate (24/43 instead of 8/26)
        assertThat(m.stats().prefixQueriedTokens()).isEqualTo(9 + 17);
        assertThat(m.stats().prefixHitTokens()).isEqualTo(8);
        assertThat(m.stats().preemptedQueriedTokens()).isEqualTo(17);
        assertThat(m.stats().preemptedHitTokens()).isEqualTo(16);
        assertThat(m.stats().prefixHitRateWindow()).isCloseTo(8.0 / 26, org.assertj.core.api.Assertions.within(1e-12));
        m.checkInvariants();
    }

    @ParameterizedTest
    @EnumSource(HashAlgorithm.class)
    void bothHashAlgorithmsFindTheSamePrefixes(HashAlgorithm algorithm) {
        KvCacheManager m = manager(16, KvCacheConfig.defaults().withHashAlgorithm(algorithm));
        admit(m, KvRequest.of("a", seq(0, 13)));
        assertThat(m.lookupCachedTokens(KvRequest.of("b", seq(0, 13)))).isEqualTo(12);
        int[] diverging = seq(0, 13);
        diverging[5] = 99;
        assertThat(m.lookupCachedTokens(KvRequest.of("c", diverging))).isEqualTo(4);
    }

    @Test
    void prefixCachingOffNeverHits() {
        KvCacheManager m = manager(16, KvCacheConfig.defaults().withPrefixCaching(false));
        KvRequest a = admit(m, KvRequest.of("a", seq(0, 9)));
        assertThat(m.pool().cachedCount()).isZero();
        m.free(a);
        assertThat(m.lookupCachedTokens(KvRequest.of("b", seq(0, 9)))).isZero();
    }

    @Test
    void hitRateCoversTheLastThousandRequestsAndUsageHasTwoViews() {
        KvCacheManager m = manager(16, KvCacheConfig.defaults());
        KvRequest a = admit(m, KvRequest.of("a", seq(0, 9)));
        m.free(a);
        assertThat(m.stats().usage()).isZero();
        assertThat(m.stats().usageIncludingCached()).isCloseTo(2.0 / 15, org.assertj.core.api.Assertions.within(1e-9));
        for (int i = 0; i < 1000; i++) {
            m.lookupCachedTokens(KvRequest.of("q" + i, seq(0, 9))); // 8 of 9 hit
        }
        assertThat(m.stats().prefixHitRateWindow()).isCloseTo(8.0 / 9, org.assertj.core.api.Assertions.within(1e-12));
        assertThat(m.stats().prefixQueriedTokens()).isEqualTo(9L * 1001);
    }

    @Test
    void watermarkHoldsBackAdmissionButNotTheFirstRequest() {
        KvCacheManager m = manager(11, KvCacheConfig.defaults().withWatermark(0.2)); // 10 usable, keep 2 free
        KvRequest a = KvRequest.of("a", seq(0, 36));
        m.lookupCachedTokens(a);
        assertThat(m.allocateSlots(a, 36, 0)).isTrue(); // 9 blocks on an empty cache: allowed
        m.free(a);
        KvRequest b = admit(m, KvRequest.of("b", seq(100, 4)));
        KvRequest c = KvRequest.of("c", seq(200, 28)); // 7 blocks would leave 2 free: allowed
        m.lookupCachedTokens(c);
        assertThat(m.allocateSlots(c, 28, 0)).isTrue();
        KvRequest d = KvRequest.of("d", seq(300, 4)); // would leave 1 free: refused
        m.lookupCachedTokens(d);
        int[] before = m.pool().freeListOrder();
        assertThat(m.allocateSlots(d, 4, 0)).isFalse();
        assertThat(m.pool().freeListOrder()).containsExactly(before);
        assertThat(d.status()).isEqualTo(RequestStatus.WAITING);
        assertThat(d.numBlocks()).isZero();
        b.appendToken(1);
        assertThat(m.allocateSlots(b, 1, 0)).isTrue(); // running requests may still grow
        m.checkInvariants();
    }

    // ------------------------------------------------------------------ bad input

    @Test
    void freeingARequestTwiceIsAClearErrorAndTheStateHolds() {
        KvCacheManager m = manager(16, KvCacheConfig.defaults());
        KvRequest a = admit(m, KvRequest.of("req-7", seq(0, 9)));
        KvRequest b = admit(m, KvRequest.of("b", seq(0, 9)));
        m.free(a);
        int[] before = m.pool().freeListOrder();
        assertThatThrownBy(() -> m.free(a))
                .isInstanceOf(KvCacheException.class)
                .hasMessage("request req-7 freed twice");
        assertThat(m.pool().freeListOrder()).containsExactly(before);
        assertThat(m.pool().refCount(b.block(0))).isEqualTo(1);
        m.checkInvariants();
    }

    @Test
    void tokensBeyondTheModelLengthAreRefusedWithNothingChanged() {
        KvCacheManager m = manager(32, KvCacheConfig.defaults()); // maxModelLen 64
        KvRequest a = KvRequest.of("long", seq(0, 70));
        m.lookupCachedTokens(a);
        assertThatThrownBy(() -> m.allocateSlots(a, 70, 0))
                .isInstanceOf(KvCacheException.class)
                .hasMessageContaining("request long")
                .hasMessageContaining("max model length 64");
        assertThat(m.pool().freeCount()).isEqualTo(31);
        assertThatThrownBy(() -> m.allocateSlots(KvRequest.of("x", seq(0, 3)), 5, 0))
                .isInstanceOf(KvCacheException.class)
                .hasMessageContaining("exceed its 3 known tokens");
        m.checkInvariants();
    }

    @Test
    void advancingTheComputedCountPastIntRangeIsRefusedAndTheCountHolds() {
        KvCacheManager m = manager(16, KvCacheConfig.defaults());
        KvRequest r = KvRequest.of("r", seq(0, 10));
        m.lookupCachedTokens(r);
        assertThat(m.allocateSlots(r, 10, 0)).isTrue();
        r.advanceComputed(5);
        // 5 + Integer.MAX_VALUE wraps to a negative int, which an int comparison lets through
        assertThatThrownBy(() -> r.advanceComputed(Integer.MAX_VALUE))
                .isInstanceOf(KvCacheException.class)
                .hasMessageContaining("request r")
                .hasMessageContaining("(5 computed of 10)");
        assertThat(r.numComputed()).isEqualTo(5);
        r.advanceComputed(5);
        assertThat(r.numComputed()).isEqualTo(10);
        m.checkInvariants();
    }

    @Test
    void newTokensPastIntRangeAreRefusedWithNothingChanged() {
        KvCacheManager m = manager(16, KvCacheConfig.defaults());
        KvRequest r = KvRequest.of("r", seq(0, 10));
        m.lookupCachedTokens(r);
        assertThat(m.allocateSlots(r, 10, 0)).isTrue();
        r.advanceComputed(10);
        int[] table = r.blockTable();
        int[] freeList = m.pool().freeListOrder();
        // 10 computed + Integer.MAX_VALUE wraps to a negative end, which used to "fit" and allocate nothing
        assertThatThrownBy(() -> m.allocateSlots(r, Integer.MAX_VALUE, 0))
                .isInstanceOf(KvCacheException.class)
                .hasMessageContaining("request r")
                .hasMessageContaining("exceed its 10 known tokens");
        KvRequest fresh = KvRequest.of("fresh", seq(100, 3));
        m.lookupCachedTokens(fresh);
        assertThatThrownBy(() -> m.allocateSlots(fresh, Integer.MAX_VALUE, 0))
                .isInstanceOf(KvCacheException.class)
                .hasMessageContaining("exceed its 3 known tokens");
        assertThat(r.blockTable()).containsExactly(table);
        assertThat(fresh.numBlocks()).isZero();
        assertThat(m.pool().freeListOrder()).containsExactly(freeList);
        m.checkInvariants();
    }

    @Test
    void aBudgetTooSmallForOneRequestIsRejectedWithTheFeasibleLength() {
        assertThatThrownBy(() -> KvCacheSpec.builder()
                        .layers(4)
                        .kvHeads(8)
                        .headSize(128)
                        .elementSize(2)
                        .budgetBytes(4L * 16 * 2 * 8 * 128 * 2 * 10)
                        .maxModelLen(4096)
                        .build())
                .isInstanceOf(KvCacheException.class)
                .hasMessageContaining("budget too small for one request")
                .hasMessageContaining("lower maxModelLen to at most 144");
    }

    @Test
    void aRequestOfAnotherManagerIsRefused() {
        KvCacheManager m1 = manager(16, KvCacheConfig.defaults());
        KvCacheManager m2 = manager(16, KvCacheConfig.defaults());
        KvRequest a = admit(m1, KvRequest.of("a", seq(0, 5)));
        KvCacheStats before1 = m1.stats();
        KvCacheStats before2 = m2.stats();
        List<ThrowingCallable> calls = List.of(
                () -> m2.free(a),
                () -> m2.lookupCachedTokens(a),
                () -> m2.allocateSlots(a, 1, 0),
                () -> m2.fork(a, "a-child"),
                () -> m2.preempt(a, PreemptionMode.RECOMPUTE),
                () -> m2.swapIn(a));
        for (ThrowingCallable call : calls) {
            assertThatThrownBy(call)
                    .isInstanceOf(KvCacheException.class)
                    .hasMessage("request a belongs to another KV cache manager");
        }
        assertThat(a.numBlocks()).as("a keeps its blocks in m1").isEqualTo(2);
        assertThat(m1.stats()).isEqualTo(before1);
        assertThat(m2.stats()).isEqualTo(before2);
        m1.checkInvariants();
        m2.checkInvariants();
    }

    @Test
    void specDerivesPageBytesAndBlockCountFromTheBudget() {
        KvCacheSpec spec = KvCacheSpec.builder()
                .layers(32)
                .kvHeads(8)
                .headSize(128)
                .elementSize(2)
                .budgetBytes(1L << 30)
                .maxModelLen(4096)
                .build();
        assertThat(spec.pageBytes()).isEqualTo(16L * 2 * 8 * 128 * 2);
        assertThat(spec.numBlocks()).isEqualTo((int) ((1L << 30) / spec.pageBytes() / 32));
        assertThat(spec.blockSize()).isEqualTo(16);
    }

    @Test
    void aBlockCountPastTheIntTokenRangeSaysWhyAndWhatFits() {
        // 3 blocks are not "too many": 3 blocks of 2^30 tokens are more tokens than an int position addresses
        assertThatThrownBy(() -> KvCacheSpec.builder()
                        .layers(1)
                        .kvHeads(1)
                        .headSize(1)
                        .elementSize(2)
                        .blockSize(1 << 30)
                        .numBlocks(3)
                        .maxModelLen(16)
                        .build())
                .isInstanceOf(KvCacheException.class)
                .hasMessage("KvCacheSpec: 3 blocks of 1073741824 tokens hold 3221225472 tokens, over the limit of"
                        + " 2147483647 tokens; use at most 1 blocks of 1073741824 tokens");
    }

    @Test
    void pagesComeFromTheDeviceOneRegionPerLayerAndGoBackOnClose() {
        SimulatedDevice device = SimulatedDevice.builder().capacity(64L << 20).build();
        KvCacheSpec spec = KvCacheSpec.builder()
                .layers(3)
                .kvHeads(2)
                .headSize(4)
                .elementSize(4)
                .numBlocks(10)
                .maxModelLen(16)
                .build();
        long free = device.freeMemory();
        try (KvCacheManager m = new KvCacheManager(spec, KvMemory.direct(device))) {
            assertThat(device.mallocCount()).isEqualTo(3);
            assertThat(m.pages().pageAddress(1, 2) - m.pages().layerAddress(1)).isEqualTo(2 * spec.pageBytes());
        }
        assertThat(device.freeMemory()).isEqualTo(free);
        assertThat(KvBlockPool.NULL_BLOCK).isZero();
    }
}
