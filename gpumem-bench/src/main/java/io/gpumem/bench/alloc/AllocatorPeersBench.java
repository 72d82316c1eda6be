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
 * gpumem's faithful caching allocator against its {@code stitch} policy and three peers, replaying the same request
 * streams the same way: the project's one peers benchmark, so that every ratio RESULTS.md states between
 * allocators is taken on one stream, with one clock, in one run ({@link AllocatorPeersCpuTime} is the same in
 * thread CPU time).
 *
 * <p>Streams ({@link BenchStreams#named}, the engine's {@link RequestStream} made balanced): the recorded lm2.7b
 * training step (6,771 allocations), the recorded llama offload run on 10 streams (3,058), RMM's
 * {@code random_allocations} shape (10,000 allocations, seed 1) with its default sizes (up to 4 GiB) and with
 * sizes up to 64 MiB (about 590 live blocks), and the generated training loop of {@link CachingAllocatorBench} as
 * one pass. A pass replays the stream and frees what is still live; passes repeat
 * forever and each invocation performs the next two ops, so over whole passes ops/s = malloc+free pairs/s (as in
 * {@link CachingAllocatorBench}).
 *
 * <ul>
 *   <li>{@link #gpumem}: {@link CachingAllocator} with default configuration on a 1 TiB simulated device, in a
 *       {@link StreamLoop}; trace streams other than 0 get a device stream each. Setup runs two passes first, so
 *       the measured passes are served from the cache (device mallocs during measurement are counted and printed).
 *   <li>{@link #stitch}: the {@code stitch} policy ({@code StitchAllocator}) the same way, on its own 1 TiB device.
 *   <li>{@link #tlsf}: {@link TlsfAllocator}, our own two-level segregated fit allocator written from the published
 *       algorithm (the allocator behind VMA's default block metadata) over a 1 TiB address range; streams are
 *       ignored, and a block is freed by the id malloc returned (VMA's handle), not looked up by address.
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

    @Param({"lm2.7b", "llama-offload", "rmm-random", "rmm-64mib", "training-loop"})
    public String stream;

    StreamLoop gpumem;
    StreamLoop stitch;
    TlsfReplay tlsf;
    NettyReplay netty;
    BumpReplay bump;
    long mallocsAtStart;

    @Setup(Level.Trial)
    public void setUp() {
        RequestStream requests = BenchStreams.named(stream);
        gpumem = gpumemLoop(requests);
        stitch = PolicyPairBench.loop("stitch", requests);
        tlsf = new TlsfReplay(requests);
        netty = new NettyReplay(requests);
        bump = new BumpReplay(requests);
        gpumem.warm(2);
        tlsf.pass();
        tlsf.pass();
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
        stitch.allocator.internals().checkInvariants();
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

    /** The same through the {@code stitch} policy. */
    @Benchmark
    public long stitch() {
        return stitch.pair();
    }

    /** The same through our TLSF allocator. */
    @Benchmark
    public long tlsf() {
        return tlsf.pair();
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

    /**
     * {@link TlsfAllocator}'s replay: a cursor of its own rather than a third {@link PeerReplay}, so that the peers'
     * shared call to {@code op} stays bimorphic (a third receiver would make it a virtual call for every peer).
     */
    static final class TlsfReplay {
        private final TlsfAllocator allocator;
        private final long[] bytes;
        private final int[] slot;
        private final int[] live;
        private int at;

        TlsfReplay(RequestStream s) {
            allocator = new TlsfAllocator(1L << 40, s.peakLiveBlocks());
            bytes = s.requestSizes();
            slot = s.compactSlots();
            live = new int[s.peakLiveBlocks()];
        }

        long pair() {
            long first = play();
            return first ^ play();
        }

        long pass() {
            long x = 0;
            for (int k = bytes.length; k > 0; k--) {
                x ^= play();
            }
            return x;
        }

        private long play() {
            int i = at;
            at = i + 1 == bytes.length ? 0 : i + 1;
            if (bytes[i] == 0) {
                int id = live[slot[i]];
                long freed = allocator.offset(id);
                allocator.free(id);
                return freed;
            }
            int id = allocator.malloc(bytes[i]);
            if (id < 0) {
                throw new IllegalStateException("TLSF peer: no free range for op " + i + " (" + bytes[i] + " bytes)");
            }
            live[slot[i]] = id;
            return allocator.offset(id);
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
