package io.gpumem.bench.trace;

import io.gpumem.bench.OpsPerSecondBenchmark;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.trace.io.PytorchSnapshotReader;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.replay.FidelityReport;
import io.gpumem.trace.replay.OracleReplay;
import io.gpumem.trace.replay.WhatIfReplay;
import io.gpumem.trace.window.RecordedConfig;
import io.gpumem.trace.window.WindowRebuilder;
import io.gpumem.trace.window.WindowStart;
import java.nio.file.Files;
import java.nio.file.Path;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * Replay throughput in trace entries per second, on the 19,342-entry training-step snapshot
 * ({@code lm2.7b-train-step.pickle}, read from {@code -Dgpumem.traces.dir}, default {@code ../shared/traces}).
 *
 * <p>{@code oracleCheck}: a whole {@code gpumem replay --check} of the file (window rebuild, state import, the
 * oracle replay with its per-entry comparison, the end-state comparison); {@code oraclePrepare} and
 * {@code oraclePlay} are its two halves, the window rebuilt and compiled, then played and compared.
 * {@code whatIfRun}: one replay of the request stream on a simulated device under the recorded configuration (the
 * unit {@code gpumem compare} repeats for its binary search). The score is reported per trace entry
 * ({@link OperationsPerInvocation}), so ops/s = entries/s. Target: 2 million entries per second.
 *
 * <p>Run: {@code java -jar gpumem-bench/target/benchmarks.jar ReplayThroughput}. The fork uses the serial
 * collector: a replay is one thread, and on a small shared machine parallel GC threads compete with it for the
 * same cores (with the default collector the scores were several times lower and far noisier).
 */
@State(Scope.Benchmark)
@Warmup(iterations = 5, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(
        value = 1,
        jvmArgsAppend = {"-XX:+UseSerialGC", "-Xmx1g"})
public class ReplayThroughputBenchmark extends OpsPerSecondBenchmark {

    /** Entries in {@code lm2.7b-train-step.pickle} (checked at setup). */
    static final int ENTRIES = 19_342;

    TraceSnapshot snapshot;
    AllocatorConfig config;
    WhatIfReplay whatIf;
    OracleReplay.Windows prepared;

    @Setup
    public void load() {
        Path dir = Path.of(System.getProperty("gpumem.traces.dir", "../shared/traces"));
        Path file = dir.resolve("lm2.7b-train-step.pickle");
        if (!Files.isRegularFile(file)) {
            throw new IllegalStateException(
                    "benchmark trace not found: " + file + " (set -Dgpumem.traces.dir to the shared traces folder)");
        }
        snapshot = new PytorchSnapshotReader().read(file);
        if (snapshot.entryCount() != ENTRIES) {
            throw new IllegalStateException(
                    "expected " + ENTRIES + " entries in " + file + ", found " + snapshot.entryCount());
        }
        config = RecordedConfig.of(snapshot);
        WindowStart start = new WindowRebuilder(config).rebuild(snapshot, 0);
        whatIf = new WhatIfReplay(snapshot, 0, start);
        prepared = OracleReplay.prepare(snapshot, config);
    }

    @Benchmark
    @OperationsPerInvocation(ENTRIES)
    public FidelityReport oracleCheck() {
        return new OracleReplay().check(snapshot, config);
    }

    /** The first half of {@code oracleCheck}: the window rebuilt and compiled into the request stream. */
    @Benchmark
    @OperationsPerInvocation(ENTRIES)
    public OracleReplay.Windows oraclePrepare() {
        return OracleReplay.prepare(snapshot, config);
    }

    /** The second half: the compiled stream played on the exact allocator, and the end state compared. */
    @Benchmark
    @OperationsPerInvocation(ENTRIES)
    public FidelityReport oraclePlay() {
        return new OracleReplay().check(prepared);
    }

    @Benchmark
    @OperationsPerInvocation(ENTRIES)
    public Object whatIfRun() {
        return whatIf.runOnce(config, 1L << 40);
    }
}
