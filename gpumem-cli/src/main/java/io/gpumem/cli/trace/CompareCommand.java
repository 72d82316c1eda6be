package io.gpumem.cli.trace;

import com.fasterxml.jackson.core.JsonGenerator;
import io.gpumem.cli.GpumemCommand;
import io.gpumem.cli.options.BadInputException;
import io.gpumem.cli.options.CapacityOptions;
import io.gpumem.cli.options.OutputFile;
import io.gpumem.cli.options.StartOptions;
import io.gpumem.cli.options.TraceDeviceOption;
import io.gpumem.cli.options.TraceFileOptions;
import io.gpumem.cli.options.WhatIfOptions;
import io.gpumem.cli.report.HtmlOutput;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.engine.RunOutcome;
import io.gpumem.policy.PolicySpec;
import io.gpumem.report.HtmlReport;
import io.gpumem.size.ByteSize;
import io.gpumem.trace.analysis.DeviceAnalysis;
import io.gpumem.trace.analysis.MemoryState;
import io.gpumem.trace.io.SourceFormat;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.replay.StartMode;
import io.gpumem.trace.session.CompareRuns;
import io.gpumem.trace.session.TraceSession;
import io.gpumem.trace.window.WindowStart;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/**
 * {@code gpumem compare FILE --config C ...}: replays one device's request stream from the window's rebuilt
 * start under the recorded configuration (always the first row) and each given one, on a simulated device, and
 * tabulates peak memory, driver calls, retries, OOMs at the recorded capacity and the minimum capacity. Each
 * {@code --policy} adds a row replayed under that allocation policy. The rows are computed by the file's
 * {@link TraceSession} ({@link CompareRuns}); {@code --html} adds the analysis and report of the same session, so the
 * file is read and the window rebuilt once. Bad input is thrown (typed) and reported by {@code GpumemCli}, exit 2.
 */
@Command(
        name = "compare",
        mixinStandardHelpOptions = true,
        description = {
            "Answer \"what if\": replay a trace's requests under other allocator configurations"
                    + " (PYTORCH_CUDA_ALLOC_CONF syntax) and compare peak memory, driver calls, retries, OOMs and the"
                    + " minimum device capacity. The recorded configuration is always the first row."
        })
public final class CompareCommand extends GpumemCommand {

    @Mixin
    TraceFileOptions input;

    @Mixin
    WhatIfOptions whatIf;

    @Mixin
    StartOptions start;

    private TraceSession session;

    /** The session of the last run, {@code null} before one (tests count what it read and rebuilt). */
    public TraceSession session() {
        return session;
    }

    @Mixin
    TraceDeviceOption traceDevice;

    @Mixin
    CapacityOptions capacity;

    @Option(
            names = "--json",
            description = "Print a JSON array instead of the table: one object per configuration"
                    + " with config, peak_allocated, peak_reserved, min_capacity, device_allocs, retries, ooms, policy,"
                    + " device_maps, ns_per_pair, mode (window or steady), warm_up_passes.")
    boolean json;

    @Option(
            names = "--html",
            paramLabel = "FILE",
            description =
                    "Also write the HTML report of this device (as gpumem report does), with these rows in its what-if table.")
    Path html;

    @Override
    public Integer call() {
        PrintWriter out = out();
        List<AllocatorConfig> others = whatIf.configs();
        List<PolicySpec> policySpecs = whatIf.policies();
        StartMode mode = start.mode();
        if (html != null) {
            OutputFile.check("--html", html, input.file());
        }
        TraceSession session = input.openForWhatIfs(err()).startMode(mode);
        this.session = session;
        TraceSnapshot trace = session.trace();
        int d = traceDevice.orElse(session::busiestDevice);
        if (d < 0
                || d >= Math.max(1, trace.deviceTraces().size())
                || trace.traceOf(d).isEmpty()) {
            throw new BadInputException(trace.source() + ": device " + d + " has no trace to replay");
        }
        List<AllocatorConfig> all = new ArrayList<>();
        all.add(session.recordedConfig());
        all.addAll(others);
        CompareRuns runs = session.compare(
                d, all, policySpecs, capacity.given(), TerminalProgress.forTerminal("compare", "configurations"));
        WindowStart start = runs.start();
        List<RunOutcome> rows = runs.rows();
        if (json) {
            out.println(json(rows));
        } else {
            boolean snapshot = trace.format() == SourceFormat.PYTORCH_SNAPSHOT
                    || trace.format() == SourceFormat.PYTORCH_SEGMENT_LIST;
            out.println("trace " + trace.source() + ", device " + d + ": "
                    + trace.traceOf(d).size() + " entries; start "
                    + ByteSize.format(start.allocatedBytes()) + " allocated in "
                    + ByteSize.format(start.reservedBytes())
                    + " reserved; "
                    + (snapshot
                            ? "recorded peak reserved "
                                    + ByteSize.format(runs.replay().recorded().peakReserved())
                            : "requests only (" + trace.format().description() + ", no driver calls recorded)")
                    + "; capacity " + ByteSize.format(runs.capacity()));
            String steady = steadyCheck(runs, session.recordedConfig());
            if (steady != null) {
                out.println(steady);
            }
            out.print(table(rows));
        }
        if (html != null) {
            // the report's table labels rows by configuration; the compare rows join it under compare's labels.
            // The analysis replays the session's window of the device: the file and the window are not read again.
            DeviceAnalysis analysis = session.analyze(d, null, capacity.orUnknown(), 5, true);
            String tooSmall = capacity.problemWith(analysis, input.file());
            if (tooSmall != null) {
                // a what-if limit below the recording is a fair question for the table, not the device of the page
                err().println("gpumem compare: note: " + tooSmall
                        + "; the HTML report's analysis treats the capacity as unknown");
                analysis = session.analyze(d, null, MemoryState.UNKNOWN, 5, true);
            }
            HtmlOutput.write(
                    new HtmlReport(trace.source()).addDevice(session, analysis, runs.reportRows()),
                    html,
                    json ? err() : out);
        }
        out.flush();
        return 0;
    }

    /**
     * The steady state's built-in check, when the rows ran in it: the recorded configuration's steady peak reserved
     * against the recording's own ({@code null} for rows that ran from the window's recorded start).
     */
    static String steadyCheck(CompareRuns runs, AllocatorConfig recordedConfig) {
        RunOutcome recorded = null;
        for (RunOutcome r : runs.rows()) {
            if (r.recorded() && r.steady()) {
                recorded = r;
            }
        }
        if (recorded == null) {
            return null;
        }
        long want = runs.replay().recorded().peakReserved();
        long got = runs.replay().steadyPeakReserved(recordedConfig);
        return "steady state: the window iterated from its " + runs.replay().liveBlocksAtStart()
                + " live blocks until reserved memory stops changing; recorded configuration: peak reserved "
                + ByteSize.format(got) + " after " + (recorded.warmUpPasses() + 1) + " passes, recorded "
                + ByteSize.format(want) + " ("
                + String.format(Locale.ROOT, "%+.2f%%", want == 0 ? 0.0 : 100.0 * (got - want) / want)
                + ")";
    }

    static String table(List<RunOutcome> rows) {
        String[] head = {
            "config",
            "mode",
            "peak allocated",
            "peak reserved",
            "reserved/allocated",
            "driver allocs",
            "driver frees",
            "retries",
            "OOMs",
            "min capacity",
            "map calls",
            "ns/pair"
        };
        List<String[]> cells = new ArrayList<>();
        cells.add(head);
        for (RunOutcome r : rows) {
            cells.add(new String[] {
                CompareRuns.label(r),
                r.modeLabel(),
                ByteSize.format(r.peakAllocated()),
                ByteSize.format(r.peakReserved()),
                String.format(Locale.ROOT, "%.3f", r.reservedPerAllocated()),
                Long.toString(r.deviceAllocs()),
                Long.toString(r.deviceFrees()),
                Long.toString(r.retries()),
                Long.toString(r.ooms()),
                r.minCapacity() >= 0 ? ByteSize.format(r.minCapacity()) : "none",
                Long.toString(r.deviceMaps()),
                String.format(Locale.ROOT, "%.0f", r.nsPerPair())
            });
        }
        return Table.render(cells);
    }

    static String json(List<RunOutcome> rows) {
        return Json.line(g -> {
            g.writeStartArray();
            for (RunOutcome r : rows) {
                g.writeStartObject();
                writeRowFields(g, r);
                g.writeEndObject();
            }
            g.writeEndArray();
        });
    }

    /** The fields of one row of compare's JSON (predict writes the same ones, then its own). */
    static void writeRowFields(JsonGenerator g, RunOutcome r) throws IOException {
        g.writeStringField("config", r.label() == null ? "" : r.label());
        g.writeNumberField("peak_allocated", r.peakAllocated());
        g.writeNumberField("peak_reserved", r.peakReserved());
        if (r.minCapacity() >= 0) {
            g.writeNumberField("min_capacity", r.minCapacity());
        } else {
            g.writeNullField("min_capacity"); // no capacity the search may try serves a request the recording saw fail
        }
        g.writeNumberField("device_allocs", r.deviceAllocs());
        g.writeNumberField("retries", r.retries());
        g.writeNumberField("ooms", r.ooms());
        g.writeStringField("policy", r.policy());
        g.writeNumberField("device_maps", r.deviceMaps());
        g.writeNumberField("ns_per_pair", r.nsPerPair());
        g.writeStringField("mode", r.mode());
        g.writeNumberField("warm_up_passes", r.warmUpPasses());
    }
}
