package io.gpumem.cli.trace;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpumem.cli.CliRun;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * PyTorch's own snapshot tool ({@code ../shared/clients/_memory_viz.py}, torch 2.13; never copied into this
 * repository) reads every kind of snapshot gpumem writes ({@code demo}, {@code sim}, {@code replay --snapshot},
 * also under a what-if) in each of its subcommands {@code stats}, {@code trace}, {@code segments}, {@code memory},
 * {@code trace_plot} and {@code segment_plot}; and a replayed shared trace prints the same {@code stats} and
 * {@code trace} text as its recording.
 *
 * <p>The client runs as its command line does, but all jobs in one Python process ({@code run_client.py}: starting
 * Python per subcommand costs seconds). {@code segments} and {@code memory} pipe their folded stacks into
 * {@code ~/.cache/flamegraph.pl}, which the client downloads when missing; here HOME is a temporary folder whose
 * stand-in script writes the folded stacks back, so nothing leaves the machine. Skipped, saying so, where python3
 * or the client is absent.
 */
class MemoryVizCompatibilityTest {

    private static final List<String> SUBCOMMANDS =
            List.of("stats", "trace", "segments", "memory", "trace_plot", "segment_plot");

    record Job(String subcommand, Path input, Path output) {}

    private static Path client() {
        String traces = System.getProperty("gpumem.traces.dir");
        Path client = traces == null
                ? null
                : Path.of(traces).resolveSibling("clients").resolve("_memory_viz.py");
        assumeTrue(
                client != null && Files.isRegularFile(client),
                "PyTorch's _memory_viz.py not available (expected beside the traces, at " + client + "): skipped");
        boolean python;
        try {
            python = new ProcessBuilder("python3", "-c", "pass").start().waitFor() == 0;
        } catch (IOException | InterruptedException e) {
            python = false;
        }
        assumeTrue(python, "python3 not found: skipped the _memory_viz.py checks");
        return client;
    }

    /** Runs the jobs; returns one status line per job ("ok" first when it succeeded). */
    private static List<String> runClient(Path client, List<Job> jobs, Path dir) throws Exception {
        Path home = Files.createDirectories(dir.resolve("home/.cache"));
        Path flamegraph = home.resolve("flamegraph.pl");
        Files.writeString(
                flamegraph,
                "#!/bin/sh\n# stands in for flamegraph.pl: reads every folded stack, then"
                        + " writes them back sorted\nexec sort\n");
        flamegraph.toFile().setExecutable(true);
        Path driver = dir.resolve("run_client.py");
        try (InputStream in = MemoryVizCompatibilityTest.class.getResourceAsStream("/memoryviz/run_client.py")) {
            Files.write(driver, in.readAllBytes());
        }
        StringBuilder lines = new StringBuilder();
        for (Job j : jobs) {
            lines.append(j.subcommand())
                    .append('\t')
                    .append(j.input())
                    .append('\t')
                    .append(j.output())
                    .append('\n');
        }
        Path jobsFile = Files.writeString(dir.resolve("jobs.txt"), lines);
        ProcessBuilder pb = new ProcessBuilder("python3", driver.toString(), client.toString(), jobsFile.toString())
                .redirectErrorStream(true);
        pb.environment().put("HOME", dir.resolve("home").toString());
        Process p = pb.start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(p.waitFor()).as(out).isZero();
        return out.lines().filter(l -> l.contains("\t")).toList();
    }

    /** A small demo run's snapshot (two layers, four steps), written to {@code dir/demo.pickle}. */
    private static Path smallDemoSnapshot(Path dir) {
        Path demo = dir.resolve("demo.pickle");
        CliRun d = CliRun.run(
                "demo",
                "--layers",
                "2",
                "--hidden",
                "512",
                "--heads",
                "8",
                "--vocab",
                "8000",
                "--batch",
                "2",
                "--seq-max",
                "1024",
                "--steps",
                "4",
                "--capacity",
                "360MiB",
                "--no-min-capacity",
                "--snapshot",
                demo.toString());
        assertThat(d.exit()).as(d.err()).isZero();
        return demo;
    }

    @Test
    void everyKindOfSnapshotGpumemWritesOpensInEverySubcommand(@TempDir Path dir) throws Exception {
        Path client = client();
        Path demo = smallDemoSnapshot(dir);
        Path sim = dir.resolve("sim.pickle");
        Path script = Files.writeString(
                dir.resolve("s.ops"),
                String.join(
                        "\n",
                        "alloc a 1000",
                        "alloc b 3MiB",
                        "alloc c 25000000",
                        "free b",
                        "empty_cache",
                        "alloc d 5MiB",
                        "snapshot " + sim,
                        ""));
        CliRun s = CliRun.run("sim", script.toString());
        assertThat(s.exit()).as(s.err()).isZero();
        Path replayed = dir.resolve("replayed.pickle");
        CliRun r = CliRun.run("replay", "--check", "--snapshot", replayed.toString(), demo.toString());
        assertThat(r.exit()).as(r.out() + r.err()).isZero();
        Path whatIf = dir.resolve("what-if.pickle");
        CliRun w = CliRun.run(
                "replay", "--config", "expandable_segments:True", "--snapshot", whatIf.toString(), demo.toString());
        assertThat(w.exit()).as(w.err()).isZero();
        // a file of requests only, replayed into the caching allocator's layout
        Path log = Files.writeString(dir.resolve("rmm.csv"), """
                Thread,Time,Action,Pointer,Size,Stream
                1,0.001,allocate,0x7f0000000000,1000,0x0
                1,0.002,allocate,0x7f0000100000,31457280,0x0
                1,0.003,allocate,0x7f0002000000,4194304,0x0
                1,0.004,free,0x7f0000100000,31457280,0x0
                1,0.005,allocate,0x7f0004000000,8388608,0x0
                """);
        Path fromLog = dir.resolve("rmm.pickle");
        CliRun l = CliRun.run("replay", "--snapshot", fromLog.toString(), log.toString());
        assertThat(l.exit()).as(l.err()).isZero();

        List<Job> jobs = new ArrayList<>();
        for (Path snapshot : List.of(demo, sim, replayed, whatIf, fromLog)) {
            for (String sub : SUBCOMMANDS) {
                jobs.add(new Job(sub, snapshot, dir.resolve(snapshot.getFileName() + "." + sub + ".out")));
            }
        }
        List<String> status = runClient(client, jobs, dir);
        assertThat(status).hasSize(jobs.size());
        for (int i = 0; i < jobs.size(); i++) {
            Job job = jobs.get(i);
            assertThat(status.get(i)).startsWith("ok\t" + job.subcommand());
            String text = Files.readString(job.output());
            switch (job.subcommand()) {
                case "stats" -> assertThat(text).as(job.toString()).contains("Summary of segments");
                case "trace" ->
                    assertThat(text).as(job.toString()).contains("entries").contains("TOTAL MEM");
                case "segments", "memory" -> assertThat(text).as(job.toString()).contains("stream_0");
                default -> assertThat(text).as(job.toString()).contains("base64");
            }
        }
        // The demo's requests carry frames; the replay keeps them on its blocks, so the flame graphs name them.
        assertThat(Files.readString(dir.resolve("replayed.pickle.memory.out")))
                .isEqualTo(Files.readString(dir.resolve("demo.pickle.memory.out")));
    }

    @Test
    void policySnapshotsOpenInEverySubcommandWithTheRecordedFrames(@TempDir Path dir) throws Exception {
        Path client = client();
        Path demo = smallDemoSnapshot(dir);
        List<Job> jobs = new ArrayList<>();
        // rmm-pool from an empty pool, so that its growth is recorded: RMM's default initial block predates the history
        for (String policy : List.of("stitch", "planned", "rmm-pool:initial=0")) {
            String name = policy.replaceAll("[:=]", "-");
            Path out = dir.resolve(name + ".pickle");
            CliRun r = CliRun.run("replay", "--policy", policy, "--snapshot", out.toString(), demo.toString());
            assertThat(r.exit()).as(r.out() + r.err()).isZero();
            for (String sub : SUBCOMMANDS) {
                jobs.add(new Job(sub, out, dir.resolve(name + "." + sub + ".out")));
            }
        }
        List<String> status = runClient(client, jobs, dir);
        assertThat(status).hasSize(jobs.size());
        for (int i = 0; i < jobs.size(); i++) {
            Job job = jobs.get(i);
            assertThat(status.get(i)).startsWith("ok\t" + job.subcommand());
            String text = Files.readString(job.output());
            // stitch and planned map pages as requests come, entries the client prints whole with the request's
            // stack; RMM's pool takes whole cudaMalloc blocks, which it prints as calls, without the stack
            String[] driverCalls = job.input().getFileName().toString().startsWith("rmm-pool")
                    ? new String[] {"= cudaMalloc("}
                    : new String[] {"'segment_map', 'addr'", "init_parameters"};
            switch (job.subcommand()) {
                case "stats" -> assertThat(text).as(job.toString()).contains("Summary of segments");
                // The history: allocs, frees and driver calls.
                case "trace" ->
                    assertThat(text)
                            .as(job.toString())
                            .contains("entries")
                            .contains("TOTAL MEM")
                            .contains(driverCalls);
                // Live blocks keep their request's stack, so the flame graph names the demo's functions.
                case "segments", "memory" ->
                    assertThat(text).as(job.toString()).contains("stream_0").contains("model.py:200:init_parameters");
                default -> assertThat(text).as(job.toString()).contains("base64");
            }
        }
    }

    @Test
    void replayedSharedTracesPrintTheSameStatsAndTraceAsTheirRecordings(@TempDir Path dir) throws Exception {
        Path client = client();
        List<Path> recordings;
        try (Stream<Path> files = Files.list(Path.of(System.getProperty("gpumem.traces.dir")))) {
            recordings =
                    files.filter(f -> f.toString().endsWith(".pickle")).sorted().toList();
        }
        assumeTrue(!recordings.isEmpty(), "no shared snapshot pickles: skipped");
        List<Job> jobs = new ArrayList<>();
        for (Path recording : recordings) {
            Path replayed = dir.resolve(recording.getFileName());
            CliRun r = CliRun.run("replay", "--check", "--snapshot", replayed.toString(), recording.toString());
            assertThat(r.exit()).as(recording + ": " + r.out() + r.err()).isZero();
            for (String sub : List.of("stats", "trace")) {
                jobs.add(new Job(sub, recording, dir.resolve(recording.getFileName() + ".recorded." + sub)));
                jobs.add(new Job(sub, replayed, dir.resolve(recording.getFileName() + ".replayed." + sub)));
            }
        }
        List<String> status = runClient(client, jobs, dir);
        assertThat(status).hasSize(jobs.size()).allMatch(l -> l.startsWith("ok\t"));
        for (int i = 0; i < jobs.size(); i += 2) {
            String recorded = Files.readString(jobs.get(i).output());
            assertThat(recorded).as(jobs.get(i).toString()).isNotBlank();
            assertThat(Files.readString(jobs.get(i + 1).output()))
                    .as(jobs.get(i + 1).toString())
                    .isEqualTo(recorded);
        }
    }

    /**
     * The recording {@code predict --out} writes is a snapshot like any other: the client's {@code stats},
     * {@code trace} and {@code memory} read it, {@code replay --check} reproduces every address (they are the exact
     * allocator's own decisions), and {@code analyze} and {@code report} take it.
     */
    @Test
    void predictedRecordingOpensLikeARecordedOne(@TempDir Path dir) throws Exception {
        Path client = client();
        String a = DiffCommandTest.trace("lm-medium-infer-ctx128.pickle");
        String b = DiffCommandTest.trace("lm-medium-infer-ctx256.pickle");
        Path predicted = dir.resolve("predicted.pickle");
        CliRun p = CliRun.run("predict", a + "@128", b + "@256", "--at", "512", "--out", predicted.toString());
        assertThat(p.exit()).as(p.err()).isZero();
        assertThat(p.out()).contains("written to " + predicted);
        List<Job> jobs = new ArrayList<>();
        for (String sub : List.of("stats", "trace", "memory")) {
            jobs.add(new Job(sub, predicted, dir.resolve("predicted." + sub + ".out")));
        }
        List<String> status = runClient(client, jobs, dir);
        assertThat(status).hasSize(3).allMatch(l -> l.startsWith("ok\t"));
        assertThat(Files.readString(jobs.get(0).output())).contains("Summary of segments");
        // the window: the reference's 1,280 requests, each freed (alloc, free_requested, free_completed)
        assertThat(Files.readString(jobs.get(1).output()))
                .contains("3840 entries")
                .contains("TOTAL MEM");
        assertThat(Files.readString(jobs.get(2).output())).contains("stream_0");
        CliRun check = CliRun.run("replay", "--check", predicted.toString());
        assertThat(check.exit()).as(check.out() + check.err()).isZero();
        CliRun analyze = CliRun.run("analyze", predicted.toString());
        assertThat(analyze.exit()).as(analyze.err()).isZero();
        assertThat(analyze.out()).contains(predicted + ", end state");
        Path page = dir.resolve("predicted.html");
        CliRun report = CliRun.run("report", predicted.toString(), "-o", page.toString());
        assertThat(report.exit()).as(report.err()).isZero();
        assertThat(Files.readString(page)).contains("predicted.pickle");
    }
}
