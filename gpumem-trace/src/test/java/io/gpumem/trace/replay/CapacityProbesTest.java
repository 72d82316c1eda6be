package io.gpumem.trace.replay;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.engine.ParallelRuns;
import io.gpumem.engine.RunOutcome;
import io.gpumem.policy.PolicySpec;
import io.gpumem.trace.TestTraces;
import io.gpumem.trace.io.TraceReaders;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.window.RecordedConfig;
import io.gpumem.trace.window.WindowRebuilder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.function.Supplier;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The capacity search with prefix reuse ({@link CapacityProbes}) must give exactly what full replays give: every
 * field of every row (but the measured time per pair), on every shared trace and on seeded random scripts, also
 * with its probes run ahead, side by side, by idle workers.
 */
class CapacityProbesTest {

    private static final List<String> CONFIGS = List.of(
            "",
            "max_split_size_mb:128",
            "max_split_size_mb:21",
            "roundup_power2_divisions:4",
            "garbage_collection_threshold:0.6",
            "garbage_collection_threshold:0.6,max_split_size_mb:64",
            "expandable_segments:True",
            "pinned_use_cuda_host_register:False,max_split_size_mb:64,roundup_power2_divisions:[256:8,>:2]");

    private static List<AllocatorConfig> configsFor(TraceSnapshot s) {
        List<AllocatorConfig> out = new ArrayList<>();
        out.add(RecordedConfig.of(s));
        for (String c : CONFIGS) {
            out.add(AllocatorConfig.parse(c));
        }
        return out;
    }

    /** Evaluates every configuration with reuse off and on; asserts equal rows; returns {replays, entries} off/on. */
    private static long[] assertSameRows(String what, TraceSnapshot s) {
        return assertSameRows(what, s, 4096);
    }

    private static long[] assertSameRows(String what, TraceSnapshot s, int checkpointGain) {
        return assertSameRows(what, s, checkpointGain, Integer.MAX_VALUE);
    }

    /** As above, the checkpoints one search adds bounded by {@code maxCheckpoints} (1: one kept, the latest). */
    private static long[] assertSameRows(String what, TraceSnapshot s, int checkpointGain, int maxCheckpoints) {
        return assertSameRows(what, s, checkpointGain, maxCheckpoints, 1);
    }

    /**
     * As above; with {@code threads} above 1, each evaluation with reuse runs as the one run of a
     * {@link ParallelRuns} batch of that many threads, whose idle workers run its searches' probes ahead
     * ({@code ProbeLookahead}).
     */
    private static long[] assertSameRows(
            String what, TraceSnapshot s, int checkpointGain, int maxCheckpoints, int threads) {
        AllocatorConfig recordedConfig = RecordedConfig.of(s);
        WhatIfReplay off = new WhatIfReplay(s, 0, new WindowRebuilder(recordedConfig).rebuild(s, 0));
        WhatIfReplay on = new WhatIfReplay(s, 0, new WindowRebuilder(recordedConfig).rebuild(s, 0));
        off.setPrefixReuse(false);
        on.setCheckpointGain(checkpointGain);
        on.setMaxCheckpoints(maxCheckpoints);
        long capacity = off.recordedCapacity(recordedConfig);
        List<AllocatorConfig> configs = configsFor(s);
        for (int i = 0; i < configs.size(); i++) {
            long[] x0 = off.replayCounts();
            long[] y0 = on.replayCounts();
            RunOutcome a = off.evaluate(configs.get(i), i == 0, capacity);
            AllocatorConfig config = configs.get(i);
            boolean recorded = i == 0;
            Supplier<RunOutcome> run = () -> on.evaluate(config, recorded, capacity);
            RunOutcome b = threads <= 1
                    ? run.get()
                    : ParallelRuns.<RunOutcome>values(List.of(run), threads, done -> {})
                            .getFirst();
            long[] x1 = off.replayCounts();
            long[] y1 = on.replayCounts();
            System.out.println("  " + what + " [" + configs.get(i).raw() + "]: replays " + (x1[0] - x0[0]) + " -> "
                    + (y1[0] - y0[0]) + ", entries replayed " + (x1[1] - x0[1]) + " -> " + (y1[1] - y0[1]));
            assertThat(b)
                    .as(what + " " + configs.get(i).raw())
                    .usingRecursiveComparison()
                    .ignoringFields("v.nsPerPair")
                    .isEqualTo(a);
        }
        long[] x = off.replayCounts();
        long[] y = on.replayCounts();
        System.out.println(what + ": replays " + x[0] + " -> " + y[0] + ", entries replayed " + x[1] + " -> " + y[1]
                + ", probes answered by a run already made " + y[2] + ", taken from idle workers " + y[3]);
        assertThat(x[2]).as("probes answered without replay when reuse is off").isZero();
        if (threads <= 1) {
            assertThat(y[3]).as("probes taken from idle workers without any").isZero();
        }
        return new long[] {x[0], x[1], y[0], y[1], y[2], y[3]};
    }

    @Test
    void everySharedTraceGetsTheSameRowsWithAndWithoutReuse() throws Exception {
        Path dir = TestTraces.dir();
        List<Path> traces;
        try (Stream<Path> files = Files.list(dir)) {
            traces = files.filter(p ->
                            p.toString().endsWith(".pickle") || p.toString().endsWith(".csv"))
                    .sorted()
                    .toList();
        }
        assertThat(traces).isNotEmpty();
        long answered = 0;
        long takenAhead = 0;
        for (Path t : traces) {
            TraceSnapshot s = TraceReaders.read(t);
            long[] counts = assertSameRows(t.getFileName().toString(), s);
            assertThat(counts[3]).as("entries replayed with reuse").isLessThanOrEqualTo(counts[1]);
            answered += counts[4];
            assertSameRows(t.getFileName() + " (a checkpoint at every probe)", s, 1);
            takenAhead += assertSameRows(t.getFileName() + " (probes run ahead by 3 idle workers)", s, 1, 64, 4)[5];
        }
        // the equal rows above cover the probes answered by a run already made, and those run ahead; there must be
        // some of each to cover
        assertThat(answered)
                .as("probes answered by a run already made, over the shared traces")
                .isPositive();
        assertThat(takenAhead)
                .as("probes taken from idle workers, over the shared traces")
                .isPositive();
    }

    @Test
    void randomScriptsGetTheSameRowsWithAndWithoutReuse(@TempDir Path dir) throws Exception {
        long seed = System.nanoTime();
        System.out.println("CapacityProbesTest seed " + seed);
        Random rnd = new Random(seed);
        for (int round = 0; round < 12; round++) {
            StringBuilder sb = new StringBuilder("device capacity=" + (256 + rnd.nextInt(1024)) + "MiB\n");
            List<String> live = new ArrayList<>();
            int ops = 200 + rnd.nextInt(800);
            for (int i = 0; i < ops; i++) {
                int r = rnd.nextInt(100);
                if (r < 50 || live.isEmpty()) {
                    long size = rnd.nextInt(4) == 0 ? 1 + rnd.nextInt(1 << 20) : (1L << 20) + rnd.nextInt(40 << 20);
                    String name = "t" + i;
                    sb.append("alloc ")
                            .append(name)
                            .append(' ')
                            .append(size)
                            .append(rnd.nextInt(5) == 0 ? " stream=1" : "")
                            .append('\n');
                    live.add(name);
                } else if (r < 97) {
                    sb.append("free ")
                            .append(live.remove(rnd.nextInt(live.size())))
                            .append('\n');
                } else {
                    sb.append("empty_cache\n");
                }
            }
            Path f = dir.resolve("r" + round + ".ops");
            Files.writeString(f, sb);
            // every other round leaves a checkpoint at every probe (short scripts never reach the default gain), and
            // every fourth keeps only the latest one, evicting the others as it goes
            String what = "seed " + seed + " round " + round;
            TraceSnapshot s = TraceReaders.read(f);
            if (round % 4 == 2) {
                assertSameRows(what + " (one checkpoint kept)", s, 1, 1);
            } else if (round % 4 == 3) {
                assertSameRows(what + " (probes run ahead by idle workers)", s, 1, 2, 2 + rnd.nextInt(4));
            } else {
                assertSameRows(what, s, round % 2 == 0 ? 1 : 4096);
            }
        }
    }

    /**
     * Only the exact allocator's searches run ahead: nothing promises that another policy's probes are independent
     * of one another and of the machine, so its probes stay one at a time, idle workers or not.
     */
    @Test
    void anotherPolicysSearchDoesNotRunAhead() throws Exception {
        TraceSnapshot s = TraceReaders.read(TestTraces.dir().resolve("lm2.7b-train-step.pickle"));
        WhatIfReplay w = new WhatIfReplay(s, 0, new WindowRebuilder(RecordedConfig.of(s)).rebuild(s, 0));
        long capacity = w.recordedCapacity(RecordedConfig.of(s));
        RunOutcome alone = w.evaluate(PolicySpec.parse("stitch"), capacity);
        long[] before = w.replayCounts();
        RunOutcome beside = ParallelRuns.<RunOutcome>values(
                        List.of(() -> w.evaluate(PolicySpec.parse("stitch"), capacity)), 4, done -> {})
                .getFirst();
        assertThat(beside)
                .usingRecursiveComparison()
                .ignoringFields("v.nsPerPair")
                .isEqualTo(alone);
        assertThat(w.replayCounts()[3] - before[3])
                .as("stitch probes taken from idle workers")
                .isZero();
        // and the exact allocator's search, on the same stream and workers, does take some (a few tries: on a loaded
        // machine a search may take every lent probe back before a worker starts one)
        for (int tries = 0; tries < 5 && w.replayCounts()[3] == before[3]; tries++) {
            ParallelRuns.<RunOutcome>values(
                    List.of(() -> w.evaluate(AllocatorConfig.parse("max_split_size_mb:128"), false, capacity)),
                    4,
                    done -> {});
        }
        assertThat(w.replayCounts()[3] - before[3])
                .as("exact probes taken from idle workers")
                .isPositive();
    }
}
