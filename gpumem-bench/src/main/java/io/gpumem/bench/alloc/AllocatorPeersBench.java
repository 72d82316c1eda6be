package io.gpumem.bench.alloc;

import io.gpumem.alloc.CachingAllocator;
import io.gpumem.device.DeviceOp;
import io.gpumem.device.SimulatedDevice;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.PooledByteBufAllocator;
import java.util.HashMap;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * gpumem's faithful caching allocator against two peers, replaying the same request streams the same way.
 *
 * <p>Streams ({@link RequestStream#named}): the recorded lm2.7b training step (6,771 allocations), the
 * recorded llama offload run on 10 streams (3,058), RMM's {@code random_allocations} shape (10,000
 * allocations, seed 1), and the generated training loop of {@link CachingAllocatorBench} as one pass. A pass replays the stream and frees what is still live; passes repeat forever and each
 * invocation performs the next two ops, so over whole passes ops/s = malloc+free pairs/s (as in
 * {@link CachingAllocatorBench}).
 *
 * <ul>
 *   <li>{@link #gpumem}: {@link CachingAllocator} with default configuration on a 1 TiB simulated device;
 *       trace streams other than 0 get a device stream each. Setup runs two passes first, so the measured
 *       passes are served from the cache (device mallocs during measurement are counted and printed).
 *   <li>{@link #netty}: Netty's {@link PooledByteBufAllocator} (heap arenas, its defaults), sizes divided by
 *       4,096 and rounded up so that a request fits Netty's chunk; streams are ignored. It is a general-purpose
 *       pooled allocator, a same-run reference for what a tuned JVM allocator costs per pair.
 *   <li>{@link #bumpPointer}: a bump pointer plus a {@link HashMap} from address to size: no reuse at all, the
 *       floor that bookkeeping alone costs (the baseline the ratios are taken against).
 * </ul>
 *
 * <p>Each replayer is its own final class with its own loop, so that no call site in a measured loop sees more
 * than one allocator type. Run: {@code java -jar gpumem-bench/target/benchmarks.jar AllocatorPeers}.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Warmup(iterations = 4, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(
        value = 2,
        jvmArgsAppend = {"-XX:+UseSerialGC", "-Xmx2g", "-Dio.netty.leakDetection.level=disabled"})
public class AllocatorPeersBench {

    @Param({"lm2.7b", "llama-offload", "rmm-random", "training-loop"})
    public String stream;

    GpumemReplay gpumem;
    NettyReplay netty;
    BumpReplay bump;

    @Setup(Level.Trial)
    public void setUp() {
        RequestStream requests = RequestStream.named(stream);
        gpumem = new GpumemReplay(requests);
        netty = new NettyReplay(requests);
        bump = new BumpReplay(requests);
        for (int i = 0; i < requests.length(); i++) { // two warm passes each (one pair = two ops)
            gpumem.pair();
            netty.pair();
            bump.pair();
        }
        gpumem.mallocsAtStart = gpumem.device.callCount(DeviceOp.MALLOC);
        System.out.println("\n" + requests.description + ": " + requests.mallocs + " malloc+free pairs a pass, "
                + requests.slotCount + " slots, " + requests.streamCount + " streams");
    }

    @Setup(Level.Iteration)
    public void checkConsistent() {
        gpumem.allocator.internals().checkInvariants();
    }

    @TearDown(Level.Trial)
    public void report() {
        System.out.println("\ngpumem: " + (gpumem.device.callCount(DeviceOp.MALLOC) - gpumem.mallocsAtStart)
                + " device mallocs after the warm passes (0 = every measured request served from the cache)");
    }

    /** One malloc+free pair (on average) of the stream through gpumem's caching allocator. */
    @Benchmark
    public long gpumem() {
        return gpumem.pair();
    }

    /** The same through Netty's pooled allocator, sizes ÷ 4,096. */
    @Benchmark
    public long netty() {
        return netty.pair();
    }

    /** The same through a bump pointer with a HashMap of live allocations. */
    @Benchmark
    public long bumpPointer() {
        return bump.pair();
    }

    static final class GpumemReplay {
        final SimulatedDevice device =
                SimulatedDevice.builder().capacity(1L << 40).build();
        final CachingAllocator allocator = new CachingAllocator(device);
        private final long[] sizes;
        private final int[] slots;
        private final int[] streamOf;
        private final long[] deviceStreams;
        private final long[] live;
        private int next;
        long mallocsAtStart;

        GpumemReplay(RequestStream s) {
            sizes = s.sizes;
            slots = s.slots;
            streamOf = s.streams;
            deviceStreams = new long[s.streamCount];
            for (int i = 1; i < deviceStreams.length; i++) {
                deviceStreams[i] = device.createStream();
            }
            live = new long[s.slotCount];
        }

        long pair() {
            long first = op();
            return first ^ op();
        }

        /** A whole pass from wherever the cycle stands (one pass = as many pairs as the stream has mallocs). */
        long pass() {
            long x = 0;
            for (int i = sizes.length / 2; i > 0; i--) {
                x ^= op();
                x ^= op();
            }
            return x;
        }

        private long op() {
            int i = next;
            long size = sizes[i];
            long p;
            if (size != 0) {
                p = allocator.malloc(size, deviceStreams[streamOf[i]]);
                live[slots[i]] = p;
            } else {
                p = live[slots[i]];
                allocator.free(p);
            }
            next = i + 1 == sizes.length ? 0 : i + 1;
            return p;
        }
    }

    static final class NettyReplay {
        private final PooledByteBufAllocator allocator = new PooledByteBufAllocator(false);
        private final int[] sizes;
        private final int[] slots;
        private final ByteBuf[] live;
        private int next;

        NettyReplay(RequestStream s) {
            sizes = new int[s.length()];
            for (int i = 0; i < sizes.length; i++) {
                sizes[i] = s.sizes[i] == 0 ? 0 : (int) Math.max(1, (s.sizes[i] + 4095) >>> 12);
            }
            slots = s.slots;
            live = new ByteBuf[s.slotCount];
        }

        long pair() {
            long first = op();
            return first ^ op();
        }

        /** A whole pass from wherever the cycle stands (one pass = as many pairs as the stream has mallocs). */
        long pass() {
            long x = 0;
            for (int i = sizes.length / 2; i > 0; i--) {
                x ^= op();
                x ^= op();
            }
            return x;
        }

        private long op() {
            int i = next;
            int size = sizes[i];
            long r;
            if (size != 0) {
                ByteBuf b = allocator.heapBuffer(size, size);
                live[slots[i]] = b;
                r = b.arrayOffset();
            } else {
                ByteBuf b = live[slots[i]];
                live[slots[i]] = null;
                r = b.arrayOffset();
                b.release();
            }
            next = i + 1 == sizes.length ? 0 : i + 1;
            return r;
        }
    }

    static final class BumpReplay {
        private final HashMap<Long, Long> liveSizes = new HashMap<>();
        private final long[] sizes;
        private final int[] slots;
        private final long[] live;
        private long top;
        private int next;

        BumpReplay(RequestStream s) {
            sizes = s.sizes;
            slots = s.slots;
            live = new long[s.slotCount];
        }

        long pair() {
            long first = op();
            return first ^ op();
        }

        /** A whole pass from wherever the cycle stands (one pass = as many pairs as the stream has mallocs). */
        long pass() {
            long x = 0;
            for (int i = sizes.length / 2; i > 0; i--) {
                x ^= op();
                x ^= op();
            }
            return x;
        }

        private long op() {
            int i = next;
            long size = sizes[i];
            long p;
            if (size != 0) {
                p = top;
                top += (size + 511) & ~511L;
                liveSizes.put(p, size);
                live[slots[i]] = p;
            } else {
                p = live[slots[i]];
                liveSizes.remove(p);
            }
            next = i + 1 == sizes.length ? 0 : i + 1;
            return p;
        }
    }
}
