package io.gpumem.bench.alloc;

import io.gpumem.alloc.CachingAllocator;
import io.gpumem.device.SimulatedDevice;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;

import java.util.HashMap;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

/**
 * Throughput of {@link CachingAllocator} malloc+free pairs served from its cache, single thread.
 *
 * <p>Workload: a window of 64 live allocations; each operation frees the oldest and allocates a new one whose
 * size comes from a fixed mixed distribution (60% small tensors up to 1 MiB, 30% of 1–12 MiB, 10% of 12–100
 * MiB, on two streams). After warm-up every request is served from cached segments: no device calls. Each
 * benchmark invocation is one malloc+free pair, so ops/s = pairs/s.
 *
 * <p>Baselines measured in the same run: {@link #deviceMallocFree} calls the simulated device directly (the
 * "no caching" path), and {@link #hashMapBumpAllocator} is the simplest possible allocator (a bump pointer
 * with a {@link HashMap} from address to size), which bounds what bookkeeping alone costs.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
public class CachingAllocatorBench {
    private static final int WINDOW = 64;
    private static final int SIZES = 1 << 14;
    private static final long MiB = 1L << 20;

    private final long[] sizes = new long[SIZES];
    private final long[] streams = new long[SIZES];
    private final long[] live = new long[WINDOW];
    private final long[] deviceLive = new long[WINDOW];
    private int next;
    private int slot;

    private CachingAllocator allocator;
    private SimulatedDevice device;
    private final HashMap<Long, Long> bumpLive = new HashMap<>();
    private long bumpTop;

    @Setup(Level.Trial)
    public void setUp() {
        SplittableRandom rnd = new SplittableRandom(42);
        device = SimulatedDevice.builder().capacity(1L << 40).build();
        long s1 = device.createStream();
        for (int i = 0; i < SIZES; i++) {
            int kind = rnd.nextInt(100);
            sizes[i] = kind < 60 ? 1 + rnd.nextLong(MiB) : kind < 90 ? MiB + rnd.nextLong(11 * MiB)
                    : 12 * MiB + rnd.nextLong(88 * MiB);
            streams[i] = rnd.nextInt(4) == 0 ? s1 : 0;
        }
        allocator = new CachingAllocator(device);
        // warm the cache: run the workload once through so that later requests find cached blocks
        for (int i = 0; i < SIZES * 4; i++) {
            pair();
        }
    }

    private long pair() {
        int s = slot;
        long old = live[s];
        if (old != 0) {
            allocator.free(old);
        }
        int i = next;
        long p = allocator.malloc(sizes[i], streams[i]);
        live[s] = p;
        next = (i + 1) & (SIZES - 1);
        slot = (s + 1) & (WINDOW - 1);
        return p;
    }

    /** One cached malloc+free pair. */
    @Benchmark
    public long cachingAllocatorPair() {
        return pair();
    }

    /** Baseline: the same pairs (same window, same sizes) straight on the simulated device (no cache). */
    @Benchmark
    public long deviceMallocFree() {
        int s = slot;
        long old = deviceLive[s];
        if (old != 0) {
            device.free(old);
        }
        int i = next;
        long p = device.malloc(sizes[i]);
        deviceLive[s] = p;
        next = (i + 1) & (SIZES - 1);
        slot = (s + 1) & (WINDOW - 1);
        return p;
    }

    /** Baseline: a bump pointer plus a HashMap of live allocations. */
    @Benchmark
    public long hashMapBumpAllocator() {
        int s = slot;
        long old = live[s];
        if (old != 0) {
            bumpLive.remove(old);
        }
        int i = next;
        long p = bumpTop += (sizes[i] + 511) & ~511L;
        bumpLive.put(p, sizes[i]);
        live[s] = p;
        next = (i + 1) & (SIZES - 1);
        slot = (s + 1) & (WINDOW - 1);
        return p;
    }

    @Setup(Level.Iteration)
    public void checkConsistent() {
        allocator.checkInvariants();
    }
}
