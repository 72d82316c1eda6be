package io.gpumem.cli.sim;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.script.OpsScript;
import io.gpumem.script.ScriptOp;
import io.gpumem.stats.MemoryStats;
import io.gpumem.stats.StatKind;
import io.gpumem.stats.StatType;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The runner's own bookkeeping, against a recording target: lazy creation with the early config, names to
 * pointers, OOM handling and output. End-to-end behaviour with the real allocator is in SimCommandTest.
 */
class SimRunnerTest {

    /** Records every call; runs out of memory for sizes above {@code limit}. */
    static class RecordingTarget implements SimTarget {
        final List<String> calls = new ArrayList<>();
        final long limit;
        long next = 0x1000;

        RecordingTarget(long limit) {
            this.limit = limit;
        }

        @Override
        public long malloc(long size, long stream) {
            if (size > limit) {
                calls.add("oom " + size);
                throw new OutOfMemory("CUDA out of memory. Tried to allocate " + size, null);
            }
            calls.add("malloc " + size + " s" + stream + " -> " + next);
            return next++;
        }

        @Override
        public void free(long ptr) {
            calls.add("free " + ptr);
        }

        @Override
        public void recordStream(long ptr, long stream) {
            calls.add("record " + ptr + " s" + stream);
        }

        @Override
        public void apply(ScriptOp op) {
            calls.add(
                    switch (op) {
                        case ScriptOp.Config c -> "settings " + c.conf();
                        case ScriptOp.EmptyCache _ -> "empty";
                        case ScriptOp.SetFraction f -> "fraction " + f.fraction();
                        case ScriptOp.ResetPeak _ -> "reset_peak";
                        case ScriptOp.CompleteEvents _ -> "complete";
                        default -> throw new IllegalArgumentException("not a setting: " + op);
                    });
        }

        @Override
        public MemoryStats memoryStats() {
            return MemoryStats.builder()
                    .numOoms(2)
                    .stat(StatKind.ALLOCATED_BYTES, StatType.ALL, new MemoryStats.Stat(10, 10, 10, 0))
                    .build();
        }

        @Override
        public int deviceIndex() {
            return 0;
        }
    }

    private final StringWriter out = new StringWriter();
    private final StringWriter err = new StringWriter();
    private final List<Object[]> created = new ArrayList<>();

    private int run(String script, RecordingTarget target, boolean failOnOom) {
        SimRunner runner = new SimRunner(new PrintWriter(out), new PrintWriter(err), failOnOom, (device, config) -> {
            created.add(new Object[] {device, config});
            return target;
        });
        return runner.run(OpsScript.parse(script));
    }

    @Test
    void earlyConfigBuildsTheTargetLaterConfigIsASettingsCall() {
        RecordingTarget t = new RecordingTarget(Long.MAX_VALUE);
        int rc = run("""
                config max_split_size_mb:128
                device capacity=1GiB
                config expandable_segments:True
                alloc a 1000 stream=3
                config garbage_collection_threshold:0.5
                record_stream a 5
                free a
                complete_events
                empty_cache
                set_fraction 0.25
                reset_peak
                """, t, false);
        assertThat(rc).isZero();
        assertThat(created).hasSize(1);
        assertThat(created.get(0)[0]).isEqualTo(new ScriptOp.DeviceSettings(2, 1L << 30, 0, 0));
        AllocatorConfig initial = (AllocatorConfig) created.get(0)[1];
        // The second parse reset max_split_size, exactly as two PyTorch parses would.
        assertThat(initial.expandableSegments()).isTrue();
        assertThat(initial.maxSplitSize()).isEqualTo(AllocatorConfig.UNLIMITED);
        assertThat(t.calls)
                .containsExactly(
                        "malloc 1000 s3 -> 4096",
                        "settings garbage_collection_threshold:0.5",
                        "record 4096 s5",
                        "free 4096",
                        "complete",
                        "empty",
                        "fraction 0.25",
                        "reset_peak");
        assertThat(out.toString()).isEmpty();
        assertThat(err.toString()).isEmpty();
    }

    @Test
    void noAllocatorOpMeansNoTarget() {
        assertThat(run("device capacity=1GiB\nconfig expandable_segments:True\n", new RecordingTarget(0), false))
                .isZero();
        assertThat(created).isEmpty();
    }

    @Test
    void oomIsReportedAndTheScriptGoesOnSkippingTheFailedName() {
        RecordingTarget t = new RecordingTarget(100);
        int rc = run("alloc a 50\nalloc big 1000\nrecord_stream big 2\nfree big\nalloc big 60\nfree a\n", t, false);
        assertThat(rc).isZero();
        assertThat(t.calls).containsExactly("malloc 50 s0 -> 4096", "oom 1000", "malloc 60 s0 -> 4097", "free 4096");
        assertThat(err.toString()).isEqualTo("""
                gpumem sim: line 2: alloc big: CUDA out of memory. Tried to allocate 1000
                gpumem sim: line 3: record_stream big skipped: its allocation on line 2 ran out of memory
                gpumem sim: line 4: free big skipped: its allocation on line 2 ran out of memory
                """);
    }

    @Test
    void failOnOomStopsWithExitOne() {
        RecordingTarget t = new RecordingTarget(100);
        assertThat(run("alloc a 1000\nalloc b 1\nstats\n", t, true)).isEqualTo(1);
        assertThat(t.calls).containsExactly("oom 1000");
        assertThat(out.toString()).isEmpty();
        assertThat(err.toString()).contains("line 1: alloc a: CUDA out of memory");
    }

    @Test
    void statsPrintsSortedKeyValueLines() {
        assertThat(run("stats\n", new RecordingTarget(0), false)).isZero();
        String[] lines = out.toString().split("\n", -1);
        assertThat(lines).contains("allocated_bytes.all.current 10", "num_ooms 2");
        assertThat(lines[lines.length - 1]).as("ends with a newline").isEmpty();
        List<String> keys = Arrays.stream(lines)
                .filter(l -> !l.isEmpty())
                .map(l -> l.split(" ", -1)[0])
                .toList();
        assertThat(keys)
                .as("every key of memory_stats(), sorted")
                .isSorted()
                .hasSize(new RecordingTarget(0).memoryStats().toPyTorchMap().size());
    }

    @Test
    void aTargetFailureStopsWithExitOneNamingTheLineAndPrintsNothingForIt() {
        RecordingTarget t = new RecordingTarget(Long.MAX_VALUE) {
            @Override
            public MemoryStats memoryStats() {
                throw new IllegalStateException("broken stats");
            }
        };
        assertThat(run("alloc a 1\nsummary\nfree a\n", t, false)).isEqualTo(1);
        assertThat(out.toString()).isEmpty();
        assertThat(err.toString()).isEqualTo("gpumem sim: line 2: summary failed: broken stats\n");
        assertThat(t.calls).containsExactly("malloc 1 s0 -> 4096");
    }
}
