package io.gpumem.alloc;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.device.SimulatedDevice;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Stress of the allocator's lock and facade (issue 12): 16 workers on 4 streams allocate mixed sizes (small pool,
 * large pool, above the split limit), hand a third of their blocks to other workers to free, record blocks on other
 * streams, while one thread empties the cache and one reads stats, summaries and snapshots all the time. Every
 * reading must be self-consistent; at the end the invariant checker passes and every block is accounted for:
 * mallocs equal frees, nothing is allocated, and after {@code emptyCache} nothing is reserved or held on the device.
 */
class ConcurrencyStressTest {

    private static final int WORKERS = 16;
    private static final int OPS_PER_WORKER = 6_000;

    private static long size(SplittableRandom rnd) {
        return switch (rnd.nextInt(4)) {
            case 0 -> 1 + rnd.nextInt(4096);                     // small pool, several blocks per 2 MiB segment
            case 1 -> (1L << 20) + rnd.nextInt(9 << 20);          // large pool, from 20 MiB segments
            case 2 -> (10L << 20) + rnd.nextInt(60 << 20);        // own segments, split or not by the limit
            default -> 512L * (1 + rnd.nextInt(2048));
        };
    }

    @ParameterizedTest
    @ValueSource(strings = {"", "max_split_size_mb:40,garbage_collection_threshold:0.7", "expandable_segments:True"})
    void sixteenThreadsWithCrossThreadFreesEmptyCacheAndStatsReaders(String conf) throws Exception {
        long seed = System.nanoTime();
        System.out.println("ConcurrencyStressTest conf='" + conf + "' seed=" + seed);
        SimulatedDevice dev = SimulatedDevice.builder().capacity(256L << 30).build();
        CachingAllocator a = new CachingAllocator(dev, AllocatorConfig.parse(conf));
        long[] streams = {0, dev.createStream(), dev.createStream(), dev.createStream()};
        List<ConcurrentLinkedQueue<Long>> handoff = new ArrayList<>();
        for (int i = 0; i < WORKERS; i++) {
            handoff.add(new ConcurrentLinkedQueue<>());
        }
        AtomicLong mallocs = new AtomicLong();
        AtomicLong frees = new AtomicLong();
        AtomicBoolean done = new AtomicBoolean();
        CountDownLatch start = new CountDownLatch(1);
        ExecutorService pool = Executors.newFixedThreadPool(WORKERS + 2);
        List<Future<?>> futures = new ArrayList<>();
        for (int w = 0; w < WORKERS; w++) {
            int me = w;
            SplittableRandom rnd = new SplittableRandom(seed + w);
            futures.add(pool.submit(() -> {
                start.await();
                List<Long> live = new ArrayList<>();
                for (int i = 0; i < OPS_PER_WORKER; i++) {
                    Long given = handoff.get(me).poll();
                    if (given != null) {
                        a.free(given);
                        frees.incrementAndGet();
                    }
                    int op = rnd.nextInt(10);
                    if (live.size() < 24 && (live.isEmpty() || op < 5)) {
                        live.add(a.malloc(size(rnd), streams[me % streams.length]));
                        mallocs.incrementAndGet();
                    } else if (op < 7) {
                        // another worker frees it
                        handoff.get(rnd.nextInt(WORKERS)).add(live.remove(rnd.nextInt(live.size())));
                    } else if (op < 8) {
                        a.recordStream(live.get(rnd.nextInt(live.size())), streams[rnd.nextInt(streams.length)]);
                    } else {
                        a.free(live.remove(rnd.nextInt(live.size())));
                        frees.incrementAndGet();
                    }
                }
                for (long p : live) {
                    a.free(p);
                    frees.incrementAndGet();
                }
                return null;
            }));
        }
        futures.add(pool.submit(() -> {
            start.await();
            while (!done.get()) {
                a.emptyCache();
                Thread.onSpinWait();
            }
            return null;
        }));
        AtomicLong readings = new AtomicLong();
        futures.add(pool.submit(() -> {
            start.await();
            while (!done.get()) {
                Map<String, Long> s = a.stats().toPyTorchMap();
                assertThat(s.get("allocated_bytes.all.current")).isLessThanOrEqualTo(s.get("active_bytes.all.current"));
                assertThat(s.get("active_bytes.all.current")).isLessThanOrEqualTo(s.get("reserved_bytes.all.current"));
                assertThat(s.get("allocation.all.current")).isEqualTo(
                        s.get("allocation.all.allocated") - s.get("allocation.all.freed"));
                if (readings.incrementAndGet() % 64 == 0) {
                    assertThat(a.memorySummary(true)).contains("PyTorch CUDA memory summary");
                    var snap = a.snapshot();
                    assertThat(snap.segments().stream().mapToLong(seg -> seg.totalSize()).sum())
                            .isEqualTo(snap.segments().stream().flatMap(seg -> seg.blocks().stream())
                                    .mapToLong(b -> b.size()).sum());
                }
            }
            return null;
        }));
        start.countDown();
        for (int i = 0; i < WORKERS; i++) {
            futures.get(i).get();
        }
        // blocks handed to a worker that had already finished are freed here
        for (ConcurrentLinkedQueue<Long> q : handoff) {
            for (Long p = q.poll(); p != null; p = q.poll()) {
                a.free(p);
                frees.incrementAndGet();
            }
        }
        done.set(true);
        for (Future<?> f : futures) {
            f.get();
        }
        pool.shutdown();
        System.out.println("ConcurrencyStressTest: " + mallocs.get() + " mallocs, " + readings.get() + " stats readings");
        a.internals().checkInvariants();
        Map<String, Long> s = a.stats().toPyTorchMap();
        assertThat(frees.get()).isEqualTo(mallocs.get());
        assertThat(s.get("allocation.all.allocated")).isEqualTo(mallocs.get());
        assertThat(s.get("allocation.all.freed")).isEqualTo(mallocs.get());
        assertThat(s.get("allocated_bytes.all.current")).isZero();
        assertThat(readings.get()).isPositive();
        dev.completeAllEvents();
        a.emptyCache();
        a.internals().checkInvariants();
        assertThat(a.internals().pendingFreeBlocks()).isZero();
        assertThat(a.reservedBytes()).isZero();
        assertThat(dev.consumedBytes()).isZero();
    }
}
