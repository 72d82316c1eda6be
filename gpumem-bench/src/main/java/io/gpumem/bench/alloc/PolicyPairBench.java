package io.gpumem.bench.alloc;

import io.gpumem.alloc.GpuAllocator;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.engine.RequestStream;
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
import org.openjdk.jmh.infra.BenchmarkParams;

/**
 * CPU cost of one malloc+free pair under each allocation policy ({@code pytorch}, the PyTorch-exact allocator,
 * against {@code stitch}), warm, single thread, on a 1 TiB simulated device: the steady state a long job sees,
 * not the JIT warm-up that dominates the {@code ns_per_pair} of a short {@code compare} replay. Run it with
 * {@code -prof gc} to see the garbage per pair.
 *
 * <p>{@link #stressPair}: the stress mix of {@link CachingAllocatorBench} ({@link StressWindow}: 64 live, 16,384
 * random sizes, 60% up to 1 MiB, 30% 1–12 MiB, 10% 12–100 MiB, two streams; nearly every malloc splits a free
 * block). Then the three streams issue 20 holds {@code stitch} to within 1.5× of the exact allocator on, each
 * repeated as a balanced cycle ({@link StreamLoop}: live blocks at its end freed in allocation order), two ops per
 * call, so ops/s over whole cycles is pairs/s: {@link #recordedTracePair}, the request stream of
 * {@code lm2.7b-train-step.pickle} (a training step); {@link #offloadPair}, {@code llama-offload-10-streams.pickle}
 * (inference on 10 streams with offload); {@link #randomPair}, RMM's random shape with sizes up to 64 MiB
 * ({@code rmm-64mib} of {@link BenchStreams}: about 590 live blocks of about 27 MiB, 14 pages of 2 MiB each, at
 * a random place each time, so stitch pins and unpins many-page mappings on every pair); and
 * {@link #randomLargePair}, the same shape with RMM's default sizes up to 4 GiB ({@code rmm-random}: about 9 live
 * blocks of about 1.7 GiB, some 850 pages each, over an arena whose pages are mostly one-page mappings), where a
 * policy that pins or lists page by page pays hundreds of steps a pair.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
public class PolicyPairBench {
    @Param({"pytorch", "stitch", "rmm-pool"})
    public String policy;

    private GpuAllocator stress;
    private StressWindow window;
    private StreamLoop traced;
    private StreamLoop offload;
    private StreamLoop random;
    private StreamLoop randomLarge;

    /** Sets up the workload of the benchmark JMH is about to run, and only that one. */
    @Setup(Level.Trial)
    public void setUp(BenchmarkParams params) {
        String benchmark = params.getBenchmark();
        setUp(benchmark.substring(benchmark.lastIndexOf('.') + 1));
    }

    /**
     * Builds and warms the state of one workload, named by its benchmark method ({@link AllocatorBuildsCpuTime}
     * calls this directly). One at a time because a stitch arena keeps per-page arrays sized to twice the 1 TiB
     * device (28 MB each), and the 10-stream offload run alone opens up to 20 arenas.
     */
    public void setUp(String workload) {
        GpuAllocator checked = switch (workload) {
            case "stressPair" -> {
                SimulatedDevice device =
                        SimulatedDevice.builder().capacity(1L << 40).build();
                window = new StressWindow(device.createStream());
                stress = PolicySpec.parse(policy).create(device);
                window.warm(stress, StressWindow.SIZES * 4);
                yield stress;
            }
            case "recordedTracePair" -> {
                traced = loop(policy, BenchStreams.recorded("lm2.7b-train-step.pickle"));
                yield traced.allocator;
            }
            case "offloadPair" -> {
                offload = loop(policy, BenchStreams.named("llama-offload"));
                yield offload.allocator;
            }
            case "randomPair" -> {
                random = loop(policy, BenchStreams.named("rmm-64mib"));
                yield random.allocator;
            }
            case "randomLargePair" -> {
                randomLarge = loop(policy, BenchStreams.named("rmm-random"));
                yield randomLarge.allocator;
            }
            default -> throw new IllegalArgumentException("PolicyPairBench has no workload " + workload);
        };
        // Checked once, at set-up: the checker allocates, and JMH's gc profiler would count it in an iteration.
        checked.internals().checkInvariants();
    }

    /** {@code stream} looped on the policy over a fresh 1 TiB simulated device, warmed by two passes. */
    static StreamLoop loop(String policy, RequestStream stream) {
        SimulatedDevice device = SimulatedDevice.builder().capacity(1L << 40).build();
        StreamLoop loop = new StreamLoop(PolicySpec.parse(policy).create(device), device, stream, 0);
        loop.warm(2);
        return loop;
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

    /** Two ops of the recorded 10-stream llama offload cycle. */
    @Benchmark
    public long offloadPair() {
        return offload.pair();
    }

    /** Two ops of the RMM-style random cycle with sizes up to 64 MiB. */
    @Benchmark
    public long randomPair() {
        return random.pair();
    }

    /** Two ops of the RMM-style random cycle with RMM's default sizes, up to 4 GiB. */
    @Benchmark
    public long randomLargePair() {
        return randomLarge.pair();
    }
}
