package io.gpumem.bench.alloc;

import io.gpumem.trace.io.PytorchSnapshotReader;
import io.gpumem.trace.workload.MemoryOp;
import io.gpumem.trace.workload.TraceWorkload;
import io.gpumem.trace.workload.TrainingWorkload;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;

/**
 * A malloc/free request stream compiled into flat arrays, so that every allocator under test replays exactly
 * the same requests with no per-request object or map lookup of its own.
 *
 * <p>Op {@code i} is a malloc of {@code sizes[i]} bytes on stream index {@code streams[i]} into slot
 * {@code slots[i]} when {@code sizes[i] > 0}, else a free of what slot {@code slots[i]} holds. Slots are reused
 * once freed, so {@link #slotCount} is the stream's peak live count. Streams are numbered densely from 0 (the
 * default stream) in order of first use. Invariant: the stream is balanced (every malloc is freed later in it:
 * allocations still live at the end of the source get frees appended, in allocation order), so it can be
 * replayed in a loop, and {@code length()} is even: over whole passes, two ops are one malloc+free pair.
 */
final class RequestStream {
    final String name;
    final String description;
    final long[] sizes;
    final int[] slots;
    final int[] streams;
    final int slotCount;
    final int streamCount;
    final int mallocs;

    private RequestStream(
            String name, String description, long[] sizes, int[] slots, int[] streams, int slotCount, int streamCount) {
        this.name = name;
        this.description = description;
        this.sizes = sizes;
        this.slots = slots;
        this.streams = streams;
        this.slotCount = slotCount;
        this.streamCount = streamCount;
        int m = 0;
        for (long s : sizes) {
            if (s > 0) {
                m++;
            }
        }
        this.mallocs = m;
        if (m * 2 != sizes.length) {
            throw new IllegalStateException(
                    name + ": stream of " + sizes.length + " ops with " + m + " mallocs is not balanced");
        }
    }

    int length() {
        return sizes.length;
    }

    /**
     * The named stream: {@code lm2.7b} and {@code llama-offload} are the requests of the recorded traces
     * {@code lm2.7b-train-step.pickle} and {@code llama-offload-10-streams.pickle} (from
     * {@code -Dgpumem.traces.dir}, default {@code ../shared/traces}); {@code rmm-random} is
     * {@link #rmmRandom(int, long, long, long)} with RMM's benchmark defaults (10,000 allocations of up to
     * 4,096 MiB, at most 16,000 MiB live) and seed 1; {@code training-loop} is the generated training loop of
     * {@link CachingAllocatorBench#trainingLoopPair} ({@code seqLens=256-1024}: 4 layers, hidden 1,024, 16 heads,
     * vocabulary 32,000, batch 4, 8 steps, seed 7), here the whole run as one pass (weights, optimizer states and
     * steps 0–7, then frees of what is still live), where that benchmark replays steps 1–7 only.
     */
    static RequestStream named(String name) {
        return switch (name) {
            case "lm2.7b" -> recorded(name, "lm2.7b-train-step.pickle");
            case "llama-offload" -> recorded(name, "llama-offload-10-streams.pickle");
            case "rmm-random" -> rmmRandom(10_000, 4096L << 20, 16_000L << 20, 1);
            case "training-loop" -> trainingLoop(name);
            default ->
                throw new IllegalArgumentException(
                        "unknown request stream " + name + " (lm2.7b, llama-offload, rmm-random, training-loop)");
        };
    }

    private static RequestStream recorded(String name, String fileName) {
        Path dir = Path.of(System.getProperty("gpumem.traces.dir", "../shared/traces"));
        Path file = dir.resolve(fileName);
        if (!Files.isRegularFile(file)) {
            throw new IllegalStateException(
                    "benchmark trace not found: " + file + " (set -Dgpumem.traces.dir to the shared traces folder)");
        }
        TraceWorkload workload = TraceWorkload.of(new PytorchSnapshotReader().read(file), 0, Integer.MAX_VALUE);
        return of(name, fileName + ": " + workload.describe(), workload.ops());
    }

    private static RequestStream trainingLoop(String name) {
        TrainingWorkload workload = TrainingWorkload.builder()
                .layers(4)
                .hidden(1024)
                .heads(16)
                .vocab(32_000)
                .batch(4)
                .steps(8)
                .seed(7)
                .seqLens(256, 1024, 128)
                .build();
        return of(name, "generated training loop: " + workload.describe(), workload.ops());
    }

    /** Compiles a list of ops (step markers are dropped). */
    static RequestStream of(String name, String description, List<MemoryOp> ops) {
        Builder b = new Builder(ops.size());
        HashMap<Integer, Integer> slotOf = new HashMap<>();
        for (MemoryOp op : ops) {
            if (op instanceof MemoryOp.Alloc a) {
                if (a.bytes() <= 0) {
                    throw new IllegalStateException(name + ": non-positive request " + a);
                }
                slotOf.put(a.id(), b.malloc(a.bytes(), a.stream()));
            } else if (op instanceof MemoryOp.Free f) {
                Integer slot = slotOf.remove(f.id());
                if (slot == null) {
                    throw new IllegalStateException(name + ": frees id " + f.id() + " it did not allocate");
                }
                b.free(slot);
            }
        }
        slotOf.entrySet().stream().sorted(Map.Entry.comparingByKey()).forEach(e -> b.free(e.getValue()));
        return b.build(name, description);
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
        Builder b = new Builder(4 * allocations);
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
                live.add(new long[] {b.malloc(size, 0), size});
                usage += size;
                made++;
            } else {
                int index = rnd.nextInt(allocations) % live.size();
                long[] victim = live.get(index);
                live.set(index, live.get(live.size() - 1));
                live.remove(live.size() - 1);
                b.free((int) victim[0]);
                usage -= victim[1];
            }
        }
        for (long[] l : live) {
            b.free((int) l[0]);
        }
        return b.build(
                "rmm-random",
                "RMM random_allocations shape: " + made + " allocations of 1 B.." + (maxSize >> 20) + " MiB, at most "
                        + (maxUsage >> 20) + " MiB live, seed " + seed);
    }

    /** Accumulates ops, handing out slots (most recently freed first) and dense stream indices. */
    private static final class Builder {
        private long[] sizes;
        private int[] slots;
        private int[] streams;
        private int n;
        private int slotCount;
        private final ArrayDeque<Integer> freeSlots = new ArrayDeque<>();
        private final HashMap<Long, Integer> streamIndex = new HashMap<>();

        Builder(int capacity) {
            sizes = new long[Math.max(16, capacity)];
            slots = new int[sizes.length];
            streams = new int[sizes.length];
            streamIndex.put(0L, 0);
        }

        int malloc(long size, long stream) {
            Integer slot = freeSlots.pollFirst();
            int s = slot == null ? slotCount++ : slot;
            add(size, s, streamIndex.computeIfAbsent(stream, k -> streamIndex.size()));
            return s;
        }

        void free(int slot) {
            add(0, slot, 0);
            freeSlots.addFirst(slot);
        }

        private void add(long size, int slot, int stream) {
            if (n == sizes.length) {
                sizes = Arrays.copyOf(sizes, 2 * n);
                slots = Arrays.copyOf(slots, 2 * n);
                streams = Arrays.copyOf(streams, 2 * n);
            }
            sizes[n] = size;
            slots[n] = slot;
            streams[n] = stream;
            n++;
        }

        RequestStream build(String name, String description) {
            return new RequestStream(
                    name,
                    description,
                    Arrays.copyOf(sizes, n),
                    Arrays.copyOf(slots, n),
                    Arrays.copyOf(streams, n),
                    slotCount,
                    streamIndex.size());
        }
    }
}
