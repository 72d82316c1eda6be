package io.gpumem.cli.analysis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpumem.cli.CliRun;
import io.gpumem.history.TraceAction;
import io.gpumem.trace.io.TraceReaders;
import io.gpumem.trace.io.TraceSnapshot;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class AnalysisCommandsTest {
    @TempDir
    Path tmp;

    static CliRun run(String... args) {
        return CliRun.run(args);
    }

    static final String[] SMALL = {
        "--layers",
        "2",
        "--hidden",
        "256",
        "--heads",
        "2",
        "--vocab",
        "1000",
        "--batch",
        "2",
        "--seq-min",
        "128",
        "--seq-max",
        "512",
        "--steps",
        "3"
    };

    static String[] with(String[] base, String... more) {
        String[] all = new String[base.length + more.length + 1];
        all[0] = "demo";
        System.arraycopy(base, 0, all, 1, base.length);
        System.arraycopy(more, 0, all, 1 + base.length, more.length);
        return all;
    }

    @Test
    void demoWithItsDefaultsShowsFragmentationFixedByExpandableSegments() {
        Path snapshot = tmp.resolve("demo.pickle");
        CliRun r = run("demo", "--snapshot", snapshot.toString());
        assertThat(r.exit()).as(r.err()).isZero();
        assertThat(r.out())
                .contains("comparison (10 steps on 24.00 GiB)")
                .contains("diagnosis: FRAGMENTATION")
                .contains("1. PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")
                .contains("snapshot of the default run written to " + snapshot.toAbsolutePath());
        TraceSnapshot read = TraceReaders.read(snapshot);
        assertThat(read.traceOf(0)).anyMatch(e -> e.action() == TraceAction.OOM);
        assertThat(read.segments()).isNotEmpty();

        // the snapshot it wrote is what analyze reads: same verdict at the recorded oom entry
        CliRun a = run("analyze", snapshot.toString(), "--capacity", "24GiB", "--no-compare");
        assertThat(a.exit()).as(a.err()).isZero();
        assertThat(a.out()).contains("diagnosis: FRAGMENTATION").contains("oom entry #");

        // and its compare runs ask the failed request again: the recorded configuration fails it as the demo's run
        // did, and expandable segments serve it, as the demo found
        CliRun whatIf = run("analyze", snapshot.toString(), "--capacity", "24GiB");
        assertThat(whatIf.exit()).as(whatIf.err()).isZero();
        assertThat(whatIf.out())
                .containsPattern("\\(defaults\\) .* 1 +[0-9.]+ GiB\\n")
                .containsPattern("1\\. PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\\n.*OOMs 1 -> 0\\n");
    }

    @Test
    void demoOfAWorkloadPastTheLargestModelledDeviceSaysItsMinimumCapacityWasNotSearched() {
        // 593 TiB live at once: searching its minimum capacity played it on devices of hundreds of TiB, whose
        // expandable segments mapped more pages than the heap held ("out of memory (Java heap space)", minutes later)
        CliRun r = run(
                "demo",
                "--layers",
                "4",
                "--hidden",
                "1048576",
                "--steps",
                "2",
                "--capacity",
                "1GiB",
                "--snapshot",
                tmp.resolve("huge.pickle").toString());
        assertThat(r.exit()).as(r.err()).isZero();
        assertThat(r.out())
                .contains("peak live tensors 606958.63 GiB")
                .contains("note: minimum capacity not searched: the workload has 606958.63 GiB live at once, more than"
                        + " the largest device the runs model (32768.00 GiB)")
                .doesNotContain("min capacity");
    }

    @Test
    void demoWithSpillTurnsTheOomOfStep8IntoSpills() {
        CliRun r = run(
                "demo",
                "--spill",
                "--no-min-capacity",
                "--snapshot",
                tmp.resolve("s.pickle").toString());
        assertThat(r.exit()).as(r.err()).isZero();
        assertThat(r.out())
                .contains("at the OOM in step 8 of 10")
                .contains("with --spill")
                .containsPattern("step 8: [1-9][0-9]* buffers spilled instead of an OOM")
                .contains("all 10 steps completed");
    }

    @Test
    void demoIsDeterministicAndTakesTheGeneratorParameters() {
        CliRun a = run(with(
                SMALL,
                "--capacity",
                "4GiB",
                "--snapshot",
                tmp.resolve("a.pickle").toString()));
        CliRun b = run(with(
                SMALL,
                "--capacity",
                "4GiB",
                "--snapshot",
                tmp.resolve("a.pickle").toString()));
        assertThat(a.exit()).as(a.err()).isZero();
        assertThat(a.out()).isEqualTo(b.out()).contains("2 layers, hidden 256").contains("3 steps");
        assertThat(a.out()).contains("diagnosis: no out-of-memory to explain");
    }

    @Test
    void demoRejectsBadInputWithoutWritingAnything() throws IOException {
        CliRun bad = run(with(SMALL, "--capacity", "lots"));
        assertThat(bad.exit()).isEqualTo(2);
        assertThat(bad.err()).contains("'lots' is not a size");

        CliRun heads = run("demo", "--hidden", "100", "--heads", "3");
        assertThat(heads.exit()).isEqualTo(2);
        assertThat(heads.err()).contains("hidden 100 is not a multiple of heads 3");

        CliRun outside = run(with(SMALL, "--capacity", "4GiB", "--held-outside", "4GiB"));
        assertThat(outside.exit()).isEqualTo(2);
        assertThat(outside.err()).contains("--held-outside 4.00 GiB must be below --capacity 4.00 GiB");

        CliRun conf = run(with(SMALL, "--config", "expandable_segments:Maybe"));
        assertThat(conf.exit()).isEqualTo(2);
        assertThat(conf.err()).contains("bad --config: ", "expandable_segments", "'Maybe'"); // as every command says it
        assertThat(conf.out()).doesNotContain("comparison");

        Path missingDir = tmp.resolve("no/such/dir/x.pickle");
        CliRun unwritable = run(with(SMALL, "--capacity", "4GiB", "--snapshot", missingDir.toString()));
        assertThat(unwritable.exit()).isEqualTo(2);
        assertThat(unwritable.err())
                .contains("--snapshot " + missingDir + ": the directory " + missingDir.getParent() + " does not exist");
        assertThat(unwritable.out()).isEmpty(); // checked before the runs
        try (var files = Files.list(tmp)) {
            assertThat(files).isEmpty();
        }
    }

    @Test
    void demoRefusesACapacityOverTheLargestDeviceBeforeAnyOutputAndRunsAtIt() {
        for (String capacity : new String[] {"3000TiB", "1000TiB", "64TiB"}) {
            long gib = 1024 * Long.parseLong(capacity.replace("TiB", ""));
            // these failed mid-output: a negative stitch arena (exit 3), an expandable segment that could not be
            // sized for 4 x capacity, a heap exhausted by arrays sized to the device
            CliRun r = run(with(
                    SMALL,
                    "--no-min-capacity",
                    "--capacity",
                    capacity,
                    "--snapshot",
                    tmp.resolve("big.pickle").toString()));
            assertThat(r.exit()).as(capacity + ": " + r.err()).isEqualTo(2);
            assertThat(r.err())
                    .contains("--capacity " + gib + ".00 GiB is over the largest device the runs model, 32768.00 GiB");
            assertThat(r.out()).isEmpty();
        }
        assertThat(tmp.resolve("big.pickle")).doesNotExist();
        // the largest is modelled, the minimum-capacity search included (its roomy run is 4 x 32 TiB)
        CliRun top = run(with(
                SMALL,
                "--capacity",
                "32TiB",
                "--snapshot",
                tmp.resolve("top.pickle").toString()));
        assertThat(top.exit()).as(top.err()).isZero();
        assertThat(top.out()).contains("comparison (3 steps on 32768.00 GiB)");
    }

    @Test
    void demoNamesAnOomWhileBuildingTheModelSoWithAndWithoutSpilling() {
        String[] model = {"--layers", "2", "--hidden", "1024", "--heads", "8", "--steps", "2", "--no-min-capacity"};
        // 64 MiB: the 62.5 MiB embedding fits, the next weight does not; spilling the weights gets the model built
        // (its spills counted as those of the setup) and step 1 fails
        CliRun setupSpills = run(with(
                model,
                "--capacity",
                "64MiB",
                "--spill",
                "--snapshot",
                tmp.resolve("a.pickle").toString()));
        assertThat(setupSpills.exit()).as(setupSpills.err()).isZero();
        assertThat(setupSpills.out())
                .contains("at the OOM while building the model (before step 1) (allocating layers.0.ln1.weight)")
                .contains("  while building the model (before step 1): 27 buffers spilled instead of an OOM\n"
                        + "  OOM in step 1 even with spilling")
                .doesNotContain("step 0");
        // 32 MiB: not even the embedding fits, spilling or not
        CliRun none = run(with(
                model,
                "--capacity",
                "32MiB",
                "--spill",
                "--snapshot",
                tmp.resolve("b.pickle").toString()));
        assertThat(none.exit()).as(none.err()).isZero();
        assertThat(none.out())
                .contains("at the OOM while building the model (before step 1) (allocating embed.weight)")
                .contains("  OOM while building the model (before step 1) even with spilling: nothing spillable left")
                .doesNotContain("step 0")
                .doesNotContain("in step 1");
    }

    @Test
    void analyzeRejectsMissingAndMalformedFilesAndBadOptions() throws IOException {
        CliRun missing = run("analyze", tmp.resolve("nope.pickle").toString());
        assertThat(missing.exit()).isEqualTo(2);
        assertThat(missing.err()).contains("nope.pickle").contains("no such file");

        Path garbage = tmp.resolve("garbage.pickle");
        Files.write(garbage, new byte[] {(byte) 0x80, 4, 1, 2, 3});
        CliRun malformed = run("analyze", garbage.toString());
        assertThat(malformed.exit()).isEqualTo(2);
        assertThat(malformed.err()).contains("garbage.pickle");

        Path snapshot = tmp.resolve("s.pickle");
        assertThat(run(with(SMALL, "--capacity", "4GiB", "--snapshot", snapshot.toString(), "--no-min-capacity"))
                        .exit())
                .isZero();
        CliRun past = run("analyze", snapshot.toString(), "--at", "99999999");
        assertThat(past.exit()).isEqualTo(2);
        assertThat(past.err()).contains("--at 99999999 is outside device 0's trace");
        CliRun cap = run("analyze", snapshot.toString(), "--capacity", "-3");
        assertThat(cap.exit()).isEqualTo(2);
        CliRun dev = run("analyze", snapshot.toString(), "--trace-device", "5");
        assertThat(dev.exit()).isEqualTo(2);
        assertThat(dev.err()).contains("--trace-device 5");
    }

    @Test
    void analyzeAtAnEntryRebuildsThatState() {
        Path snapshot = tmp.resolve("s.pickle");
        assertThat(run(with(SMALL, "--capacity", "4GiB", "--snapshot", snapshot.toString(), "--no-min-capacity"))
                        .exit())
                .isZero();
        CliRun early = run("analyze", snapshot.toString(), "--at", "0", "--no-compare");
        assertThat(early.exit()).as(early.err()).isZero();
        assertThat(early.out()).contains("after entry #0 (segment_alloc)");
        CliRun end = run("analyze", snapshot.toString(), "--no-compare");
        assertThat(end.out()).contains("end state");
        // right after the first entry only the first segment exists; at the end there are many
        assertThat(segmentsOfAll(early.out())).isEqualTo(1);
        assertThat(segmentsOfAll(end.out())).isGreaterThan(1);
    }

    static int segmentsOfAll(String report) {
        for (String line : report.lines().toList()) {
            if (line.startsWith("all ")) {
                return Integer.parseInt(line.trim().split("\\s+", -1)[1]);
            }
        }
        throw new AssertionError("no 'all' row in\n" + report);
    }

    static Path trace(String name) {
        String dir = System.getProperty("gpumem.traces.dir");
        assumeTrue(
                dir != null && Files.isDirectory(Path.of(dir)),
                "real traces not available (system property gpumem.traces.dir = " + dir + "): skipped");
        Path p = Path.of(dir, name);
        assumeTrue(Files.isRegularFile(p), "trace " + p + " not available: skipped");
        return p;
    }

    @Test
    void analyzesAStateOnlySnapshot() {
        CliRun r = run("analyze", trace("opt1.3b-state-only.pickle").toString());
        assertThat(r.exit()).as(r.err()).isZero();
        assertThat(segmentsOfAll(r.out())).isEqualTo(176);
        assertThat(r.out()).contains("reserved/allocated 1.000").contains("largest free block per pool and stream");
    }

    @Test
    void analyzesTheRealOomAtItsEntryAndBlamesLiveTensors() {
        CliRun r = run(
                "analyze",
                trace("gnn-train-expandable-oom.pickle").toString(),
                "--trace-device",
                "1",
                "--capacity",
                "80GiB",
                "--no-compare");
        assertThat(r.exit()).as(r.err()).isZero();
        assertThat(r.out())
                .contains("after entry #421 (oom)")
                .contains("diagnosis: LIVE TENSORS")
                .contains("a request of 4.94 GiB")
                .contains("driver free: 91.25 MiB");
    }
}
