package io.gpumem.alloc;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.device.SimulatedDevice;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.Test;

/** Several threads malloc and free concurrently; afterwards the invariants hold and every counter balances. */
class ConcurrencyTest {
    @Test
    void concurrentMallocFreeKeepsStateConsistent() throws Exception {
        long seed = System.nanoTime();
        System.out.println("ConcurrencyTest seed=" + seed);
        SimulatedDevice dev = SimulatedDevice.builder().capacity(64L << 30).build();
        CachingAllocator a = new CachingAllocator(dev);
        int threads = 4;
        int ops = 20_000;
        long[] streams = {0, dev.createStream(), dev.createStream(), dev.createStream()};
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        List<Future<Long>> results = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            long stream = streams[t];
            long threadSeed = seed + t;
            results.add(pool.submit(() -> {
                SplittableRandom rnd = new SplittableRandom(threadSeed);
                List<Long> live = new ArrayList<>();
                long mallocs = 0;
                for (int i = 0; i < ops; i++) {
                    if (live.size() < 50 && (live.isEmpty() || rnd.nextBoolean())) {
                        live.add(a.malloc(CachingAllocatorRandomizedTest.randomSize(rnd) / 8 + 1, stream));
                        mallocs++;
                    } else {
                        a.free(live.remove(rnd.nextInt(live.size())));
                    }
                }
                for (long p : live) {
                    a.free(p);
                }
                return mallocs;
            }));
        }
        long total = 0;
        for (Future<Long> f : results) {
            total += f.get();
        }
        pool.shutdown();
        a.internals().checkInvariants();
        Map<String, Long> s = a.stats().toPyTorchMap();
        assertThat(s.get("allocation.all.allocated")).isEqualTo(total);
        assertThat(s.get("allocation.all.freed")).isEqualTo(total);
        assertThat(s.get("allocated_bytes.all.current")).isZero();
        assertThat(s.get("allocated_bytes.all.allocated")).isEqualTo(s.get("allocated_bytes.all.freed"));
        assertThat(s.get("active.all.current")).isZero();
        a.emptyCache();
        assertThat(a.reservedBytes()).isZero();
        assertThat(dev.consumedBytes()).isZero();
    }
}
