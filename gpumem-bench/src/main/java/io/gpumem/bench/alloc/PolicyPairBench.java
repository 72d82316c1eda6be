package io.gpumem.bench.alloc;

import io.gpumem.alloc.GpuAllocator;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.policy.PolicySpec;
import io.gpumem.trace.io.PytorchSnapshotReader;
import io.gpumem.trace.workload.MemoryOp;
import io.gpumem.trace.workload.TraceWorkload;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
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
 * <p>{@link #stressPair}: the stress mix of {@link CachingAllocatorBench} (64 live, 16,384 random sizes, 60% up
 * to 1 MiB, 30% 1–12 MiB, 10% 12–100 MiB, two streams; nearly every malloc splits a free block).
 * {@link #recordedTracePair}: the request stream of {@code lm2.7b-train-step.pickle} repeated as a balanced cycle
 * (live blocks at its end freed in allocation order), two ops per call, so ops/s over whole cycles is pairs/s.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
public class PolicyPairBench {
    private static final int WINDOW = 64;
    private static final int SIZES = 1 << 14;
    private static final long MiB = 1L << 20;

    @Param({"pytorch", "stitch"})
    public String policy;

    private GpuAllocator stress;
    private final long[] sizes = new long[SIZES];
    private final long[] streams = new long[SIZES];
    private final long[] live = new long[WINDOW];
    private int next;
    private int slot;

    private GpuAllocator traced;
    private long[] opSize;
    private int[] opSlot;
    private long[] opStream;
    private long[] traceLive;
    private int op;

    @Setup(Level.Trial)
    public void setUp() {
        SimulatedDevice device = SimulatedDevice.builder().capacity(1L << 40).build();
        long s1 = device.createStream();
        SplittableRandom rnd = new SplittableRandom(42);
        for (int i = 0; i < SIZES; i++) {
            int kind = rnd.nextInt(100);
            sizes[i] = kind < 60
                    ? 1 + rnd.nextLong(MiB)
                    : kind < 90 ? MiB + rnd.nextLong(11 * MiB) : 12 * MiB + rnd.nextLong(88 * MiB);
            streams[i] = rnd.nextInt(4) == 0 ? s1 : 0;
        }
        stress = PolicySpec.parse(policy).create(device);
        for (int i = 0; i < SIZES * 4; i++) {
            stressPair();
        }
        setUpTrace();
        // Checked once, at set-up: the checker allocates, and JMH's gc profiler would count it in an iteration.
        stress.internals().checkInvariants();
        traced.internals().checkInvariants();
    }

    private void setUpTrace() {
        Path file = Path.of(System.getProperty("gpumem.traces.dir", "../shared/traces"), "lm2.7b-train-step.pickle");
        if (!Files.isRegularFile(file)) {
            throw new IllegalStateException(
                    "benchmark trace not found: " + file + " (set -Dgpumem.traces.dir to the shared traces folder)");
        }
        List<MemoryOp> ops = TraceWorkload.of(new PytorchSnapshotReader().read(file), 0, Integer.MAX_VALUE)
                .ops();
        SimulatedDevice device = SimulatedDevice.builder().capacity(1L << 40).build();
        traced = PolicySpec.parse(policy).create(device);
        HashMap<Long, Long> deviceStreams = new HashMap<>();
        HashMap<Integer, Integer> slotOf = new HashMap<>();
        ArrayDeque<Integer> freeSlots = new ArrayDeque<>();
        int slots = 0;
        int n = 0;
        long[] sz = new long[2 * ops.size()];
        int[] sl = new int[sz.length];
        long[] st = new long[sz.length];
        for (MemoryOp o : ops) {
            if (o instanceof MemoryOp.Alloc a && a.bytes() > 0) {
                Integer s = freeSlots.pollFirst();
                if (s == null) {
                    s = slots++;
                }
                slotOf.put(a.id(), s);
                sz[n] = a.bytes();
                sl[n] = s;
                st[n++] = a.stream() == 0 ? 0 : deviceStreams.computeIfAbsent(a.stream(), x -> device.createStream());
            } else if (o instanceof MemoryOp.Free f && slotOf.containsKey(f.id())) {
                int s = slotOf.remove(f.id());
                sl[n++] = s;
                freeSlots.addFirst(s);
            }
        }
        for (int s : slotOf.entrySet().stream()
                .sorted(Map.Entry.comparingByKey())
                .mapToInt(Map.Entry::getValue)
                .toArray()) {
            sl[n++] = s;
        }
        opSize = Arrays.copyOf(sz, n);
        opSlot = Arrays.copyOf(sl, n);
        opStream = Arrays.copyOf(st, n);
        traceLive = new long[slots];
        for (int i = 0; i < 2 * n; i++) {
            traceOp();
        }
    }

    /** One malloc+free pair of the stress mix. */
    @Benchmark
    public long stressPair() {
        int s = slot;
        long old = live[s];
        if (old != 0) {
            stress.free(old);
        }
        int i = next;
        long p = stress.malloc(sizes[i], streams[i]);
        live[s] = p;
        next = (i + 1) & (SIZES - 1);
        slot = (s + 1) & (WINDOW - 1);
        return p;
    }

    /** Two ops of the recorded lm2.7b cycle (one pair on average). */
    @Benchmark
    public long recordedTracePair() {
        traceOp();
        return traceOp();
    }

    private long traceOp() {
        int k = op;
        op = k + 1 == opSize.length ? 0 : k + 1;
        int s = opSlot[k];
        if (opSize[k] > 0) {
            traceLive[s] = traced.malloc(opSize[k], opStream[k]);
            return traceLive[s];
        }
        traced.free(traceLive[s]);
        traceLive[s] = 0;
        return 0;
    }
}
