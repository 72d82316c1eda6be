package io.gpumem.cli.report;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.cli.options.SnapshotChecks;
import io.gpumem.cli.trace.CompareRuns;
import io.gpumem.config.ConfigException;
import io.gpumem.policy.PolicySpec;
import io.gpumem.trace.replay.ProgressListener;
import io.gpumem.trace.window.RecordedConfig;
import io.gpumem.report.HtmlReport;
import io.gpumem.size.ByteSize;
import io.gpumem.trace.analysis.DeviceAnalysis;
import io.gpumem.trace.analysis.MemoryState;
import io.gpumem.trace.analysis.SnapshotStates;
import io.gpumem.trace.analysis.TraceWhatIf;
import io.gpumem.trace.analysis.WhatIf;
import io.gpumem.engine.RunOutcome;
import io.gpumem.trace.io.TraceFormatException;
import io.gpumem.trace.io.TraceReaders;
import io.gpumem.trace.io.TraceSnapshot;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

/**
 * {@code gpumem report FILE [-o report.html]}: the analysis of {@code gpumem analyze} for every device of a
 * trace, as one self-contained HTML page ({@link HtmlReport}) that works offline: header card, timeline by
 * allocation site with the OOM marked, segment maps at the OOM and at peak, the OOM story and the what-if table.
 * {@code --config} adds configurations to the what-if table (each replayed like {@code gpumem compare}), and
 * {@code --policy} adds allocation policies, computed by compare's own code ({@link CompareRuns}), so that a policy's
 * row shows the figures {@code gpumem compare --policy} prints.
 */
@Command(name = "report", mixinStandardHelpOptions = true,
        description = "Write a self-contained offline HTML report of a trace: peak memory, fragmentation and verdict,"
                + " a timeline of allocated (by allocation site) and reserved bytes with the OOM marked, segment maps at"
                + " the OOM and at peak, the OOM story, and the what-if table with the recommendation.")
public final class ReportCommand implements Callable<Integer> {
    @Spec
    CommandSpec spec;

    @Parameters(index = "0", paramLabel = "FILE", description = "A trace: PyTorch snapshot pickle, RMM log CSV,"
            + " tensor-lifetime CSV or ops script (detected from the content).")
    Path file;

    @Option(names = {"-o", "--output"}, paramLabel = "HTML",
            description = "Where to write the page (default: FILE's name with .html, in the current directory).")
    Path output;

    @Option(names = {"-c", "--config"}, paramLabel = "CONF",
            description = "Another PYTORCH_CUDA_ALLOC_CONF to add to the what-if table (repeatable; default: only the"
                    + " configurations the recommender tries).")
    List<String> configs = new ArrayList<>();

    @Option(names = "--policy", paramLabel = "NAME[:OPTIONS]",
            description = "An allocation policy to add to the what-if table, as compare --policy computes it (repeatable;"
                    + " default: none): pytorch[:CONF], stitch, planned.")
    List<String> policies = new ArrayList<>();

    @Option(names = "--capacity", paramLabel = "SIZE",
            description = "Device capacity, e.g. 80GiB (default: unknown, as for analyze).")
    String capacity;

    @Option(names = "--device", paramLabel = "D", description = "Report only this device (default: every device in the file).")
    Integer device;

    @Mixin
    SnapshotChecks checks;

    @Override
    public Integer call() {
        PrintWriter out = spec.commandLine().getOut();
        PrintWriter err = spec.commandLine().getErr();
        long capacityBytes = MemoryState.UNKNOWN;
        try {
            if (capacity != null) {
                capacityBytes = ByteSize.parse(capacity);
            }
            for (String c : configs) {
                AllocatorConfig.parse(c);
            }
        } catch (ConfigException e) {
            err.println("gpumem report: bad --config: " + e.getMessage());
            return 2;
        } catch (IllegalArgumentException e) {
            err.println("gpumem report: --capacity: " + e.getMessage());
            return 2;
        }
        List<PolicySpec> policySpecs;
        try {
            policySpecs = PolicySpec.parseAll(policies);
        } catch (IllegalArgumentException e) {
            err.println("gpumem report: bad --policy: " + e.getMessage());
            return 2;
        }
        TraceSnapshot snapshot;
        try {
            snapshot = TraceReaders.read(file);
            checks.check(snapshot, err);
        } catch (TraceFormatException | IllegalArgumentException e) {
            err.println("gpumem report: " + e.getMessage());
            return 2;
        }
        List<Integer> devices = SnapshotStates.devices(snapshot);
        if (device != null) {
            if (!devices.contains(device)) {
                err.println("gpumem report: --device " + device + ": " + file
                        + " has no segments or trace entries for it (devices present: " + devices + ")");
                return 2;
            }
            devices = List.of(device);
        }
        Path target = output != null ? output : defaultOutput(file);
        long started = System.nanoTime();
        HtmlReport report = new HtmlReport(file.toString());
        try {
            for (int d : devices) {
                DeviceAnalysis analysis = DeviceAnalysis.of(snapshot, d, null, capacityBytes, 5, true);
                List<RunOutcome> rows = new ArrayList<>(extraRows(snapshot, analysis, capacityBytes, configs, err));
                rows.addAll(policyRows(snapshot, analysis, capacity != null ? capacityBytes : null, policySpecs,
                        !rows.isEmpty(), err));
                report.addDevice(snapshot, analysis, rows);
            }
        } catch (TraceFormatException e) {
            err.println("gpumem report: " + e.getMessage());
            return 2;
        }
        try {
            report.write(target);
        } catch (IOException e) {
            err.println("gpumem report: cannot write " + target + ": " + e.getMessage());
            return 2;
        }
        out.printf("report of %s (%d device%s) written to %s (%s, %.1f s); open it in a browser, it works offline%n",
                file, devices.size(), devices.size() == 1 ? "" : "s", target.toAbsolutePath(),
                ByteSize.formatSigned(target.toFile().length()), (System.nanoTime() - started) / 1e9);
        out.flush();
        return 0;
    }

    /** {@code trace.pickle} -> {@code trace.html} in the current directory (traces often live in read-only folders). */
    static Path defaultOutput(Path file) {
        String name = file.getFileName().toString();
        int dot = name.lastIndexOf('.');
        return Path.of((dot > 0 ? name.substring(0, dot) : name) + ".html");
    }

    /** {@code dir/run.pickle} -> {@code dir/run.html}: a page written beside the snapshot it shows. */
    public static Path siblingHtml(Path snapshot) {
        return snapshot.resolveSibling(defaultOutput(snapshot));
    }

    /**
     * The what-if rows for the user's configurations: replayed like {@code gpumem compare} (the recommender's
     * replay when it ran one, else a new one), with the recorded configuration as the baseline row.
     */
    public static List<RunOutcome> extraRows(TraceSnapshot snapshot, DeviceAnalysis analysis, long capacity,
                                                List<String> configs, PrintWriter err) {
        if (configs.isEmpty() || !DeviceAnalysis.hasRequests(snapshot.traceOf(analysis.device()))) {
            return List.of();
        }
        WhatIf whatIf = analysis.whatIf();
        List<RunOutcome> rows = new ArrayList<>();
        try {
            if (whatIf == null) {
                long outside = analysis.analysis().diagnosis().outside();
                whatIf = new TraceWhatIf(snapshot, analysis.device(),
                        capacity > 0 ? capacity - Math.max(0, outside) : MemoryState.UNKNOWN);
            }
            rows.add(whatIf.run(snapshot.recordedConfString() == null ? "" : snapshot.recordedConfString()));
            for (String c : configs) {
                rows.add(whatIf.run(c));
            }
        } catch (RuntimeException e) {
            err.println("gpumem report: note: device " + analysis.device() + ": the what-if replay of --config failed ("
                    + e.getMessage() + "); the table shows the recommender's runs only");
            return List.of();
        }
        return rows;
    }

    /**
     * The what-if rows for the given policies, computed by {@code gpumem compare}'s code ({@link CompareRuns}) at
     * compare's capacity (the given one, else the recorded one) and labelled as compare labels them. Compare's
     * recorded-configuration row comes first when the table would otherwise have no baseline.
     *
     * @param capacity     the capacity, or {@code null} for compare's default (the recorded capacity)
     * @param haveBaseline whether other extra rows already include the recorded configuration
     */
    public static List<RunOutcome> policyRows(TraceSnapshot snapshot, DeviceAnalysis analysis, Long capacity,
                                                 List<PolicySpec> policies, boolean haveBaseline, PrintWriter err) {
        if (policies.isEmpty() || !DeviceAnalysis.hasRequests(snapshot.traceOf(analysis.device()))) {
            return List.of();
        }
        try {
            AllocatorConfig recorded = RecordedConfig.of(snapshot);
            boolean baseline = !haveBaseline && analysis.recommendations().baseline() == null;
            return CompareRuns.run(snapshot, analysis.device(), recorded, baseline ? List.of(recorded) : List.of(),
                    policies, capacity, ProgressListener.NONE).reportRows();
        } catch (RuntimeException e) {
            err.println("gpumem report: note: device " + analysis.device() + ": the what-if replay of --policy failed ("
                    + e.getMessage() + "); the table has no policy rows");
            return List.of();
        }
    }
}
