package io.gpumem.bench.alloc;

import io.gpumem.alloc.GpuAllocator;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.policy.PolicySpec;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;

/**
 * CPU cost of one malloc+free pair under each allocation policy ({@code pytorch}, the PyTorch-exact allocator,
 * against {@code stitch}), warm, single thread, on a 1 TiB simulated device: the steady state a long job sees,
 * not the JIT warm-up that dominates the {@code ns_per_pair} of a short {@code compare} replay. Run it with
 * {@code -prof gc} to see the garbage per pair.
 *
 * <p>{@link #stressPair}: the stress mix of {@link CachingAllocatorBench} ({@link StressWindow}: 64 live, 16,384
 * random sizes, 60% up to 1 MiB, 30% 1–12 MiB, 10% 12–100 MiB, two streams; nearly every malloc splits a free
 * block). {@link #recordedTracePair}: the request stream of {@code lm2.7b-train-step.pickle} repeated as a
 * balanced cycle ({@link StreamLoop}: live blocks at its end freed in allocation order), two ops per call, so
 * ops/s over whole cycles is pairs/s.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
public class PolicyPairBench {
    @Param({"pytorch", "stitch"})
    public String policy;

    private GpuAllocator stress;
    private StressWindow window;
    private StreamLoop traced;

    @Setup(Level.Trial)
    public void setUp() {
        SimulatedDevice device = SimulatedDevice.builder().capacity(1L << 40).build();
        window = new StressWindow(device.createStream());
        stress = PolicySpec.parse(policy).create(device);
        window.warm(stress, StressWindow.SIZES * 4);
        SimulatedDevice traceDevice =
                SimulatedDevice.builder().capacity(1L << 40).build();
        traced = new StreamLoop(
                PolicySpec.parse(policy).create(traceDevice),
                traceDevice,
                BenchStreams.recorded("lm2.7b-train-step.pickle"),
                0);
        traced.warm(2);
        // Checked once, at set-up: the checker allocates, and JMH's gc profiler would count it in an iteration.
        stress.internals().checkInvariants();
        traced.allocator.internals().checkInvariants();
    }

    /** One malloc+free pair of the stress mix. */
    @Benchmark
    public long stressPair() {
        return window.pair(stress);
    }

    /** Two ops of the recorded lm2.7b cycle (one pair on average). */
    @Benchmark
    public long recordedTracePair() {
        return traced.pair();
    }
}
