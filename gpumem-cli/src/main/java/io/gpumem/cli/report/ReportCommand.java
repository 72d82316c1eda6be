package io.gpumem.cli.report;

import io.gpumem.cli.GpumemCommand;
import io.gpumem.cli.options.BadInputException;
import io.gpumem.cli.options.CapacityOptions;
import io.gpumem.cli.options.OutputFile;
import io.gpumem.cli.options.StartOptions;
import io.gpumem.cli.options.TraceDeviceOption;
import io.gpumem.cli.options.TraceFileOptions;
import io.gpumem.cli.options.WhatIfOptions;
import io.gpumem.cli.trace.TerminalProgress;
import io.gpumem.engine.RunOutcome;
import io.gpumem.policy.PolicySpec;
import io.gpumem.report.HtmlReport;
import io.gpumem.size.ByteSize;
import io.gpumem.trace.analysis.DeviceAnalysis;
import io.gpumem.trace.io.OutputFiles;
import io.gpumem.trace.session.CompareRuns;
import io.gpumem.trace.session.TraceSession;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/**
 * {@code gpumem report FILE [-o report.html]}: the analysis of {@code gpumem analyze} for every device of a
 * trace, as one self-contained HTML page ({@link HtmlReport}) that works offline: header card, timeline by
 * allocation site with the OOM marked, segment maps at the OOM and at peak, the OOM story and the what-if table.
 * {@code --config} adds configurations to the what-if table (each replayed like {@code gpumem compare}), and
 * {@code --policy} adds allocation policies, computed by compare's own code ({@link CompareRuns}), so that a policy's
 * row shows the figures {@code gpumem compare --policy} prints. The file is read once, under the limits every trace
 * command applies ({@code --max-file-size}, {@code --max-entries}), into a {@link TraceSession}; the recommender,
 * the configuration and policy rows and the page's timeline share its window of each device.
 */
@Command(
        name = "report",
        mixinStandardHelpOptions = true,
        description = "Write a self-contained offline HTML report of a trace: peak memory, fragmentation and verdict,"
                + " a timeline of allocated (by allocation site) and reserved bytes with the OOM marked, segment maps at"
                + " the OOM and at peak, the OOM story, and the what-if table with the recommendation.")
public final class ReportCommand extends GpumemCommand {
    @Mixin
    TraceFileOptions input;

    @Mixin
    StartOptions start;

    @Mixin
    WhatIfOptions whatIf;

    @Option(
            names = {"-o", "--output"},
            paramLabel = "HTML",
            description = "Where to write the page (default: FILE's name with .html, in the current directory).")
    Path output;

    @Mixin
    CapacityOptions capacity;

    @Mixin
    TraceDeviceOption traceDevice;

    /** {@code --device}, report's first name for {@code --trace-device} (the name every trace command uses). */
    @Option(names = "--device", hidden = true)
    void oldDeviceName(int d) {
        traceDevice.set(d);
    }

    private TraceSession session;

    /** The session of the last run, {@code null} before one (tests count what it read and rebuilt). */
    public TraceSession session() {
        return session;
    }

    @Override
    public Integer call() {
        PrintWriter out = out();
        PrintWriter err = err();
        long capacityBytes = capacity.orUnknown();
        whatIf.configs();
        List<PolicySpec> policySpecs = whatIf.policies();
        Path file = input.file();
        Path target = output != null ? output : HtmlOutput.defaultName(file);
        OutputFile.check(output != null ? "-o/--output" : "the page's default name (-o names another)", target, file);
        TraceSession session = start.apply(input.openForWhatIfs(err()));
        this.session = session;
        session.whatIfProgress(TerminalProgress.forTerminal("report", "what-if runs"));
        List<Integer> devices = session.devices();
        Integer device = traceDevice.given();
        if (device != null) {
            if (!devices.contains(device)) {
                throw new BadInputException("--trace-device " + device + ": " + file
                        + " has no segments or trace entries for it (devices present: " + devices + ")");
            }
            devices = List.of(device);
        }
        long started = System.nanoTime();
        HtmlReport report = new HtmlReport(file.toString());
        for (int d : devices) {
            session.classifyAhead(d); // beside the what-if runs
            DeviceAnalysis analysis = session.analyze(d, null, capacityBytes, 5, true, policySpecs);
            String tooSmall = capacity.problemWith(analysis, file);
            if (tooSmall != null) {
                throw new BadInputException(tooSmall + "; give the GPU's memory");
            }
            List<RunOutcome> rows = new ArrayList<>(configRows(session, analysis, capacityBytes, err));
            rows.addAll(policyRows(session, analysis, capacity.given(), policySpecs, !rows.isEmpty(), err));
            report.addDevice(session, analysis, rows);
        }
        try {
            report.write(target);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write " + target + ": " + OutputFiles.reason(e), e);
        }
        out.printf(
                "report of %s (%d device%s) written to %s (%s, %.1f s); open it in a browser, it works offline%n",
                file,
                devices.size(),
                devices.size() == 1 ? "" : "s",
                target.toAbsolutePath(),
                ByteSize.formatSigned(target.toFile().length()),
                (System.nanoTime() - started) / 1e9);
        out.flush();
        return 0;
    }

    /** The session's rows for the user's configurations; a replay that fails leaves a note and no rows. */
    private List<RunOutcome> configRows(TraceSession session, DeviceAnalysis analysis, long capacity, PrintWriter err) {
        try {
            return session.configRows(analysis, capacity, whatIf.configValues());
        } catch (RuntimeException e) {
            err.println("gpumem report: note: device " + analysis.device() + ": the what-if replay of --config failed ("
                    + e.getMessage() + "); the table shows the recommender's runs only");
            return List.of();
        }
    }

    /** The session's rows for the policies; a replay that fails leaves a note and no rows. */
    private static List<RunOutcome> policyRows(
            TraceSession session,
            DeviceAnalysis analysis,
            Long capacity,
            List<PolicySpec> policies,
            boolean haveBaseline,
            PrintWriter err) {
        try {
            return session.policyRows(analysis, capacity, policies, haveBaseline);
        } catch (RuntimeException e) {
            err.println("gpumem report: note: device " + analysis.device() + ": the what-if replay of --policy failed ("
                    + e.getMessage() + "); the table has no policy rows");
            return List.of();
        }
    }
}
