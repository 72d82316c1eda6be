package io.gpumem.cli.analysis;

import io.gpumem.cli.GpumemCommand;
import io.gpumem.cli.SizeConverter;
import io.gpumem.cli.options.AllocatorOptions;
import io.gpumem.cli.options.OutputFile;
import io.gpumem.cli.options.PolicyOptions;
import io.gpumem.cli.report.HtmlOutput;
import io.gpumem.engine.RequestStream;
import io.gpumem.engine.RunOutcome;
import io.gpumem.policy.PolicySpec;
import io.gpumem.report.HtmlReport;
import io.gpumem.size.ByteSize;
import io.gpumem.trace.analysis.AllocatorStates;
import io.gpumem.trace.analysis.AnalysisPrinter;
import io.gpumem.trace.analysis.DeviceAnalysis;
import io.gpumem.trace.analysis.MemoryState;
import io.gpumem.trace.analysis.OomEvent;
import io.gpumem.trace.analysis.Recommender;
import io.gpumem.trace.analysis.StateAnalysis;
import io.gpumem.trace.analysis.StateAnalyzer;
import io.gpumem.trace.category.CategoryPrinter;
import io.gpumem.trace.category.PeakCategories;
import io.gpumem.trace.io.AllocatorSnapshots;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.session.TraceSession;
import io.gpumem.trace.workload.TrainingWorkload;
import io.gpumem.trace.workload.WorkloadWhatIf;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/**
 * {@code gpumem demo}: the main job end to end. Generates a transformer training workload whose sequence
 * length varies per step, runs it on a simulated device under the default allocator configuration and the
 * alternatives, prints the compare table, analyses the default run's final state (at its OOM, if it hit
 * one) with recommendations backed by the compare runs, what the live bytes are for at the peak and at the OOM with
 * the remedies ranked ({@link PeakCategories}), and writes the default run's memory snapshot as a
 * PyTorch pickle that {@code gpumem analyze} and pytorch.org/memory_viz read.
 */
@Command(
        name = "demo",
        mixinStandardHelpOptions = true,
        description =
                "Generate a realistic training workload, run it under the default allocator config and the"
                        + " alternatives on a simulated GPU, print the comparison and the analysis, and write a snapshot pickle.")
public final class DemoCommand extends GpumemCommand {
    /** Where the workload's flags start: their defaults are {@link TrainingWorkload.Builder}'s, stated there only. */
    private static final TrainingWorkload.Builder DEFAULTS = TrainingWorkload.builder();

    @Option(
            names = "--capacity",
            defaultValue = "24GiB",
            paramLabel = "SIZE",
            converter = SizeConverter.class,
            description = "Simulated device capacity, at most 32 TiB (default: ${DEFAULT-VALUE}).")
    long capacityBytes;

    @Option(
            names = "--held-outside",
            defaultValue = "0",
            paramLabel = "SIZE",
            converter = SizeConverter.OrZero.class,
            description = "Device memory held by others (CUDA context, other processes) (default: ${DEFAULT-VALUE}).")
    long outsideBytes;

    @Option(names = "--layers", description = "Transformer layers (default: ${DEFAULT-VALUE}).")
    int layers = DEFAULTS.layers();

    @Option(names = "--hidden", description = "Hidden width (default: ${DEFAULT-VALUE}).")
    int hidden = DEFAULTS.hidden();

    @Option(names = "--heads", description = "Attention heads (default: ${DEFAULT-VALUE}).")
    int heads = DEFAULTS.heads();

    @Option(names = "--vocab", description = "Vocabulary size (default: ${DEFAULT-VALUE}).")
    int vocab = DEFAULTS.vocab();

    @Option(names = "--batch", description = "Sequences per step (default: ${DEFAULT-VALUE}).")
    int batch = DEFAULTS.batch();

    @Option(names = "--seq-min", description = "Shortest sequence (default: ${DEFAULT-VALUE}).")
    int seqMin = DEFAULTS.minSeqLen();

    @Option(names = "--seq-max", description = "Longest sequence (default: ${DEFAULT-VALUE}).")
    int seqMax = DEFAULTS.maxSeqLen();

    @Option(
            names = "--seq-multiple",
            description = "Sequence lengths are multiples of this (default: ${DEFAULT-VALUE}).")
    int seqMultiple = DEFAULTS.seqLenMultiple();

    @Option(names = "--steps", description = "Training steps (default: ${DEFAULT-VALUE}).")
    int steps = DEFAULTS.steps();

    @Option(names = "--seed", description = "Seed of the sequence-length draws (default: ${DEFAULT-VALUE}).")
    long seed = DEFAULTS.seed();

    @Option(
            names = "--config",
            paramLabel = "CONF",
            description = "Alternative PYTORCH_CUDA_ALLOC_CONF to compare with the defaults; repeatable"
                    + " (default: expandable_segments:True, max_split_size_mb:256, roundup_power2_divisions:4).")
    List<String> configs;

    @Option(
            names = "--spill",
            description =
                    "Also run the workload on a spilling allocator: OOMs become spills of optimizer states, activations, weights, gradients.")
    boolean spill;

    @Option(names = "--no-min-capacity", description = "Skip the minimum-capacity search (faster).")
    boolean noMinCapacity;

    @Mixin
    PolicyOptions policies;

    @Option(
            names = "--snapshot",
            defaultValue = "gpumem-demo-snapshot.pickle",
            paramLabel = "FILE",
            description = "Where to write the default run's snapshot pickle (default: ${DEFAULT-VALUE}).")
    Path snapshot;

    @Option(
            names = "--html",
            paramLabel = "FILE",
            description =
                    "Where to write the HTML report of the default run (default: beside the snapshot, its name with"
                            + " .html, e.g. gpumem-demo-snapshot.html).")
    Path html;

    @Override
    public Integer call() throws Exception {
        PrintWriter out = out();
        try {
            WorkloadWhatIf.checkCapacity("--capacity", capacityBytes);
        } catch (IllegalArgumentException e) {
            throw new CommandLine.ParameterException(spec.commandLine(), e.getMessage());
        }
        if (outsideBytes >= capacityBytes) {
            throw new CommandLine.ParameterException(
                    spec.commandLine(),
                    "--held-outside " + ByteSize.formatSigned(outsideBytes) + " must be below --capacity "
                            + ByteSize.formatSigned(capacityBytes));
        }
        OutputFile.check("--snapshot", snapshot);
        // the page must not take the snapshot's place either: both are written by the same run
        OutputFile.check(html != null ? "--html" : "the page's default name (--html names another)", page(), snapshot);
        List<PolicySpec> policySpecs = policies.specs();
        List<String> alternatives = configs != null ? configs : WorkloadWhatIf.DEMO_ALTERNATIVES;
        AllocatorOptions.configs(alternatives); // refuses a bad one as every command does, before any output
        TrainingWorkload workload;
        try {
            workload = TrainingWorkload.builder()
                    .layers(layers)
                    .hidden(hidden)
                    .heads(heads)
                    .vocab(vocab)
                    .batch(batch)
                    .seqLens(seqMin, seqMax, seqMultiple)
                    .steps(steps)
                    .seed(seed)
                    .build();
        } catch (IllegalArgumentException e) {
            throw new CommandLine.ParameterException(spec.commandLine(), e.getMessage());
        }
        out.println("gpumem demo: " + workload.describe());
        out.println("sequence lengths per step: " + Arrays.toString(workload.seqLens()));
        out.println("simulated device: " + ByteSize.formatSigned(capacityBytes)
                + (outsideBytes > 0 ? ", " + ByteSize.formatSigned(outsideBytes) + " held outside the allocator" : "")
                + "; " + workload.stream().length() + " allocator calls; peak live tensors "
                + ByteSize.formatSigned(workload.peakLiveBytes()));
        out.println();

        WorkloadWhatIf whatIf = new WorkloadWhatIf(workload, capacityBytes, outsideBytes, !noMinCapacity);
        List<RunOutcome> rows = new ArrayList<>();
        rows.add(whatIf.run(""));
        for (String conf : alternatives) {
            rows.add(whatIf.run(conf));
        }
        for (String policy : WorkloadWhatIf.demoPolicies()) {
            rows.add(whatIf.run(PolicySpec.parse(policy)));
        }
        out.println("comparison (" + workload.settings().steps() + " steps on " + ByteSize.formatSigned(capacityBytes)
                + "):");
        AnalysisPrinter.printOutcomes(rows, out);
        whatIf.minCapacityNotSearched().ifPresent(why -> out.println("note: " + why));
        out.println();

        RunOutcome baseline = whatIf.runWithHistory("");
        RequestStream requests = whatIf.stream();
        int failed = baseline.failedOp();
        OomEvent oom =
                baseline.completed() ? null : OomEvent.replayed(baseline.oomReport(), requests.stream(failed), -1);
        String label = baseline.completed()
                ? "default config, end of the run"
                : "default config, at the OOM " + whenFailed(requests, failed, baseline.stepsCompleted())
                        + " (allocating " + workload.tensorName(requests.slot(failed)) + ")";
        MemoryState state = AllocatorStates.capture(baseline.allocator(), baseline.label(), label, oom);
        StateAnalysis analysis = new StateAnalyzer().analyze(state);
        AnalysisPrinter.printState(analysis, out);
        Recommender.Result recs = new Recommender().recommend(analysis, whatIf, policySpecs);
        AnalysisPrinter.printRecommendations(recs, out);
        // the pickle first: each snapshot() records a snapshot entry, and the page shows the trace taken after it
        try {
            AllocatorSnapshots.write(baseline.allocator().snapshot(), snapshot);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write the snapshot to " + snapshot + ": " + e, e);
        }
        TraceSnapshot trace =
                AllocatorSnapshots.toTraceSnapshot(baseline.allocator().snapshot(), "gpumem demo");
        DeviceAnalysis result = new DeviceAnalysis(0, trace.traceOf(0).size(), analysis, whatIf, recs, List.of());
        // the workload knows its layers: the checkpointing model needs no assumption here
        PeakCategories categories = PeakCategories.of(trace, 0, result, layers);
        CategoryPrinter.print(categories, out);
        if (spill) {
            out.println();
            SpillDemo.run(workload, capacityBytes, outsideBytes, out);
        }

        out.println();
        out.println("snapshot of the default run written to " + snapshot.toAbsolutePath() + " (gpumem analyze "
                + snapshot + "; or drag it onto pytorch.org/memory_viz)");
        Path page = page();
        HtmlOutput.write(
                new HtmlReport("gpumem demo: " + workload.describe())
                        .addDevice(TraceSession.of(trace), result, rows, categories),
                page,
                out);
        out.flush();
        return 0;
    }

    /**
     * When op {@code failed} ran: "in step N of S", or, before the stream's first STEP mark (the model's weights),
     * "while building the model (before step 1)", where counting steps would name a step that had not begun.
     */
    private String whenFailed(RequestStream requests, int failed, int stepsCompleted) {
        return beforeFirstStep(requests, failed)
                ? SpillDemo.BEFORE_STEP_1
                : "in step " + (stepsCompleted + 1) + " of " + steps;
    }

    /** Whether op {@code k} comes before the stream's first STEP mark. */
    static boolean beforeFirstStep(RequestStream requests, int k) {
        for (int i = 0; i < k; i++) {
            if (requests.op(i) == RequestStream.STEP) {
                return false;
            }
        }
        return true;
    }

    /** Where the HTML report goes: {@code --html}, else beside the snapshot. */
    private Path page() {
        return html != null ? html : HtmlOutput.sibling(snapshot);
    }
}
