package io.gpumem.alloc;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.device.SimulatedDevice;
import io.gpumem.history.BlockState;
import io.gpumem.history.MemorySnapshot;
import io.gpumem.history.SegmentInfo;
import io.gpumem.plan.LifetimeProblem;
import io.gpumem.policy.PolicyRegistry;
import io.gpumem.policy.PolicySpec;
import io.gpumem.policy.RmmPoolAllocator;
import io.gpumem.policy.StreamFacts;
import io.gpumem.stats.MemoryStats;
import io.gpumem.stats.MemorySummary;
import io.gpumem.stats.StatKind;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Stress of every registered policy's lock and facade (issues 12 and 18), through {@link GpuAllocator} only, so a
 * newly registered policy is covered without a line here: 16 workers on 4 streams allocate mixed sizes (small
 * pool, large pool, above the split limit), hand a third of their blocks to other workers to free, record blocks
 * on other streams, while one thread empties the cache (and now and then marks a step boundary) and one reads
 * stats, summaries and snapshots all the time. Every reading must be self-consistent; at the end the invariant
 * checker passes and every block is accounted for: mallocs equal frees, nothing is allocated, and after
 * {@code emptyCache} nothing is reserved or held on the device. The exact allocator also runs under two more
 * configurations (split limit with garbage collection, expandable segments).
 */
class ConcurrencyStressTest {

    private static final int WORKERS = 16;
    private static final int OPS_PER_WORKER = 6_000;

    private static long size(SplittableRandom rnd) {
        return switch (rnd.nextInt(4)) {
            case 0 -> 1 + rnd.nextInt(4096); // small pool, several blocks per 2 MiB segment
            case 1 -> (1L << 20) + rnd.nextInt(9 << 20); // large pool, from 20 MiB segments
            case 2 -> (10L << 20) + rnd.nextInt(60 << 20); // own segments, split or not by the limit
            default -> 512L * (1 + rnd.nextInt(2048));
        };
    }

    /** Every registered policy without options, then the exact allocator under two more configurations. */
    static Stream<String> policies() {
        return Stream.concat(
                PolicyRegistry.names().stream(),
                Stream.of(
                        PolicyRegistry.EXACT + ":max_split_size_mb:40,garbage_collection_threshold:0.7",
                        PolicyRegistry.EXACT + ":expandable_segments:True"));
    }

    /**
     * An allocator of any policy, told the stream marks steps and offered a small profile, so that a policy which
     * plans can be made as well.
     */
    static GpuAllocator create(String policy, SimulatedDevice dev) {
        LifetimeProblem profile = new LifetimeProblem(
                new long[] {0, 1}, new long[] {0, 1}, new long[] {2, 3}, new long[] {1L << 20, 4L << 20}, 512);
        return PolicySpec.parse(policy)
                .prepare(StreamFacts.of(true, () -> profile))
                .create(dev);
    }

    @ParameterizedTest
    @MethodSource("policies")
    void sixteenThreadsWithCrossThreadFreesEmptyCacheAndStatsReaders(String policy) throws Exception {
        long seed = System.nanoTime();
        System.out.println("ConcurrencyStressTest policy='" + policy + "' seed=" + seed);
        SimulatedDevice dev = SimulatedDevice.builder().capacity(256L << 30).build();
        GpuAllocator a = create(policy, dev);
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
            int boundaries = 0;
            for (long n = 0; !done.get(); n++) {
                a.emptyCache();
                if (n % 64 == 63 && boundaries < 8) {
                    a.internals().stepBoundary(); // a planning policy plans (or re-plans) here
                    boundaries++;
                }
                Thread.onSpinWait();
            }
            return null;
        }));
        AtomicLong readings = new AtomicLong();
        futures.add(pool.submit(() -> {
            start.await();
            while (!done.get()) {
                MemoryStats s = a.stats();
                assertThat(s.allocatedBytes()).isLessThanOrEqualTo(s.reservedBytes());
                if (s.get(StatKind.ACTIVE_BYTES).peak() > 0) { // a policy that tracks active blocks
                    assertThat(s.allocatedBytes())
                            .isLessThanOrEqualTo(s.get(StatKind.ACTIVE_BYTES).current());
                    assertThat(s.get(StatKind.ACTIVE_BYTES).current()).isLessThanOrEqualTo(s.reservedBytes());
                }
                MemoryStats.Stat allocations = s.get(StatKind.ALLOCATION);
                assertThat(allocations.current()).isEqualTo(allocations.allocated() - allocations.freed());
                if (readings.incrementAndGet() % 64 == 0) {
                    assertThat(MemorySummary.format(s.toPyTorchMap(), 0, true)).contains("PyTorch CUDA memory summary");
                    MemorySnapshot snap = a.snapshot();
                    assertThat(snap.segments().stream()
                                    .mapToLong(seg -> seg.totalSize())
                                    .sum())
                            .isEqualTo(snap.segments().stream()
                                    .flatMap(seg -> seg.blocks().stream())
                                    .mapToLong(b -> b.size())
                                    .sum());
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
        System.out.println(
                "ConcurrencyStressTest: " + mallocs.get() + " mallocs, " + readings.get() + " stats readings");
        a.internals().checkInvariants();
        MemoryStats s = a.stats();
        assertThat(frees.get()).isEqualTo(mallocs.get());
        assertThat(s.get(StatKind.ALLOCATION).allocated()).isEqualTo(mallocs.get());
        assertThat(s.get(StatKind.ALLOCATION).freed()).isEqualTo(mallocs.get());
        assertThat(s.allocatedBytes()).isZero();
        assertThat(readings.get()).isPositive();
        dev.completeAllEvents();
        a.emptyCache();
        a.internals().checkInvariants();
        if (policy.equals(RmmPoolAllocator.NAME)) {
            // RMM's pool never shrinks: empty_cache leaves it whole and free, close gives it back
            assertThat(a.snapshot().segments())
                    .flatMap(SegmentInfo::blocks)
                    .as("no block left, pending or not")
                    .allSatisfy(b -> assertThat(b.state()).isEqualTo(BlockState.INACTIVE));
            a.close();
        } else {
            assertThat(a.snapshot().segments())
                    .as("no block left, pending or not")
                    .isEmpty();
            assertThat(a.stats().reservedBytes()).isZero();
        }
        assertThat(dev.consumedBytes()).isZero();
    }
}
