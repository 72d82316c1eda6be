package io.gpumem.kvcache.manager;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.kvcache.pool.KvBlockPool;
import java.lang.management.ManagementFactory;
import org.junit.jupiter.api.Test;

/**
 * The hot path allocates no objects: block allocate/free/touch/lookup on the pool, and a decode step
 * (append, allocateSlots, advance) of a running request once its arrays have grown. Measured with the
 * JVM's per-thread allocation counter, which counts bytes, not time.
 */
class HotPathGarbageTest {
    private static final com.sun.management.ThreadMXBean THREADS =
            (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();

    private static long allocated() {
        return THREADS.getCurrentThreadAllocatedBytes();
    }

    @Test
    void prefixHitTouchAndFreeAllocateNoBytes() {
        KvBlockPool pool = new KvBlockPool(1024, 16, true);
        int[] tokens = new int[16];
        int[] one = new int[1];
        int b = pool.allocate();
        pool.cache(b, 7, 7, KvBlockPool.NONE, tokens, 0, 0, 0);
        one[0] = b;
        pool.free(one, 0, 1);
        long sum = 0;
        for (int round = 0; round < 2; round++) { // the second round runs warmed up
            long before = allocated();
            for (int i = 0; i < 50_000; i++) {
                int hit = pool.lookup(7, 7, KvBlockPool.NONE, tokens, 0, 0, 0);
                pool.touch(hit);
                one[0] = hit;
                pool.free(one, 0, 1);
                sum += hit;
            }
            if (round == 1) {
                assertThat(allocated() - before).isLessThan(1024);
            }
        }
        assertThat(sum).isEqualTo(100_000L * b);
        pool.checkInvariants();
    }

    @Test
    void blockPoolAllocateFreeAllocatesNoBytes() {
        KvBlockPool pool = new KvBlockPool(1024, 16, true);
        int[] table = new int[16];
        for (int i = 0; i < 20_000; i++) {
            pool.allocate(16, table, 0);
            pool.free(table, 0, 16);
        }
        long before = allocated();
        for (int i = 0; i < 100_000; i++) {
            pool.allocate(16, table, 0);
            pool.free(table, 0, 16);
        }
        assertThat(allocated() - before).isLessThan(1024);
    }

    @Test
    void aDecodeStepAllocatesNothingOnceArraysHaveGrown() {
        KvCacheManager m = KvCacheManagerTest.manager(512, KvCacheConfig.defaults());
        KvRequest r = KvCacheManagerTest.admit(m, KvRequest.of("r", KvCacheManagerTest.seq(0, 17)));
        // grow the request's arrays past what the measured loop needs, then shrink back by forking nothing:
        // the warm-up below decodes the same number of tokens into a twin request
        KvRequest twin = KvCacheManagerTest.admit(m, KvRequest.of("t", KvCacheManagerTest.seq(1000, 17)));
        for (int i = 0; i < 40; i++) {
            twin.appendToken(i);
            m.allocateSlots(twin, 1, 0);
            twin.advanceComputed(1);
        }
        r.appendToken(0); // grow r's token array once so the loop below does not
        m.allocateSlots(r, 1, 0);
        r.advanceComputed(1);
        long before = allocated();
        boolean allGranted = true;
        for (int i = 1; i < 14; i++) { // stays within r's current token and table arrays
            r.appendToken(i);
            allGranted &= m.allocateSlots(r, 1, 0);
            r.advanceComputed(1);
        }
        long bytes = allocated() - before;
        assertThat(allGranted).isTrue();
        // amortised doubling of the request's arrays is the only allocation allowed
        assertThat(bytes).isLessThan(512);
        m.checkInvariants();
    }
}
