package io.gpumem.cli.trace;

import com.fasterxml.jackson.core.JsonGenerator;
import io.gpumem.cli.GpumemCommand;
import io.gpumem.cli.options.BadInputException;
import io.gpumem.cli.options.OutputFile;
import io.gpumem.cli.options.ReadLimitOptions;
import io.gpumem.cli.options.SnapshotChecks;
import io.gpumem.cli.options.TraceDeviceOption;
import io.gpumem.cli.report.HtmlOutput;
import io.gpumem.report.DiffReport;
import io.gpumem.size.ByteSize;
import io.gpumem.trace.align.FrameSignatures;
import io.gpumem.trace.align.RecordingDiff;
import io.gpumem.trace.align.RequestAlignment;
import io.gpumem.trace.align.RequestSequence;
import io.gpumem.trace.io.ReadLimits;
import io.gpumem.trace.io.TraceFormatException;
import io.gpumem.trace.session.TraceSession;
import java.io.IOException;
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
 * {@code gpumem diff A B}: aligns the allocation requests of two recordings of one program (e.g. at two sizes) and
 * says which allocation sites make their peaks differ. The work is {@link RequestAlignment} and
 * {@link RecordingDiff}; this class reads the two files, refuses bad input (exit 2, naming the file) and prints.
 * Two recordings that match little are reported as such, without a per-site story. {@code --html FILE} also writes
 * the same diff as a page ({@link DiffReport}); its path is checked before any file is read.
 */
@Command(
        name = "diff",
        mixinStandardHelpOptions = true,
        description = {
            "Align the allocation requests of two recordings of the same program (e.g. at two batch sizes or"
                    + " context lengths) and show matched / only-in-A / only-in-B requests, and per allocation site the"
                    + " bytes and what it holds at each peak: the sites that explain the difference in peak allocated and"
                    + " peak reserved."
        })
public final class DiffCommand extends GpumemCommand {

    /** Sites the text output lists. */
    private static final int SHOWN_SITES = 12;

    @Parameters(
            paramLabel = "FILE",
            arity = "0..*",
            description =
                    "The two recordings: PyTorch snapshot pickles with a trace (or any trace format gpumem reads).")
    List<Path> files = new ArrayList<>();

    @Mixin
    TraceDeviceOption traceDevice;

    @Option(
            names = "--json",
            description = "Print one JSON object: requests_a, requests_b, matched, only_a, only_b,"
                    + " matched_fraction, same_program, signal, peak_allocated_a/b, peak_reserved_a/b, cached_at_peak_reserved_a/b,"
                    + " sites (largest difference at peak allocated first).")
    boolean json;

    @Option(
            names = "--html",
            paramLabel = "FILE",
            description = "Also write the comparison as a self-contained HTML page (the report's look): the counts, the"
                    + " peaks, every site largest difference first, and where fragmentation differs.")
    Path html;

    @Mixin
    ReadLimitOptions readLimits;

    @Mixin
    SnapshotChecks checks;

    @Override
    public Integer call() {
        PrintWriter out = out();
        PrintWriter err = err();
        if (files.size() != 2) {
            err.println("gpumem diff: needs exactly two recordings to compare, got " + files.size()
                    + (files.isEmpty() ? "" : " (" + files.get(0) + (files.size() > 2 ? ", ..." : "") + ")"));
            return 2;
        }
        ReadLimits limits;
        try {
            limits = readLimits.limits();
        } catch (BadInputException e) {
            err.println("gpumem diff: " + e.getMessage());
            return 2;
        }
        if (html != null) {
            OutputFile.check("--html", html, files.toArray(Path[]::new));
        }
        FrameSignatures signatures = new FrameSignatures();
        RequestSequence[] seq = new RequestSequence[2];
        for (int i = 0; i < 2; i++) {
            Path file = files.get(i);
            try {
                TraceSession session = TraceSession.open(file, limits);
                checks.check(session.trace(), err);
                int d = traceDevice.orElse(session::busiestDevice);
                seq[i] = RequestSequence.of(session.trace(), d, signatures);
            } catch (TraceFormatException | IllegalArgumentException | IllegalStateException e) {
                String msg = e.getMessage() == null ? e.toString() : e.getMessage();
                err.println("gpumem diff: " + (msg.contains(file.toString()) ? msg : file + ": " + msg));
                return 2;
            }
        }
        RequestAlignment alignment = RequestAlignment.align(seq[0], seq[1]);
        RecordingDiff diff = RecordingDiff.of(alignment);
        out.print(json ? json(diff) + "\n" : text(diff));
        if (html != null) {
            // with --json the line naming the page goes to stderr: stdout stays one JSON object
            HtmlOutput.write(new DiffReport(diff), html, json ? err : out);
        }
        out.flush();
        return 0;
    }

    static String text(RecordingDiff diff) {
        RequestAlignment al = diff.alignment();
        RequestSequence a = al.first();
        RequestSequence b = al.second();
        StringBuilder sb = new StringBuilder();
        sb.append("A ").append(a.source()).append(": ").append(a.size()).append(" requests\n");
        sb.append("B ").append(b.source()).append(": ").append(b.size()).append(" requests\n");
        sb.append(String.format(
                Locale.ROOT,
                "matched %d (%.1f%% of the smaller, by %s), only in A %d, only in B %d%n",
                al.matched(),
                100 * al.matchedFractionOfSmaller(),
                al.signal().words(),
                al.onlyInFirst(),
                al.onlyInSecond()));
        sb.append(String.format(
                Locale.ROOT,
                "peak allocated  A %s  B %s  (%s)%n",
                ByteSize.format(a.peakAllocated()),
                ByteSize.format(b.peakAllocated()),
                ByteSize.formatChange(b.peakAllocated() - a.peakAllocated())));
        sb.append(String.format(
                Locale.ROOT,
                "peak reserved   A %s  B %s  (%s)%n",
                RecordingDiff.reservedText(a, a.peakReserved()),
                RecordingDiff.reservedText(b, b.peakReserved()),
                diff.reservedRecorded() ? ByteSize.formatChange(b.peakReserved() - a.peakReserved()) : "n/a"));
        for (RequestSequence s : new RequestSequence[] {a, b}) {
            if (!s.reservedRecorded()) {
                sb.append(s == a ? "A" : "B")
                        .append(" records no driver calls (not a PyTorch snapshot): its reserved bytes are unknown\n");
            }
        }
        if (!diff.sameProgram()) {
            sb.append("these recordings do not look like the same program: ")
                    .append(RecordingDiff.matchedOfEach(al, "A", "B"))
                    .append(", so no per-site comparison is made\n");
            return sb.toString();
        }
        sb.append("cached, unused at peak reserved  A ")
                .append(cached(diff, 0))
                .append("  B ")
                .append(cached(diff, 1))
                .append('\n');
        for (RequestSequence s : new RequestSequence[] {a, b}) {
            String atStart = RecordingDiff.peakReservedAtStart(s, s == a ? "A" : "B");
            if (atStart != null) {
                sb.append(atStart).append('\n');
            }
        }
        sb.append("sites, largest difference at peak allocated first:\n");
        String[] head = {
            "site",
            "requests A",
            "requests B",
            "bytes A",
            "bytes B",
            "at peak alloc A",
            "at peak alloc B",
            "difference",
            "at peak reserved A",
            "at peak reserved B"
        };
        List<String[]> cells = new ArrayList<>();
        cells.add(head);
        int shown = 0;
        for (RecordingDiff.Site s : diff.sites()) {
            if (shown++ == SHOWN_SITES) {
                break;
            }
            cells.add(new String[] {
                s.name(),
                Long.toString(s.requests(0)),
                Long.toString(s.requests(1)),
                ByteSize.format(s.bytes(0)),
                ByteSize.format(s.bytes(1)),
                ByteSize.format(s.atPeakAllocated(0)),
                ByteSize.format(s.atPeakAllocated(1)),
                ByteSize.formatChange(s.peakAllocatedDifference()),
                RecordingDiff.reservedText(a, s.atPeakReserved(0)),
                RecordingDiff.reservedText(b, s.atPeakReserved(1))
            });
        }
        sb.append(Table.render(cells));
        if (diff.sites().size() > SHOWN_SITES) {
            sb.append("... ").append(diff.sites().size() - SHOWN_SITES).append(" more sites (--json lists all)\n");
        }
        double top = diff.shareOfPeakAllocatedDifference(3);
        if (!Double.isNaN(top)) {
            sb.append(String.format(
                    Locale.ROOT, "the first three sites make %.0f%% of the peak allocated difference%n", 100 * top));
        }
        return sb.toString();
    }

    private static double share(long part, long whole) {
        return whole == 0 ? 0 : (double) part / whole;
    }

    /** A side's cached, unused bytes at its peak reserved and their share of it, or "n/a". */
    private static String cached(RecordingDiff diff, int side) {
        RequestAlignment al = diff.alignment();
        RequestSequence s = side == 0 ? al.first() : al.second();
        if (!s.reservedRecorded()) {
            return "n/a";
        }
        long cached = diff.cachedAtPeakReserved(side);
        return String.format(
                Locale.ROOT,
                side == 0 ? "%s (%.3f of reserved)" : "%s (%.3f)",
                ByteSize.format(cached),
                share(cached, s.peakReserved()));
    }

    /** {@code bytes} of a reserved-memory figure of {@code s} as a JSON number, or null where it is unknown. */
    private static void reservedField(JsonGenerator g, String name, RequestSequence s, long bytes) throws IOException {
        if (s.reservedRecorded()) {
            g.writeNumberField(name, bytes);
        } else {
            g.writeNullField(name);
        }
    }

    static String json(RecordingDiff diff) {
        RequestAlignment al = diff.alignment();
        RequestSequence a = al.first();
        RequestSequence b = al.second();
        return Json.line(g -> {
            g.writeStartObject();
            g.writeStringField("a", a.source());
            g.writeStringField("b", b.source());
            g.writeNumberField("requests_a", a.size());
            g.writeNumberField("requests_b", b.size());
            g.writeNumberField("matched", al.matched());
            g.writeNumberField("only_a", al.onlyInFirst());
            g.writeNumberField("only_b", al.onlyInSecond());
            g.writeNumberField("matched_fraction", al.matchedFractionOfSmaller());
            g.writeBooleanField("same_program", diff.sameProgram());
            g.writeStringField("signal", al.signal().wireName());
            g.writeNumberField("peak_allocated_a", a.peakAllocated());
            g.writeNumberField("peak_allocated_b", b.peakAllocated());
            reservedField(g, "peak_reserved_a", a, a.peakReserved());
            reservedField(g, "peak_reserved_b", b, b.peakReserved());
            reservedField(g, "cached_at_peak_reserved_a", a, diff.cachedAtPeakReserved(0));
            reservedField(g, "cached_at_peak_reserved_b", b, diff.cachedAtPeakReserved(1));
            g.writeArrayFieldStart("sites");
            if (diff.sameProgram()) {
                for (RecordingDiff.Site s : diff.sites()) {
                    g.writeStartObject();
                    g.writeStringField("site", s.name());
                    g.writeNumberField("requests_a", s.requests(0));
                    g.writeNumberField("requests_b", s.requests(1));
                    g.writeNumberField("matched_a", s.matched(0));
                    g.writeNumberField("matched_b", s.matched(1));
                    g.writeNumberField("bytes_a", s.bytes(0));
                    g.writeNumberField("bytes_b", s.bytes(1));
                    g.writeNumberField("at_peak_allocated_a", s.atPeakAllocated(0));
                    g.writeNumberField("at_peak_allocated_b", s.atPeakAllocated(1));
                    reservedField(g, "at_peak_reserved_a", a, s.atPeakReserved(0));
                    reservedField(g, "at_peak_reserved_b", b, s.atPeakReserved(1));
                    g.writeEndObject();
                }
            }
            g.writeEndArray();
            g.writeEndObject();
        });
    }
}
