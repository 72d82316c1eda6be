package io.gpumem.report;

import static io.gpumem.report.Html.card;
import static io.gpumem.report.Html.esc;
import static io.gpumem.report.Html.num;

import io.gpumem.size.ByteSize;
import io.gpumem.trace.align.RecordingDiff;
import io.gpumem.trace.align.RequestAlignment;
import io.gpumem.trace.align.RequestSequence;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;

/**
 * The page of {@code gpumem diff A B --html FILE}: the aligned comparison of two recordings of one program, drawn
 * from the same {@link RecordingDiff} that {@code diff} prints as text and {@code --json}, in the report's skeleton
 * and style ({@link Html}). It shows the counts (requests of each, matched, only in A, only in B), the peaks of each
 * side, every site largest difference at peak allocated first, and where fragmentation differs (cached, unused
 * bytes at each peak reserved, and the sites that hold more or less at that moment).
 *
 * <p>Two recordings that match little ({@link RecordingDiff#sameProgram()} false) get the counts and the peaks and a
 * sentence saying they do not look like one program, and no per-site table, as the text does. Static HTML only: the
 * page's script draws nothing here, it records script errors and marks the body rendered like the report's.
 */
public final class DiffReport implements HtmlPage {

    /** Sites the fragmentation section lists by their difference at peak reserved. */
    static final int FRAGMENTATION_SITES = 12;

    private final RecordingDiff diff;

    public DiffReport(RecordingDiff diff) {
        this.diff = diff;
    }

    @Override
    public String render() {
        RequestAlignment al = diff.alignment();
        RequestSequence a = al.first();
        RequestSequence b = al.second();
        StringBuilder h = new StringBuilder(1 << 16);
        Html.open(
                h,
                "gpumem diff: " + Html.fileName(a.source()) + " vs " + Html.fileName(b.source()),
                "GPU memory diff",
                "A " + a.source() + " (device " + a.device() + ") vs B " + b.source() + " (device " + b.device() + ")",
                "");
        h.append("<section class=\"diff\">\n");
        cards(h, al, a, b);
        h.append("<h3>Peaks</h3>\n");
        // the reserved bars (the last four) only where both recordings hold their driver calls
        int bars = diff.reservedRecorded() ? 6 : 2;
        Html.bars(
                h,
                "peaks of the two recordings",
                Arrays.copyOf(
                        new long[] {
                            a.peakAllocated(),
                            b.peakAllocated(),
                            a.peakReserved(),
                            b.peakReserved(),
                            diff.cachedAtPeakReserved(0),
                            diff.cachedAtPeakReserved(1)
                        },
                        bars),
                Arrays.copyOf(
                        new String[] {
                            "A peak allocated",
                            "B peak allocated",
                            "A peak reserved",
                            "B peak reserved",
                            "A cached, unused at peak reserved",
                            "B cached, unused at peak reserved"
                        },
                        bars),
                Arrays.copyOf(new String[] {"side-a", "side-b", "side-a", "side-b", "cached", "cached"}, bars));
        if (!diff.reservedRecorded()) {
            h.append("<p class=\"hint\">").append(esc(unrecorded(a, b))).append("</p>\n");
        }
        if (!diff.sameProgram()) {
            h.append("<p class=\"headline unrelated\">")
                    .append(esc("These recordings do not look like the same program: "
                            + RecordingDiff.matchedOfEach(al, "A", "B") + ", so no per-site comparison is made."))
                    .append("</p>\n");
        } else {
            sites(h);
            if (diff.reservedRecorded()) {
                fragmentation(h, a, b);
            }
        }
        h.append("</section>\n");
        Html.close(h);
        return h.toString();
    }

    private void cards(StringBuilder h, RequestAlignment al, RequestSequence a, RequestSequence b) {
        h.append("<div class=\"cards\">\n");
        card(h, "requests A", Integer.toString(a.size()), a.source());
        card(h, "requests B", Integer.toString(b.size()), b.source());
        card(
                h,
                "matched",
                Integer.toString(al.matched()),
                String.format(Locale.ROOT, "%.1f%% of the smaller, by ", 100 * al.matchedFractionOfSmaller())
                        + al.signal().words());
        card(h, "only in A", Integer.toString(al.onlyInFirst()), "requests of A that B lacks");
        card(h, "only in B", Integer.toString(al.onlyInSecond()), "requests of B that A lacks");
        card(
                h,
                "peak allocated",
                ByteSize.formatChange(b.peakAllocated() - a.peakAllocated()),
                "A " + ByteSize.format(a.peakAllocated()) + ", B " + ByteSize.format(b.peakAllocated()));
        card(
                h,
                "peak reserved",
                diff.reservedRecorded() ? ByteSize.formatChange(b.peakReserved() - a.peakReserved()) : "n/a",
                "A " + RecordingDiff.reservedText(a, a.peakReserved()) + ", B "
                        + RecordingDiff.reservedText(b, b.peakReserved()));
        h.append("</div>\n");
    }

    private void sites(StringBuilder h) {
        List<RecordingDiff.Site> sites = diff.sites();
        h.append("<h3>Sites</h3>\n<p class=\"hint\">Per allocation site (call site, or position in the repeating step"
                + " when the recordings have no frames), largest difference at peak allocated first. A matched pair"
                + " counts under A's site; a request of one recording only under its own.</p>\n");
        h.append("<table class=\"sites\"><thead><tr><th>site</th><th>requests A</th><th>requests B</th>"
                + "<th>matched A</th><th>matched B</th><th>bytes A</th><th>bytes B</th><th>at peak alloc A</th>"
                + "<th>at peak alloc B</th><th>difference</th><th>at peak reserved A</th><th>at peak reserved B</th>"
                + "</tr></thead><tbody>\n");
        for (RecordingDiff.Site s : sites) {
            h.append("<tr><td><code>").append(esc(s.name())).append("</code></td>");
            num(h, Long.toString(s.requests(0)));
            num(h, Long.toString(s.requests(1)));
            num(h, Long.toString(s.matched(0)));
            num(h, Long.toString(s.matched(1)));
            num(h, ByteSize.format(s.bytes(0)));
            num(h, ByteSize.format(s.bytes(1)));
            num(h, ByteSize.format(s.atPeakAllocated(0)));
            num(h, ByteSize.format(s.atPeakAllocated(1)));
            num(h, ByteSize.formatChange(s.peakAllocatedDifference()));
            num(h, RecordingDiff.reservedText(diff.alignment().first(), s.atPeakReserved(0)));
            num(h, RecordingDiff.reservedText(diff.alignment().second(), s.atPeakReserved(1)));
            h.append("</tr>\n");
        }
        h.append("</tbody></table>\n");
        double top = diff.shareOfPeakAllocatedDifference(3);
        if (!Double.isNaN(top)) {
            h.append("<p>")
                    .append(esc(String.format(
                            Locale.ROOT,
                            "The first three sites make %.0f%% of the peak allocated difference.",
                            100 * top)))
                    .append("</p>\n");
        }
    }

    /** Why the reserved figures are missing: which recordings hold no driver calls. */
    private static String unrecorded(RequestSequence a, RequestSequence b) {
        String which = !a.reservedRecorded() && !b.reservedRecorded()
                ? "Neither A nor B records"
                : (!a.reservedRecorded() ? "A" : "B") + " does not record";
        return which + " the allocator's driver calls (an RMM log, lifetime CSV or ops script does not), so"
                + " reserved memory and where fragmentation differs cannot be compared.";
    }

    /** Cached, unused bytes at each peak reserved, and the sites whose bytes at that moment differ most. */
    private void fragmentation(StringBuilder h, RequestSequence a, RequestSequence b) {
        h.append("<h3>Where fragmentation differs</h3>\n<p class=\"hint\">At each recording's peak reserved: what"
                + " live blocks held, and the rest of the reserved bytes, cached and unused.</p>\n");
        h.append("<table class=\"fragmentation\"><thead><tr><th></th><th>peak reserved</th>"
                + "<th>allocated at peak reserved</th><th>cached, unused</th><th>of reserved</th></tr></thead>"
                + "<tbody>\n");
        RequestSequence[] both = {a, b};
        for (int side = 0; side < 2; side++) {
            RequestSequence s = both[side];
            long cached = diff.cachedAtPeakReserved(side);
            h.append("<tr><td>").append(side == 0 ? "A" : "B").append("</td>");
            num(h, ByteSize.format(s.peakReserved()));
            num(h, ByteSize.format(s.allocatedAtPeakReserved()));
            num(h, ByteSize.format(cached));
            num(
                    h,
                    String.format(
                            Locale.ROOT, "%.3f", s.peakReserved() == 0 ? 0.0 : (double) cached / s.peakReserved()));
            h.append("</tr>\n");
        }
        h.append("</tbody></table>\n");
        for (int side = 0; side < 2; side++) {
            String atStart = RecordingDiff.peakReservedAtStart(both[side], side == 0 ? "A" : "B");
            if (atStart != null) {
                h.append("<p>").append(esc(atStart)).append("</p>\n");
            }
        }
        List<RecordingDiff.Site> byReserved = new ArrayList<>(diff.sites());
        byReserved.removeIf(s -> s.peakReservedDifference() == 0);
        byReserved.sort(Comparator.comparingLong((RecordingDiff.Site s) -> -Math.abs(s.peakReservedDifference())));
        if (byReserved.isEmpty()) {
            h.append("<p>No site holds different bytes at the two peaks reserved.</p>\n");
            return;
        }
        h.append("<table class=\"reserved-sites\"><caption>sites, largest difference at peak reserved first")
                .append(byReserved.size() > FRAGMENTATION_SITES ? " (the first " + FRAGMENTATION_SITES + ")" : "")
                .append("</caption><thead><tr><th>site</th><th>at peak reserved A</th><th>at peak reserved B</th>"
                        + "<th>difference</th></tr></thead><tbody>\n");
        for (RecordingDiff.Site s : byReserved.subList(0, Math.min(FRAGMENTATION_SITES, byReserved.size()))) {
            h.append("<tr><td><code>").append(esc(s.name())).append("</code></td>");
            num(h, ByteSize.format(s.atPeakReserved(0)));
            num(h, ByteSize.format(s.atPeakReserved(1)));
            num(h, ByteSize.formatChange(s.peakReservedDifference()));
            h.append("</tr>\n");
        }
        h.append("</tbody></table>\n");
    }
}
