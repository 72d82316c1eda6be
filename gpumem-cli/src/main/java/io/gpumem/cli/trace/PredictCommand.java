package io.gpumem.cli.trace;

import io.gpumem.cli.GpumemCommand;
import io.gpumem.cli.SizeConverter;
import io.gpumem.cli.options.BadInputException;
import io.gpumem.cli.options.CapacityOptions;
import io.gpumem.cli.options.OutputFile;
import io.gpumem.cli.options.ReadLimitOptions;
import io.gpumem.cli.options.SnapshotChecks;
import io.gpumem.cli.options.TraceDeviceOption;
import io.gpumem.cli.options.WhatIfOptions;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.engine.RunOutcome;
import io.gpumem.policy.PolicySpec;
import io.gpumem.size.ByteSize;
import io.gpumem.trace.align.CapacityFit;
import io.gpumem.trace.align.PredictedRecording;
import io.gpumem.trace.align.RecordingFamily;
import io.gpumem.trace.align.SizeLaws;
import io.gpumem.trace.io.PytorchSnapshotWriter;
import io.gpumem.trace.io.ReadLimits;
import io.gpumem.trace.io.TraceFormatException;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.replay.OracleDevice;
import io.gpumem.trace.replay.ProgressListener;
import io.gpumem.trace.session.CompareRuns;
import io.gpumem.trace.session.TraceSession;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

/**
 * {@code gpumem predict A.pickle@128 B.pickle@256 --at 512}: fits each aligned request's size law over the labelled
 * recordings ({@link RecordingFamily}, {@link SizeLaws}), plays the program at the target value into a recording
 * ({@link PredictedRecording}, written with {@code --out}) and replays it as compare does (the same rows and JSON
 * keys, the recorded configuration first), adding how many requests a law predicted; with three or more recordings
 * the text also gives each one's leave-one-out error. {@code --fit CAPACITY} instead searches, per configuration and
 * policy, the largest value that runs on that capacity ({@link CapacityFit}). Bad input (fewer than two recordings,
 * a missing label, equal labels, an inconsistent snapshot unless {@code --lenient}, unrelated programs, a law that
 * gives no positive size at the target, requests no simulated device holds) is thrown and reported with exit 2
 * before anything is written.
 */
@Command(
        name = "predict",
        mixinStandardHelpOptions = true,
        description = {
            "Predict the memory of a size never run: align two or more recordings of one program, each"
                    + " labelled with its value (FILE@VALUE, e.g. a context length or batch size), fit every request's"
                    + " size as an exact law of the value, play the program at --at and replay it as compare does;"
                    + " or, with --fit CAPACITY, find the largest value that fits."
        })
public final class PredictCommand extends GpumemCommand {

    @Parameters(
            paramLabel = "FILE@VALUE",
            arity = "0..*",
            description = "Recordings of one program, each with the value it was recorded at; the one nearest the"
                    + " target is the reference whose requests, order and start the prediction follows.")
    List<String> inputs = new ArrayList<>();

    @Option(
            names = "--at",
            paramLabel = "VALUE",
            description = "The value to predict at (1 or more; below, between or above the recorded ones).")
    Long at;

    @Option(
            names = "--fit",
            paramLabel = "CAPACITY",
            converter = SizeConverter.class,
            description = "Instead of --at: per configuration and policy, the largest value whose predicted run"
                    + " completes on a device of CAPACITY (e.g. 80GiB), with its minimum capacity.")
    Long fitCapacity;

    @Option(
            names = "--step",
            paramLabel = "N",
            defaultValue = "1",
            description = "With --fit: the values tried are multiples of N (default: ${DEFAULT-VALUE}).")
    long step;

    @Option(
            names = "--out",
            paramLabel = "FILE",
            description = "With --at: write the predicted recording as a PyTorch snapshot pickle (default: none).")
    Path outFile;

    @Mixin
    CapacityOptions capacity;

    @Option(
            names = "--json",
            description = "Print compare's JSON array, each row with at, predicted_requests and"
                    + " unpredicted_requests added (with --fit: one row per configuration and policy).")
    boolean json;

    @Mixin
    WhatIfOptions whatIf;

    @Mixin
    ReadLimitOptions readLimits;

    @Mixin
    TraceDeviceOption traceDevice;

    @Mixin
    SnapshotChecks checks;

    @Override
    public Integer call() {
        PrintWriter out = out();
        if (inputs.size() < 2) {
            throw new BadInputException("needs two or more labelled recordings (FILE@VALUE), got " + inputs.size()
                    + (inputs.isEmpty() ? "" : " (" + inputs.get(0) + ")"));
        }
        if ((at == null) == (fitCapacity == null)) {
            throw new BadInputException("give either --at VALUE (predict at a value) or --fit CAPACITY (find the"
                    + " largest value that fits)");
        }
        if (at != null && at < 1) {
            throw new BadInputException("--at must be 1 or more, got " + at);
        }
        if (fitCapacity != null && fitCapacity <= 0) {
            throw new BadInputException("--fit must be a positive size, got " + fitCapacity);
        }
        if (step < 1) {
            throw new BadInputException("--step must be 1 or more, got " + step);
        }
        if (outFile != null && at == null) {
            throw new BadInputException("--out goes with --at: it writes the recording predicted at that value");
        }
        if (at != null && spec.commandLine().getParseResult().hasMatchedOption("--step")) {
            throw new BadInputException("--step goes with --fit: it spaces the values the search tries");
        }
        long[] labels = new long[inputs.size()];
        Path[] files = new Path[inputs.size()];
        for (int i = 0; i < inputs.size(); i++) {
            String arg = inputs.get(i);
            int sep = arg.lastIndexOf('@');
            if (sep <= 0 || sep == arg.length() - 1) {
                throw new BadInputException(arg + ": expected FILE@VALUE, e.g. run.pickle@128");
            }
            files[i] = Path.of(arg.substring(0, sep));
            try {
                labels[i] = Long.parseLong(arg.substring(sep + 1));
            } catch (NumberFormatException e) {
                throw new BadInputException(arg + ": the value after @ must be an integer");
            }
            if (labels[i] < 1) {
                // the values are sizes (a batch, a length), as --at's are
                throw new BadInputException(arg + ": the value after @ must be 1 or more, got " + labels[i]);
            }
        }
        if (outFile != null) {
            OutputFile.check("--out", outFile, files);
        }
        List<AllocatorConfig> others = whatIf.configs();
        List<PolicySpec> policySpecs = whatIf.policies();
        ReadLimits limits = readLimits.limits();
        List<TraceSession> sessions = new ArrayList<>();
        List<TraceSnapshot> traces = new ArrayList<>();
        for (Path file : files) {
            try {
                TraceSession session = TraceSession.open(file, limits);
                // the start state is rebuilt from the end-state segments, as diff and compare rebuild it: an
                // inconsistent snapshot would make a prediction from a start that no allocator was in
                checks.check(session.trace(), err());
                sessions.add(session);
                traces.add(session.trace());
            } catch (TraceFormatException | IllegalArgumentException | IllegalStateException e) {
                throw bad(file, e);
            }
        }
        warnOfMixedConfigurations(files, sessions);
        RecordingFamily family;
        try {
            family = RecordingFamily.of(traces, labels, traceDevice.orElse(() -> -1));
        } catch (IllegalArgumentException e) {
            throw new BadInputException(e.getMessage());
        }
        if (fitCapacity != null) {
            return fit(out, family, others, policySpecs);
        }
        long target = at;
        PredictedRecording predicted;
        SizeLaws laws;
        try {
            laws = family.lawsFor(target);
            predicted = family.predict(target);
        } catch (IllegalArgumentException e) {
            throw new BadInputException(e.getMessage());
        }
        TraceSession session = predicted.session();
        List<AllocatorConfig> all = new ArrayList<>();
        all.add(session.recordedConfig());
        all.addAll(others);
        CompareRuns runs = session.compare(
                0, all, policySpecs, capacity.given(), TerminalProgress.forTerminal("predict", "configurations"));
        long deviceCapacity = capacity.given() != null ? capacity.given() : session.recordedCapacity(0);
        List<RunOutcome> rows = runs.rows();
        if (outFile != null) {
            try {
                new PytorchSnapshotWriter().write(predicted.trace(), outFile);
            } catch (IOException e) {
                throw new UncheckedIOException("--out " + outFile + ": " + e.getMessage(), e);
            }
        }
        if (json) {
            out.println(json(rows, predicted));
        } else {
            out.println("predicted at " + predicted.at() + " from " + family.size() + " recordings (reference "
                    + laws.reference().source() + "): " + predicted.predictedRequests()
                    + " requests predicted by a law, "
                    + predicted.unpredictedRequests() + " kept at the reference's size; " + predicted.startBlocks()
                    + " blocks live at the start (" + predicted.startBlocksScaled() + " scaled, "
                    + predicted.startBlocksKept() + " scaling without a law, kept), "
                    + (predicted.warmUpPasses() == 0
                            ? "a cold start (the reference starts with nothing reserved)"
                            : "the cache warmed by " + predicted.warmUpPasses() + " predicted passes")
                    + "; laws " + laws.kindCounts()
                    + "; capacity " + ByteSize.format(deviceCapacity)
                    + (outFile == null ? "" : "; written to " + outFile)
                    // replay --check assumes its default device, which sizes expandable reservations: say so when
                    // the prediction needed a larger one
                    + (predicted.deviceBytes() == OracleDevice.DEFAULT_TOTAL_MEMORY
                            ? ""
                            : "; played on a device of " + ByteSize.format(predicted.deviceBytes())
                                    + " (replay --check it with --capacity " + predicted.deviceBytes() + ")"));
            out.print(CompareCommand.table(rows));
            if (family.size() >= 3) {
                leaveOneOut(out, family, laws, sessions);
            }
        }
        out.flush();
        return 0;
    }

    private static BadInputException bad(Path file, RuntimeException e) {
        String msg = e.getMessage() == null ? e.toString() : e.getMessage();
        return new BadInputException(msg.contains(file.toString()) ? msg : file + ": " + msg);
    }

    /**
     * Each recording predicted from the others (the reference nearest it): the fraction of its request sizes the
     * others' laws give exactly, and the error of the predicted peak allocated and minimum capacity against
     * compare's recorded-configuration row for the real recording.
     */
    private static void leaveOneOut(
            PrintWriter out, RecordingFamily family, SizeLaws laws, List<TraceSession> sessions) {
        out.println("leave-one-out (each recording predicted from the others; recorded configuration):");
        for (int j = 0; j < family.size(); j++) {
            long label = family.label(j);
            SizeLaws.LeaveOneOut sizes = null;
            for (int i = 0; i < laws.recordings().size(); i++) {
                if (laws.label(i) == label) {
                    sizes = laws.leaveOneOut(i);
                }
            }
            String name = Path.of(family.trace(j).source()).getFileName() + "@" + label;
            String exact = sizes == null
                    ? ""
                    : String.format(
                            Locale.ROOT,
                            " sizes exact %d/%d (%.1f%%),",
                            sizes.exact(),
                            sizes.rows(),
                            100 * sizes.exactFraction());
            RunOutcome predicted;
            try {
                TraceSession p = family.without(j).predict(label).session();
                predicted = p.compare(0, List.of(p.recordedConfig()), List.of(), null, ProgressListener.NONE)
                        .rows()
                        .getFirst();
            } catch (IllegalArgumentException e) {
                out.println("  " + name + ":" + exact + " no prediction: " + e.getMessage());
                continue;
            }
            TraceSession real = sessions.get(j);
            RunOutcome r = real.compare(
                            family.recording(j).device(),
                            List.of(real.recordedConfig()),
                            List.of(),
                            null,
                            ProgressListener.NONE)
                    .rows()
                    .getFirst();
            out.println(String.format(
                    Locale.ROOT,
                    "  %s:%s peak allocated %s vs %s (%+.2f%%), min capacity %s vs %s (%+.2f%%)",
                    name,
                    exact,
                    ByteSize.format(predicted.peakAllocated()),
                    ByteSize.format(r.peakAllocated()),
                    100.0 * (predicted.peakAllocated() - r.peakAllocated()) / r.peakAllocated(),
                    ByteSize.format(predicted.minCapacity()),
                    ByteSize.format(r.minCapacity()),
                    100.0 * (predicted.minCapacity() - r.minCapacity()) / r.minCapacity()));
        }
    }

    private int fit(PrintWriter out, RecordingFamily family, List<AllocatorConfig> others, List<PolicySpec> policies) {
        long t0 = System.nanoTime();
        CapacityFit search;
        List<CapacityFit.LargestValue> rows;
        try {
            search = CapacityFit.of(family, fitCapacity, step);
            // the recorded row is CapacityFit's: each value under its reference's configuration, as --at runs it
            rows = search.rows(others, policies);
        } catch (IllegalArgumentException e) {
            throw new BadInputException(e.getMessage());
        }
        double seconds = (System.nanoTime() - t0) / 1e9;
        CapacityFit.SearchCost cost = search.cost();
        if (json) {
            out.println(Json.line(g -> {
                g.writeStartArray();
                for (CapacityFit.LargestValue r : rows) {
                    g.writeStartObject();
                    g.writeStringField("config", r.config());
                    g.writeStringField("policy", r.policy());
                    g.writeNumberField("fit_capacity", fitCapacity);
                    g.writeNumberField("step", step);
                    g.writeNumberField("largest_value", r.value());
                    if (r.outcome() != null) {
                        g.writeNumberField("min_capacity", r.outcome().minCapacity());
                        g.writeNumberField("peak_allocated", r.outcome().peakAllocated());
                        g.writeNumberField("peak_reserved", r.outcome().peakReserved());
                    } else {
                        g.writeNullField("min_capacity");
                        g.writeNullField("peak_allocated");
                        g.writeNullField("peak_reserved");
                    }
                    g.writeEndObject();
                }
                g.writeEndArray();
            }));
        } else {
            out.println(String.format(
                    Locale.ROOT,
                    "largest value that fits in %s (multiples of %d) from %d recordings: %d value%s predicted,"
                            + " %d replay%s, %.1f s",
                    ByteSize.format(fitCapacity),
                    step,
                    family.size(),
                    cost.valuesPredicted(),
                    cost.valuesPredicted() == 1 ? "" : "s",
                    cost.replays(),
                    cost.replays() == 1 ? "" : "s",
                    seconds));
            List<String[]> table = new ArrayList<>();
            table.add(new String[] {"config", "largest value", "min capacity", "peak allocated", "peak reserved"});
            for (CapacityFit.LargestValue r : rows) {
                RunOutcome o = r.outcome();
                String label =
                        o != null ? CompareRuns.label(o) : CompareRuns.label(r.policy(), r.config(), r.recorded());
                table.add(new String[] {
                    label,
                    r.value() == 0 ? "none (not even " + step + ")" : Long.toString(r.value()),
                    o == null ? "-" : ByteSize.format(o.minCapacity()),
                    o == null ? "-" : ByteSize.format(o.peakAllocated()),
                    o == null ? "-" : ByteSize.format(o.peakReserved())
                });
            }
            out.print(Table.render(table));
        }
        out.flush();
        return 0;
    }

    static String json(List<RunOutcome> rows, PredictedRecording p) {
        return Json.line(g -> {
            g.writeStartArray();
            for (RunOutcome r : rows) {
                g.writeStartObject();
                CompareCommand.writeRowFields(g, r);
                g.writeNumberField("at", p.at());
                g.writeNumberField("predicted_requests", p.predictedRequests());
                g.writeNumberField("unpredicted_requests", p.unpredictedRequests());
                g.writeEndObject();
            }
            g.writeEndArray();
        });
    }

    /**
     * Warns when the recordings were made under different allocator configurations: the program's requests do not
     * depend on it, so they still make one family, but the recorded row of each value runs under the configuration
     * of the recording it is predicted from, so rows at different values may use different configurations.
     */
    private void warnOfMixedConfigurations(Path[] files, List<TraceSession> sessions) {
        AllocatorConfig first = sessions.getFirst().recordedConfig();
        if (sessions.stream().allMatch(s -> s.recordedConfig().equals(first))) {
            return;
        }
        List<String> each = new ArrayList<>();
        for (int i = 0; i < sessions.size(); i++) {
            String conf = sessions.get(i).recordedConfig().toConfString();
            each.add(files[i].getFileName() + ": " + (conf.isEmpty() ? "defaults" : conf));
        }
        err().println("warning: the recordings were made under different allocator configurations ("
                + String.join("; ", each) + "); the recorded row runs each value under the configuration of the"
                + " recording it is predicted from");
    }
}
