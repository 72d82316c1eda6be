package io.gpumem.bench.trace;

import io.gpumem.bench.cputime.ThreadCpuTimer;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.trace.io.PytorchSnapshotReader;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.replay.OracleReplay;
import io.gpumem.trace.replay.WhatIfReplay;
import io.gpumem.trace.window.RecordedConfig;
import io.gpumem.trace.window.WindowRebuilder;
import io.gpumem.trace.window.WindowStart;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.LongSupplier;

/**
 * The {@link ReplayThroughputBenchmark} units measured in thread CPU time, for a shared machine where wall-clock
 * scores move with the load (see {@code AllocatorPeersCpuTime}): on {@code lm2.7b-train-step.pickle},
 * <ul>
 *   <li>{@code pickle}: the snapshot reader from the file's bytes in memory to a {@link TraceSnapshot}
 *       (unpickling and conversion; MB/s of pickle);</li>
 *   <li>{@code oracleCheck}: a whole {@code replay --check} minus parsing (entries/s): window rebuild, compile
 *       into the request stream, the replay and the end-state comparison;</li>
 *   <li>{@code oraclePrepare}: the check's preparation alone ({@link OracleReplay#prepare}: the window rebuilt and
 *       compiled into the request stream with the recording's decisions; entries/s), so that check = prepare +
 *       play can be read off one run;</li>
 *   <li>{@code oraclePlay}: the replay of that check alone, on the window rebuilt and compiled once
 *       ({@link OracleReplay#prepare}): start state loaded, stream played on the model, decisions and end state
 *       compared (entries/s);</li>
 *   <li>{@code whatIfRun}: one what-if replay under the recorded configuration (entries/s);</li>
 *   <li>{@code compare3}: the three evaluations of {@code gpumem compare -c expandable_segments:True
 *       -c max_split_size_mb:128} (each a run at capacity, an unlimited run and a capacity search) on one thread
 *       (ms of CPU per compare, JIT warm).</li>
 * </ul>
 * Method: each unit is warmed up, then measured in {@code rounds} interleaved rounds of {@code reps}
 * repetitions of about {@code millis} ms; printed: the median and the spread over all repetitions.
 *
 * <p>Run: {@code java -XX:+UseSerialGC -cp gpumem-bench/target/benchmarks.jar io.gpumem.bench.trace.ReplayCpuTime
 * [rounds reps millis [units]]} (defaults 3, 5, 300, all units; {@code units} names the ones to run, e.g.
 * {@code oracleCheck,pickle}) from the project root.
 */
public final class ReplayCpuTime {

    private ReplayCpuTime() {}

    public static void main(String[] args) throws IOException {
        int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 3;
        int reps = args.length > 1 ? Integer.parseInt(args[1]) : 5;
        long millis = args.length > 2 ? Long.parseLong(args[2]) : 300;
        Path dir = Path.of(System.getProperty("gpumem.traces.dir", "../shared/traces"));
        Path file = dir.resolve("lm2.7b-train-step.pickle");
        byte[] bytes = Files.readAllBytes(file);
        TraceSnapshot snapshot = new PytorchSnapshotReader().read(file);
        int entries = snapshot.entryCount() > Integer.MAX_VALUE ? -1 : (int) snapshot.entryCount();
        AllocatorConfig config = RecordedConfig.of(snapshot);
        WindowStart start = new WindowRebuilder(config).rebuild(snapshot, 0);
        WhatIfReplay whatIf = new WhatIfReplay(snapshot, 0, start);
        List<AllocatorConfig> configs = List.of(
                config,
                AllocatorConfig.parse("expandable_segments:True"),
                AllocatorConfig.parse("max_split_size_mb:128"));
        long capacity = whatIf.recorded().capacity();

        OracleReplay.Windows prepared = OracleReplay.prepare(snapshot, config);
        String[] units = {"pickle", "oracleCheck", "oraclePrepare", "oraclePlay", "whatIfRun", "compare3"};
        LongSupplier[] pass = {
            () -> new PytorchSnapshotReader()
                    .read(new ByteArrayInputStream(bytes), "lm2.7b")
                    .entryCount(),
            () -> new OracleReplay().check(snapshot, config).devices().size(),
            () -> System.identityHashCode(OracleReplay.prepare(snapshot, config)),
            () -> new OracleReplay().check(prepared).devices().size(),
            () -> whatIf.runOnce(config, 1L << 40),
            () -> whatIf.evaluateAll(configs, capacity, 1, i -> {}).size(),
        };
        // work per pass, and the unit it is reported in per second
        double[] work = {bytes.length / 1e6, entries, entries, entries, entries, 1};
        String[] per = {"MB/s", "M entries/s", "M entries/s", "M entries/s", "M entries/s", "compares/s"};
        double[] scale = {1, 1e-6, 1e-6, 1e-6, 1e-6, 1};
        String only = args.length > 3 ? args[3] : "";
        boolean[] skip = new boolean[units.length];
        for (int k = 0; k < units.length; k++) {
            skip[k] = !only.isEmpty() && !only.contains(units[k]);
            if (skip[k]) {
                pass[k] = () -> 0;
            }
        }
        for (LongSupplier p : pass) {
            ThreadCpuTimer.spin(p, millis * reps * 1_000_000L);
        }
        List<List<Double>> perUnit = new ArrayList<>();
        for (int k = 0; k < units.length; k++) {
            perUnit.add(new ArrayList<>());
        }
        for (int round = 0; round < rounds; round++) {
            for (int k = 0; k < units.length; k++) {
                for (int r = 0; r < reps && !skip[k]; r++) {
                    perUnit.get(k).add(ThreadCpuTimer.nsPerPass(pass[k], millis));
                }
            }
        }
        System.out.printf("%-13s %14s %24s %16s%n", "unit", "per second", "spread (min-max)", "CPU ms/pass");
        for (int k = 0; k < units.length; k++) {
            if (skip[k]) {
                continue;
            }
            double[] nsPerPass = perUnit.get(k).stream()
                    .mapToDouble(Double::doubleValue)
                    .sorted()
                    .toArray();
            double median = nsPerPass[nsPerPass.length / 2];
            System.out.printf(
                    "%-13s %9.2f %-12s %6.2f-%-6.2f %12.3f%n",
                    units[k],
                    rate(work[k], median) * scale[k],
                    per[k],
                    rate(work[k], nsPerPass[nsPerPass.length - 1]) * scale[k],
                    rate(work[k], nsPerPass[0]) * scale[k],
                    median / 1e6);
        }
        System.out.println("(lm2.7b, " + entries + " entries, " + bytes.length + " bytes; thread CPU time, " + rounds
                + " interleaved rounds x " + reps + " repetitions of ~" + millis + " ms; load average at the end "
                + Arrays.toString(new double[] {ThreadCpuTimer.loadAverage()})
                + ")");
    }

    private static double rate(double work, double nsPerPass) {
        return work / (nsPerPass / 1e9);
    }
}
