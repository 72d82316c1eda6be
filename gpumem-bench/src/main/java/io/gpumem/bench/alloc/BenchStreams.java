package io.gpumem.bench.alloc;

import io.gpumem.engine.RequestStream;
import io.gpumem.trace.io.PytorchSnapshotReader;
import io.gpumem.trace.workload.TraceWorkload;
import io.gpumem.trace.workload.TrainingWorkload;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

/**
 * The request streams the allocator benchmarks replay, all as the engine's {@link RequestStream}: the same stream
 * a {@code compare} replays, made {@link RequestStream#balanced balanced} where a benchmark loops it (every block
 * it allocates is freed before it ends, so each pass leaves the allocator's live set as it found it).
 */
final class BenchStreams {
    /** The streams {@link #named} knows, in the order the peer benchmarks list them. */
    static final List<String> NAMES = List.of("lm2.7b", "llama-offload", "rmm-random", "rmm-64mib", "training-loop");

    private BenchStreams() {}

    /**
     * The named stream, balanced: {@code lm2.7b} and {@code llama-offload} are the requests of the recorded traces
     * {@code lm2.7b-train-step.pickle} and {@code llama-offload-10-streams.pickle} ({@link #recorded});
     * {@code rmm-random} is {@link #rmmRandom(int, long, long, long)} with RMM's benchmark defaults (10,000
     * allocations of up to 4,096 MiB, at most 16,000 MiB live: about 9 live blocks of about 1.7 GiB) and seed 1;
     * {@code rmm-64mib} the same with sizes up to 64 MiB (about 590 live blocks of about 27 MiB, peak 622: the
     * many-block random stream issue 20 measures {@code stitch} on); {@code training-loop} is the generated
     * training loop of {@link #trainingLoop} with {@code seqLens=256-1024}, here the whole run as one pass
     * (weights, optimizer states and steps 0–7, then frees of what is still live), where
     * {@link CachingAllocatorBench#trainingLoopPair} loops steps 1–7 only.
     */
    static RequestStream named(String name) {
        RequestStream s = switch (name) {
            case "lm2.7b" -> recorded("lm2.7b-train-step.pickle");
            case "llama-offload" -> recorded("llama-offload-10-streams.pickle");
            case "rmm-random" -> rmmRandom(10_000, 4096L << 20, 16_000L << 20, 1);
            case "rmm-64mib" -> rmmRandom(10_000, 64L << 20, 16_000L << 20, 1);
            case "training-loop" -> trainingLoop("256-1024").stream();
            default ->
                throw new IllegalArgumentException(
                        "unknown request stream " + name + " (" + String.join(", ", NAMES) + ")");
        };
        return s.balanced(0, s.length());
    }

    /**
     * The requests of device 0's whole trace in {@code fileName}, read from {@code -Dgpumem.traces.dir} (default
     * {@code ../shared/traces}); a missing file fails the benchmark's setup, naming the path.
     */
    static RequestStream recorded(String fileName) {
        Path file = Path.of(System.getProperty("gpumem.traces.dir", "../shared/traces"), fileName);
        if (!Files.isRegularFile(file)) {
            throw new IllegalStateException(
                    "benchmark trace not found: " + file + " (set -Dgpumem.traces.dir to the shared traces folder)");
        }
        return TraceWorkload.of(new PytorchSnapshotReader().read(file), 0, Integer.MAX_VALUE).stream();
    }

    /**
     * The generated training loop of the benchmarks: 4 layers, hidden 1,024, 16 heads, vocabulary 32,000, batch 4,
     * 8 steps, seed 7; {@code seqLens} is {@code MIN-MAX} (each step's length drawn from that range in multiples of
     * 128) or one fixed length.
     */
    static TrainingWorkload trainingLoop(String seqLens) {
        TrainingWorkload.Builder builder = TrainingWorkload.builder()
                .layers(4)
                .hidden(1024)
                .heads(16)
                .vocab(32_000)
                .batch(4)
                .steps(8)
                .seed(7);
        int dash = seqLens.indexOf('-');
        if (dash < 0) {
            builder.seqSchedule(Integer.parseInt(seqLens));
        } else {
            builder.seqLens(
                    Integer.parseInt(seqLens.substring(0, dash)), Integer.parseInt(seqLens.substring(dash + 1)), 128);
        }
        return builder.build();
    }

    /**
     * The request shape of RMM's {@code random_allocations} benchmark, generated here with a seeded
     * {@link SplittableRandom}: {@code 2 × allocations} steps; each is a malloc of a size uniform in
     * [1, {@code maxSize}] with probability 73% (always when nothing is live), unless that would reach
     * {@code maxUsage} live bytes or {@code allocations} mallocs were already made, and otherwise a free of a
     * uniformly chosen live allocation (swap-removed from the live list). What is live at the end is freed.
     */
    static RequestStream rmmRandom(int allocations, long maxSize, long maxUsage, long seed) {
        SplittableRandom rnd = new SplittableRandom(seed);
        RequestStream.Builder b = RequestStream.builder();
        List<long[]> live = new ArrayList<>(); // {slot, size}
        long usage = 0;
        int made = 0;
        for (int i = 0; i < 2 * allocations; i++) {
            long size = 1 + rnd.nextLong(maxSize);
            boolean alloc = true;
            if (!live.isEmpty()) {
                alloc = rnd.nextInt(100) < 73 && made < allocations && usage + size < maxUsage;
            }
            if (alloc) {
                live.add(new long[] {b.alloc(size, 0, i), size});
                usage += size;
                made++;
            } else {
                int index = rnd.nextInt(allocations) % live.size();
                long[] victim = live.get(index);
                live.set(index, live.get(live.size() - 1));
                live.remove(live.size() - 1);
                b.free((int) victim[0], i);
                usage -= victim[1];
            }
        }
        for (long[] l : live) {
            b.free((int) l[0], -1);
        }
        return b.build();
    }
}
