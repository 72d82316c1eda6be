package io.gpumem.bench.alloc;

import io.gpumem.alloc.CachingAllocator;
import io.gpumem.bench.OpsPerSecondBenchmark;
import io.gpumem.device.DeviceOp;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.engine.RequestStream;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.PooledByteBufAllocator;
import java.util.HashMap;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * gpumem's faithful caching allocator against two peers, replaying the same request streams the same way.
 *
 * <p>Streams ({@link BenchStreams#named}, the engine's {@link RequestStream} made balanced): the recorded lm2.7b
 * training step (6,771 allocations), the recorded llama offload run on 10 streams (3,058), RMM's
 * {@code random_allocations} shape (10,000 allocations, seed 1), and the generated training loop of
 * {@link CachingAllocatorBench} as one pass. A pass replays the stream and frees what is still live; passes repeat
 * forever and each invocation performs the next two ops, so over whole passes ops/s = malloc+free pairs/s (as in
 * {@link CachingAllocatorBench}).
 *
 * <ul>
 *   <li>{@link #gpumem}: {@link CachingAllocator} with default configuration on a 1 TiB simulated device, in a
 *       {@link StreamLoop}; trace streams other than 0 get a device stream each. Setup runs two passes first, so
 *       the measured passes are served from the cache (device mallocs during measurement are counted and printed).
 *   <li>{@link #netty}: Netty's {@link PooledByteBufAllocator} (heap arenas, its defaults), sizes divided by
 *       4,096 and rounded up so that a request fits Netty's chunk; streams are ignored. It is a general-purpose
 *       pooled allocator, a same-run reference for what a tuned JVM allocator costs per pair.
 *   <li>{@link #bumpPointer}: a bump pointer plus a {@link HashMap} from address to size: no reuse at all, the
 *       floor that bookkeeping alone costs (the baseline the ratios are taken against).
 * </ul>
 *
 * <p>gpumem's loop is its own class, so that its call sites see one allocator type; the two peers share their
 * cursor ({@link PeerReplay}), whose call to a peer's op sees at most these two. Run:
 * {@code java -jar gpumem-bench/target/benchmarks.jar AllocatorPeers}.
 */
@State(Scope.Thread)
@Warmup(iterations = 4, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(
        value = 2,
        jvmArgsAppend = {"-XX:+UseSerialGC", "-Xmx2g", "-Dio.netty.leakDetection.level=disabled"})
public class AllocatorPeersBench extends OpsPerSecondBenchmark {

    @Param({"lm2.7b", "llama-offload", "rmm-random", "training-loop"})
    public String stream;

    StreamLoop gpumem;
    NettyReplay netty;
    BumpReplay bump;
    long mallocsAtStart;

    @Setup(Level.Trial)
    public void setUp() {
        RequestStream requests = BenchStreams.named(stream);
        gpumem = gpumemLoop(requests);
        netty = new NettyReplay(requests);
        bump = new BumpReplay(requests);
        gpumem.warm(2);
        netty.pass();
        netty.pass();
        bump.pass();
        bump.pass();
        mallocsAtStart = gpumem.device.callCount(DeviceOp.MALLOC);
        System.out.println("\n" + stream + ": " + requests.allocs() + " malloc+free pairs a pass, "
                + requests.peakLiveBlocks() + " slots, " + requests.streams().length + " streams");
    }

    /** gpumem's replay of a balanced stream: the default caching allocator on a 1 TiB simulated device. */
    static StreamLoop gpumemLoop(RequestStream requests) {
        SimulatedDevice device = SimulatedDevice.builder().capacity(1L << 40).build();
        return new StreamLoop(new CachingAllocator(device), device, requests, 0);
    }

    @Setup(Level.Iteration)
    public void checkConsistent() {
        gpumem.allocator.internals().checkInvariants();
    }

    @TearDown(Level.Trial)
    public void report() {
        System.out.println("\ngpumem: " + (gpumem.device.callCount(DeviceOp.MALLOC) - mallocsAtStart)
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

    /**
     * A peer's replay of a balanced stream: the cursor over its ops (request size, 0 for a free; compact slot),
     * wrapping at the end; the peer plays one op.
     */
    abstract static class PeerReplay {
        final long[] sizes;
        final int[] slots;
        private int next;

        PeerReplay(RequestStream s) {
            sizes = s.requestSizes();
            slots = s.compactSlots();
        }

        /** The next two ops. */
        final long pair() {
            long first = step();
            return first ^ step();
        }

        /** A whole pass from wherever the cycle stands (one pass = as many pairs as the stream has mallocs). */
        final long pass() {
            long x = 0;
            for (int i = sizes.length / 2; i > 0; i--) {
                x ^= step();
                x ^= step();
            }
            return x;
        }

        private long step() {
            int i = next;
            next = i + 1 == sizes.length ? 0 : i + 1;
            return op(i);
        }

        /** Plays op {@code i}; returns what it handed out or gave back. */
        abstract long op(int i);
    }

    static final class NettyReplay extends PeerReplay {
        private final PooledByteBufAllocator allocator = new PooledByteBufAllocator(false);
        private final int[] pages;
        private final ByteBuf[] live;

        NettyReplay(RequestStream s) {
            super(s);
            pages = new int[sizes.length];
            for (int i = 0; i < pages.length; i++) {
                pages[i] = sizes[i] == 0 ? 0 : (int) Math.max(1, (sizes[i] + 4095) >>> 12);
            }
            live = new ByteBuf[s.peakLiveBlocks()];
        }

        @Override
        long op(int i) {
            int size = pages[i];
            if (size != 0) {
                ByteBuf b = allocator.heapBuffer(size, size);
                live[slots[i]] = b;
                return b.arrayOffset();
            }
            ByteBuf b = live[slots[i]];
            live[slots[i]] = null;
            long r = b.arrayOffset();
            b.release();
            return r;
        }
    }

    static final class BumpReplay extends PeerReplay {
        private final HashMap<Long, Long> liveSizes = new HashMap<>();
        private final long[] live;
        private long top;

        BumpReplay(RequestStream s) {
            super(s);
            live = new long[s.peakLiveBlocks()];
        }

        @Override
        long op(int i) {
            long size = sizes[i];
            if (size != 0) {
                long p = top;
                top += (size + 511) & ~511L;
                liveSizes.put(p, size);
                live[slots[i]] = p;
                return p;
            }
            long p = live[slots[i]];
            liveSizes.remove(p);
            return p;
        }
    }
}
