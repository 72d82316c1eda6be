package io.gpumem.cli.trace;

import io.gpumem.cli.GpumemCommand;
import io.gpumem.cli.options.BadInputException;
import io.gpumem.cli.options.CapacityOptions;
import io.gpumem.cli.options.ReadLimitOptions;
import io.gpumem.cli.options.WhatIfOptions;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.engine.RunOutcome;
import io.gpumem.policy.PolicySpec;
import io.gpumem.size.ByteSize;
import io.gpumem.trace.align.FrameSignatures;
import io.gpumem.trace.align.PredictedRecording;
import io.gpumem.trace.align.RecordingDiff;
import io.gpumem.trace.align.RequestSequence;
import io.gpumem.trace.align.SizeLaws;
import io.gpumem.trace.io.ReadLimits;
import io.gpumem.trace.io.TraceFormatException;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.session.CompareRuns;
import io.gpumem.trace.session.TraceSession;
import java.io.PrintWriter;
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
 * recordings ({@link SizeLaws}), writes the recording at the target value ({@link PredictedRecording}) and replays
 * it as compare does (the same rows and JSON keys, the recorded configuration first), adding how many requests a
 * law predicted. Bad input (fewer than two recordings, a missing label, equal labels, unrelated programs, a law that
 * gives no positive size at the target) is thrown and reported with exit 2.
 */
@Command(
        name = "predict",
        mixinStandardHelpOptions = true,
        description = {
            "Predict the memory of a size never run: align two or more recordings of one program, each"
                    + " labelled with its value (FILE@VALUE, e.g. a context length or batch size), fit every request's"
                    + " size as an exact law of the value, write the requests at --at and replay them as compare does."
        })
public final class PredictCommand extends GpumemCommand {

    @Parameters(
            paramLabel = "FILE@VALUE",
            arity = "0..*",
            description =
                    "Recordings of one program, each with the value it was recorded at; the first is the reference"
                            + " whose request order the prediction follows.")
    List<String> inputs = new ArrayList<>();

    @Option(names = "--at", paramLabel = "VALUE", required = true, description = "The value to predict at (1 or more).")
    long at;

    @Mixin
    CapacityOptions capacity;

    @Option(
            names = "--json",
            description = "Print compare's JSON array, each row with at, predicted_requests and"
                    + " unpredicted_requests added.")
    boolean json;

    @Mixin
    WhatIfOptions whatIf;

    @Mixin
    ReadLimitOptions readLimits;

    @Override
    public Integer call() {
        PrintWriter out = out();
        if (inputs.size() < 2) {
            throw new BadInputException("needs two or more labelled recordings (FILE@VALUE), got " + inputs.size()
                    + (inputs.isEmpty() ? "" : " (" + inputs.get(0) + ")"));
        }
        if (at < 1) {
            throw new BadInputException("--at must be 1 or more, got " + at);
        }
        List<AllocatorConfig> others = whatIf.configs();
        List<PolicySpec> policySpecs = whatIf.policies();
        ReadLimits limits = readLimits.limits();
        FrameSignatures signatures = new FrameSignatures();
        List<RequestSequence> recordings = new ArrayList<>();
        List<TraceSession> sessions = new ArrayList<>();
        long[] labels = new long[inputs.size()];
        for (int i = 0; i < inputs.size(); i++) {
            String arg = inputs.get(i);
            int sep = arg.lastIndexOf('@');
            if (sep <= 0 || sep == arg.length() - 1) {
                throw new BadInputException(arg + ": expected FILE@VALUE, e.g. run.pickle@128");
            }
            try {
                labels[i] = Long.parseLong(arg.substring(sep + 1));
            } catch (NumberFormatException e) {
                throw new BadInputException(arg + ": the value after @ must be an integer");
            }
        }
        // the reference (whose requests, order and start the prediction follows) is the recording nearest the
        // target, the larger on a tie: requests that appear only at some sizes are most likely those of the
        // nearest one
        int nearest = 0;
        for (int i = 1; i < labels.length; i++) {
            long d = Math.abs(labels[i] - at);
            long best = Math.abs(labels[nearest] - at);
            if (d < best || (d == best && labels[i] > labels[nearest])) {
                nearest = i;
            }
        }
        List<String> ordered = new ArrayList<>(inputs);
        ordered.add(0, ordered.remove(nearest));
        long label0 = labels[nearest];
        System.arraycopy(labels, 0, labels, 1, nearest);
        labels[0] = label0;
        for (int i = 0; i < ordered.size(); i++) {
            String arg = ordered.get(i);
            Path file = Path.of(arg.substring(0, arg.lastIndexOf('@')));
            try {
                TraceSession session = TraceSession.open(file, limits);
                int d = session.busiestDevice();
                recordings.add(RequestSequence.of(session.trace(), d, signatures));
                sessions.add(session);
            } catch (TraceFormatException | IllegalArgumentException | IllegalStateException e) {
                String msg = e.getMessage() == null ? e.toString() : e.getMessage();
                throw new BadInputException(msg.contains(file.toString()) ? msg : file + ": " + msg);
            }
        }
        TraceSnapshot reference = sessions.get(0).trace();
        int referenceDevice = recordings.get(0).device();
        SizeLaws laws;
        try {
            laws = SizeLaws.fit(recordings, labels);
        } catch (IllegalArgumentException e) {
            throw new BadInputException(e.getMessage());
        }
        for (int j = 1; j < recordings.size(); j++) {
            var al = laws.alignment(j);
            if (al.matchedFractionOfSmaller() < RecordingDiff.SAME_PROGRAM) {
                throw new BadInputException(String.format(
                        Locale.ROOT,
                        "%s and %s do not look like the same program:"
                                + " only %.1f%% of the smaller one's requests match",
                        recordings.get(0).source(),
                        recordings.get(j).source(),
                        100 * al.matchedFractionOfSmaller()));
            }
        }
        PredictedRecording predicted;
        try {
            predicted = PredictedRecording.of(laws, reference, referenceDevice, at);
        } catch (IllegalArgumentException e) {
            throw new BadInputException(e.getMessage());
        }
        TraceSession session = TraceSession.of(predicted.trace());
        List<AllocatorConfig> all = new ArrayList<>();
        all.add(session.recordedConfig());
        all.addAll(others);
        CompareRuns runs = session.compare(
                0, all, policySpecs, capacity.given(), TerminalProgress.forTerminal("predict", "configurations"));
        long deviceCapacity = capacity.given() != null ? capacity.given() : session.recordedCapacity(0);
        List<RunOutcome> rows = runs.rows();
        if (json) {
            out.println(json(rows, predicted));
        } else {
            out.println("predicted at " + predicted.at() + " from " + recordings.size() + " recordings (reference "
                    + recordings.get(0).source() + "): " + predicted.predictedRequests()
                    + " requests predicted by a law, "
                    + predicted.unpredictedRequests() + " kept at the reference's size; " + predicted.startBlocks()
                    + " blocks live at the start (" + predicted.startBlocksScaled() + " scaled, "
                    + predicted.startBlocksKept() + " scaling without a law, kept), the cache warmed by "
                    + (PredictedRecording.PASSES - 1) + " predicted passes; laws " + laws.kindCounts()
                    + "; capacity " + ByteSize.format(deviceCapacity));
            out.print(CompareCommand.table(rows));
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
}
