package io.gpumem.cli.analysis;

import io.gpumem.cli.GpumemCommand;
import io.gpumem.cli.options.CapacityOptions;
import io.gpumem.cli.options.OutputFile;
import io.gpumem.cli.options.PolicyOptions;
import io.gpumem.cli.options.StartOptions;
import io.gpumem.cli.options.TraceDeviceOption;
import io.gpumem.cli.options.TraceFileOptions;
import io.gpumem.cli.report.HtmlOutput;
import io.gpumem.cli.trace.TerminalProgress;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.history.TraceEntry;
import io.gpumem.policy.PolicySpec;
import io.gpumem.report.HtmlReport;
import io.gpumem.size.ByteSize;
import io.gpumem.trace.analysis.AnalysisPrinter;
import io.gpumem.trace.analysis.DeviceAnalysis;
import io.gpumem.trace.analysis.SnapshotStates;
import io.gpumem.trace.analysis.TraceStates;
import io.gpumem.trace.category.CategoryPrinter;
import io.gpumem.trace.category.PeakCategories;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.session.TraceSession;
import java.io.PrintWriter;
import java.io.Writer;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/**
 * {@code gpumem analyze FILE [--at N]}: where the memory of a PyTorch snapshot went and what would fix it.
 *
 * <p>Per device: the state to analyse is the end state, or the state after entry N ({@code --at}), or,
 * when the trace holds an {@code oom} entry that later entries moved away from, the state at that entry
 * (rebuilt by replaying the trace). The analysis prints the pool accounting, free space per stream, the
 * most wasteful segments and the diagnosis; recommendations are backed by compare runs of the trace's window
 * under each candidate configuration (the {@code gpumem compare} engine), unless {@code --no-compare} or the
 * snapshot has no requests (state only). Then what the live bytes are for ({@link PeakCategories}: parameters,
 * gradients, optimizer state, activations, temporaries, other, at peak allocated, at the failing request of an OOM and
 * at the end) and the remedies ranked by what each saves at the peak; {@code --json} prints all of it as JSON
 * ({@link AnalyzeJson}) instead of text. The file is read under {@code --max-file-size} and {@code --max-entries}
 * like every trace command's, into a {@link TraceSession} whose windows the compare runs share.
 */
@Command(
        name = "analyze",
        mixinStandardHelpOptions = true,
        description =
                "Analyse a PyTorch memory snapshot: reserved, allocated, active and inactive-split bytes per pool,"
                        + " largest free block per pool and stream, fragmentation, the most wasteful segments, and for an OOM or a"
                        + " state near capacity a diagnosis with recommendations backed by compare runs.")
public final class AnalyzeCommand extends GpumemCommand {
    @Mixin
    TraceFileOptions input;

    @Mixin
    StartOptions start;

    @Option(
            names = "--at",
            paramLabel = "N",
            description = "Analyse the state after trace entry N (0-based) instead of the end state.")
    Integer at;

    @Mixin
    TraceDeviceOption traceDevice;

    @Mixin
    CapacityOptions capacity;

    @Option(
            names = "--top",
            defaultValue = "5",
            paramLabel = "K",
            description = "How many wasteful segments to list (default: ${DEFAULT-VALUE}).")
    int top;

    @Option(names = "--no-compare", description = "Skip the compare runs behind the recommendations.")
    boolean noCompare;

    @Mixin
    PolicyOptions policies;

    /** {@link #policies} parsed, before anything is read. */
    private List<PolicySpec> policySpecs = List.of();

    @Option(
            names = "--html",
            paramLabel = "FILE",
            description = "Also write the analysis as a self-contained HTML report (as gpumem report does) to FILE.")
    Path html;

    @Option(
            names = "--json",
            description = "Print the analysis as JSON (one object per device, an array when there are several)"
                    + " instead of text: verdict, remedies, recommendations, live_at_peak and live_at_end by category.")
    boolean json;

    /**
     * The model's blocks (layers) for the checkpointing remedy; a recording does not say how many, so 0 (not given)
     * makes the remedy say that it assumed {@link PeakCategories#DEFAULT_CHECKPOINT_BLOCKS}.
     */
    @Option(
            names = "--checkpoint-blocks",
            paramLabel = "N",
            description = "Blocks (layers) of the model, for what activation checkpointing would save at the peak"
                    + " (default: " + PeakCategories.DEFAULT_CHECKPOINT_BLOCKS + ", assumed and said so).")
    int checkpointBlocks;

    @Override
    public Integer call() {
        PrintWriter out = out();
        long capacityBytes = capacity.orUnknown();
        if (top < 0) {
            throw new CommandLine.ParameterException(spec.commandLine(), "--top must be >= 0, got " + top);
        }
        if (checkpointBlocks < 0
                || (checkpointBlocks == 0
                        && spec.commandLine().getParseResult().hasMatchedOption("--checkpoint-blocks"))) {
            throw new CommandLine.ParameterException(
                    spec.commandLine(), "--checkpoint-blocks must be >= 1, got " + checkpointBlocks);
        }
        policySpecs = policies.specs();
        if (html != null) {
            OutputFile.check("--html", html, input.file());
        }
        PrintWriter text = json ? new PrintWriter(Writer.nullWriter()) : out;
        TraceSession session = start.apply(input.openForWhatIfs(err()));
        session.whatIfProgress(TerminalProgress.forTerminal("analyze", "what-if runs"));
        TraceSnapshot snapshot = session.trace();
        Path file = input.file();
        boolean requestsOnly = !snapshot.addressesRecorded();
        Integer device = traceDevice.given();
        List<Integer> devices = device != null ? List.of(device) : SnapshotStates.devices(snapshot);
        if (devices.isEmpty()) {
            out.println(json ? "[]" : file + ": no segments and no trace entries: nothing to analyse");
            out.flush();
            return 0;
        }
        if (device != null && !SnapshotStates.devices(snapshot).contains(device)) {
            throw new CommandLine.ParameterException(
                    spec.commandLine(),
                    "--trace-device " + device + ": " + file
                            + " has no segments or trace entries for it (devices present: "
                            + SnapshotStates.devices(snapshot) + ")");
        }
        // every device is analysed (and checked) before anything is printed: a refusal leaves no half output
        List<DeviceAnalysis> results = new ArrayList<>();
        List<PeakCategories> categories = new ArrayList<>();
        for (int d : devices) {
            session.classifyAhead(d); // beside the compare runs, which leave a core idle while the last one ends
            DeviceAnalysis result = analyseDevice(session, d, capacityBytes);
            results.add(result);
            categories.add(session.peakCategories(result, checkpointBlocks));
        }
        if (requestsOnly) {
            String conf = snapshot.recordedConfString();
            long replayedOn = TraceStates.replayCapacity(snapshot, capacityBytes);
            text.println("note: " + file + " is " + snapshot.format().withArticle()
                    + ": it records requests but no allocator state, so the states below are those a replay of its"
                    + " requests reaches"
                    + (at == null ? " (at its peak of allocated bytes, or where a request fails)" : "")
                    + " under " + AllocatorConfig.inWords(conf)
                    + (replayedOn == TraceStates.UNLIMITED
                            ? " with unlimited memory"
                            : " on " + ByteSize.format(replayedOn)
                                    + (capacityBytes > 0 ? "" : " (the script's device)"))
                    + ", as the compare runs replay them");
        }
        HtmlReport report = html != null ? new HtmlReport(file.toString()) : null;
        for (int i = 0; i < results.size(); i++) {
            if (i > 0) {
                text.println();
            }
            print(results.get(i), text);
            CategoryPrinter.print(categories.get(i), text);
            if (report != null) {
                report.addDevice(session, results.get(i), List.of(), categories.get(i));
            }
        }
        if (json) {
            out.println(AnalyzeJson.of(results, categories));
        }
        if (report != null) {
            HtmlOutput.write(report, html, json ? err() : out);
        }
        out.flush();
        return 0;
    }

    /** The analysis of device {@code d}, refused (exit 2) where {@code --at} or {@code --capacity} does not fit it. */
    private DeviceAnalysis analyseDevice(TraceSession session, int d, long capacityBytes) {
        Path file = input.file();
        List<TraceEntry> trace = session.trace().traceOf(d);
        if (at != null && (at < 0 || at >= trace.size())) {
            throw new CommandLine.ParameterException(
                    spec.commandLine(),
                    "--at " + at + " is outside device " + d + "'s trace of " + file + " (" + trace.size()
                            + " entries, 0.." + (trace.size() - 1) + ")");
        }
        DeviceAnalysis result = session.analyze(d, at, capacityBytes, top, !noCompare, policySpecs);
        String tooSmall = capacity.problemWith(result, file);
        if (tooSmall != null) {
            throw new CommandLine.ParameterException(spec.commandLine(), tooSmall + "; give the GPU's memory");
        }
        return result;
    }

    private static void print(DeviceAnalysis result, PrintWriter out) {
        AnalysisPrinter.printState(result.analysis(), out);
        for (String note : result.replayNotes()) {
            out.println();
            out.println("note: " + note);
        }
        AnalysisPrinter.printRecommendations(result.recommendations(), out);
    }
}
