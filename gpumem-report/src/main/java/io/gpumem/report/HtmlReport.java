package io.gpumem.report;

import static io.gpumem.report.Html.card;
import static io.gpumem.report.Html.esc;
import static io.gpumem.report.Html.num;

import io.gpumem.alloc.Pool;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.engine.RunOutcome;
import io.gpumem.policy.PolicyRegistry;
import io.gpumem.size.ByteSize;
import io.gpumem.trace.analysis.AnalysisPrinter;
import io.gpumem.trace.analysis.DeviceAnalysis;
import io.gpumem.trace.analysis.Diagnosis;
import io.gpumem.trace.analysis.DiagnosisKind;
import io.gpumem.trace.analysis.MemoryState;
import io.gpumem.trace.analysis.OomEvent;
import io.gpumem.trace.analysis.Percent;
import io.gpumem.trace.analysis.PoolUsage;
import io.gpumem.trace.analysis.Recommendation;
import io.gpumem.trace.analysis.Recommender;
import io.gpumem.trace.analysis.SegmentWaste;
import io.gpumem.trace.analysis.StateAnalysis;
import io.gpumem.trace.analysis.StreamFree;
import io.gpumem.trace.category.ByteCategory;
import io.gpumem.trace.category.CategoryPrinter;
import io.gpumem.trace.category.CategoryRemedy;
import io.gpumem.trace.category.PeakCategories;
import io.gpumem.trace.session.TraceSession;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/**
 * The self-contained HTML report of a trace ({@code gpumem report}, {@code analyze/compare/demo --html}): one
 * file that opens offline in any browser.
 *
 * <p>What is static and what is drawn: every figure {@code gpumem analyze} prints (pool table, free space per
 * stream, wasteful segments, diagnosis, compare runs, recommendations) is written as HTML text with the same
 * formatting, so the page reads without its script; the timeline and segment maps are drawn as SVG by a
 * small inline script from JSON embedded in the page ({@link ReportJson}). A Content-Security-Policy meta
 * tag forbids every request (only inline script, inline style and {@code data:} images are allowed), and the
 * page has no URL of its own. The script marks the body {@code data-render="ok"} when it has drawn everything
 * and records any script error in {@code #script-errors} (tests read both).
 *
 * <p>Not thread-safe while building; {@link #render} is deterministic for the same input.
 */
public final class HtmlReport implements HtmlPage {
    /** The page's Content-Security-Policy: nothing may be fetched. */
    public static final String CSP =
            "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline';" + " img-src data:";

    /**
     * Most points of a device's timeline, beside one per {@code oom} entry, however long its trace: a page of a
     * snapshot of millions of entries is drawn as quickly as one of thousands.
     */
    public static final int TIMELINE_POINTS = ReportJson.MAX_POINTS;

    private final String source;
    private final List<DeviceReport> devices = new ArrayList<>();

    /** A report of {@code source} (a file name or a run's name, shown in the title). */
    public HtmlReport(String source) {
        this.source = source;
    }

    /**
     * Adds one device: the analysis as {@code analyze} computed it, plus what-if rows beyond the recommender's
     * (shown in the same table; duplicates of the recommender's rows by label are dropped). The timeline starts
     * from the session's window of the device (rebuilt once per session, shared with the compare runs).
     */
    public HtmlReport addDevice(TraceSession session, DeviceAnalysis analysis, List<RunOutcome> extraRows) {
        // 0: the model's blocks are assumed, and the remedy says so
        return addDevice(session, analysis, extraRows, session.peakCategories(analysis, 0));
    }

    /** As {@link #addDevice(TraceSession, DeviceAnalysis, List)}, with the categories as the caller computed them. */
    public HtmlReport addDevice(
            TraceSession session, DeviceAnalysis analysis, List<RunOutcome> extraRows, PeakCategories categories) {
        devices.add(DeviceReport.of(session, analysis, extraRows, categories));
        return this;
    }

    @Override
    public String render() {
        StringBuilder select = new StringBuilder();
        if (devices.size() > 1) {
            StringBuilder h = select;
            h.append("<label class=\"device-select\">device <select id=\"device-select\">");
            for (DeviceReport d : devices) {
                h.append("<option value=\"")
                        .append(d.device())
                        .append("\">device ")
                        .append(d.device())
                        .append(" &mdash; ")
                        .append(esc(beforeColon(AnalysisPrinter.headline(
                                d.analysis().analysis().diagnosis().kind()))))
                        .append("</option>");
            }
            h.append("</select></label>");
        }
        StringBuilder h = new StringBuilder(1 << 20);
        Html.open(h, "gpumem report: " + Html.fileName(source), "GPU memory report", source, select.toString());
        if (devices.isEmpty()) {
            h.append("<p>No device has segments or trace entries: nothing to show.</p>\n");
        }
        boolean first = true;
        for (DeviceReport d : devices) {
            device(h, d, first);
            first = false;
        }
        Html.close(h);
        return h.toString();
    }

    private void device(StringBuilder h, DeviceReport d, boolean visible) {
        DeviceAnalysis da = d.analysis();
        StateAnalysis a = da.analysis();
        MemoryState s = a.state();
        int dev = d.device();
        h.append("<section class=\"device\" id=\"device-")
                .append(dev)
                .append("\" data-device=\"")
                .append(dev)
                .append('"')
                .append(visible ? "" : " hidden")
                .append(">\n");
        h.append("<h2 class=\"device-title\">device ")
                .append(dev)
                .append(": ")
                .append(esc(s.label()))
                .append("</h2>\n");
        cards(h, d);
        h.append("<h3>Timeline</h3>\n<p class=\"hint\">Allocated bytes stacked by allocation site or by category (the"
                        + " toggle), ")
                .append(
                        d.stateRecorded()
                                ? "reserved bytes as a line"
                                : "without reserved bytes (" + esc(d.format().withArticle()) + " records none)")
                .append(", over trace entries. Drag to zoom, double-click to reset, hover for figures.</p>\n");
        h.append("<div class=\"stack-toggle\" data-device=\"")
                .append(dev)
                .append("\">stack by <label><input type=\"radio\" name=\"stack-")
                .append(dev)
                .append("\" value=\"site\" checked> site</label> <label><input type=\"radio\" name=\"stack-")
                .append(dev)
                .append("\" value=\"category\"")
                .append(d.categories().categories() == null ? " disabled" : "")
                .append("> category</label></div>\n");
        h.append("<div class=\"chart timeline\" data-device=\"").append(dev).append("\"></div>\n");
        s.oom().ifPresent(oom -> oomStory(h, a, oom));
        h.append("<h3>Segment maps</h3>\n<p class=\"hint\">Each segment a bar (address order, width proportional to"
                + " its size); blocks coloured by state; the largest free block outlined. Hover a block for its size,"
                + " site and lifetime.</p>\n");
        for (int m = 0; m < d.maps().size(); m++) {
            h.append("<h4>").append(esc(d.maps().get(m).title())).append("</h4>\n");
            h.append("<div class=\"chart segmap\" data-device=\"")
                    .append(dev)
                    .append("\" data-map=\"")
                    .append(m)
                    .append("\"></div>\n");
        }
        stateTables(h, a);
        diagnosis(h, a.diagnosis());
        whatIf(h, d);
        categories(h, d.categories());
        for (String n : d.notes()) {
            h.append("<p class=\"note\">note: ").append(esc(n)).append("</p>\n");
        }
        h.append("<script type=\"application/json\" class=\"report-data\" data-device=\"")
                .append(dev)
                .append("\">")
                .append(ReportJson.of(d))
                .append("</script>\n</section>\n");
    }

    private static void cards(StringBuilder h, DeviceReport d) {
        StateAnalysis a = d.analysis().analysis();
        Timeline t = d.timeline();
        RunOutcome recorded = d.analysis().recommendations().baseline();
        h.append("<div class=\"cards\">\n");
        // The replay under the recorded configuration knows block sizes exactly; the trace alone only rounds requests.
        String basis = recorded != null
                ? "replay of the trace under its own configuration"
                : "from the trace's requests (rounded as the allocator rounds them)";
        card(
                h,
                "peak allocated",
                ByteSize.formatSigned(recorded != null ? recorded.peakAllocated() : t.peakAllocated),
                (t.peakIndex >= 0 ? "around entry #" + t.peakIndex + " of " + t.entries() + "; " : "") + basis);
        if (recorded == null && !d.stateRecorded()) {
            String conf = d.analysis().analysis().state().allocatorConf().orElse(null);
            card(
                    h,
                    "peak reserved",
                    d.replayedPeakReserved() >= 0 ? ByteSize.formatSigned(d.replayedPeakReserved()) : "not recorded",
                    d.format().withArticle() + " records requests only"
                            + (d.replayedPeakReserved() >= 0
                                    ? ": a replay of them under " + AllocatorConfig.inWords(conf)
                                    : "; the state analysed below is a replay's"));
        } else {
            card(
                    h,
                    "peak reserved",
                    ByteSize.formatSigned(recorded != null ? recorded.peakReserved() : t.peakReserved),
                    "segments held from the driver; " + basis);
        }
        card(
                h,
                "fragmentation",
                Percent.of(a.all().externalFragmentation()),
                "of free cached bytes outside the largest free block ("
                        + ByteSize.formatSigned(a.all().largestFree()) + " of "
                        + ByteSize.formatSigned(a.all().cachedFree()) + "); reserved/allocated "
                        + a.all().reservedPerAllocatedText());
        peakSplitCard(h, d.categories());
        DiagnosisKind kind = a.diagnosis().kind();
        h.append("<div class=\"card verdict ")
                .append(kind.name().toLowerCase(Locale.ROOT))
                .append("\"><div class=\"label\">verdict</div>" + "<div class=\"value\">")
                .append(esc(AnalysisPrinter.headline(kind)))
                .append("</div><div class=\"sub\">")
                .append(esc(a.diagnosis().trigger()))
                .append("</div></div>\n");
        List<Recommendation> recs = d.analysis().recommendations().recommendations();
        if (recs.isEmpty()) {
            card(
                    h,
                    "top recommendation",
                    "none",
                    d.analysis().recommendations().notes().isEmpty()
                            ? ""
                            : d.analysis().recommendations().notes().getFirst());
        } else {
            Recommendation top = recs.getFirst();
            h.append("<div class=\"card rec\"><div class=\"label\">top recommendation</div><div class=\"value\">")
                    .append(esc(top.action()))
                    .append("</div><div class=\"sub\">saves ")
                    .append(esc(ByteSize.formatSigned(top.bytesSaved())))
                    .append("; ")
                    .append(esc(top.basis()))
                    .append("</div></div>\n");
        }
        h.append("</div>\n");
    }

    /** The largest category at peak allocated, with the split of the rest (the table below has every figure). */
    private static void peakSplitCard(StringBuilder h, PeakCategories p) {
        ByteCategory top = ByteCategory.OTHER;
        for (ByteCategory c : ByteCategory.values()) {
            if (p.atPeak().get(c) > p.atPeak().get(top)) {
                top = c;
            }
        }
        List<String> rest = new ArrayList<>();
        for (ByteCategory c : ByteCategory.values()) {
            if (c != top && p.atPeak().get(c) > 0) {
                rest.add(c.key() + " " + ByteSize.formatSigned(p.atPeak().get(c)));
            }
        }
        card(
                h,
                "live at the peak",
                top.key() + " "
                        + (p.peakAllocated() > 0 ? Percent.of(p.atPeak().get(top) / (double) p.peakAllocated()) : ""),
                ByteSize.formatSigned(p.atPeak().get(top)) + " of " + ByteSize.formatSigned(p.peakAllocated())
                        + (rest.isEmpty() ? "" : "; " + String.join(", ", rest)));
    }

    /** What was asked, what was free and where, why it failed; with bars on one scale. */
    private static void oomStory(StringBuilder h, StateAnalysis a, OomEvent oom) {
        long request = oom.requestBytes();
        Pool pool = request <= (1L << 20) ? Pool.SMALL : Pool.LARGE;
        long largest = a.largestFree(pool, oom.stream());
        PoolUsage all = a.all();
        long driverFree = Math.max(0, a.state().deviceFree());
        h.append("<div class=\"story\" id=\"oom-story-")
                .append(a.state().device())
                .append("\">\n<h3>Why it ran out of memory</h3>\n");
        h.append("<p><b>What was asked:</b> ")
                .append(esc(ByteSize.formatSigned(request)))
                .append(" on stream ")
                .append(oom.stream())
                .append(" (")
                .append(pool.statName())
                .append(")")
                .append(oom.entryIndex() >= 0 ? " at trace entry #" + oom.entryIndex() : "")
                .append(".</p>\n");
        h.append("<p><b>What was free, and where:</b> the largest free block of ")
                .append(pool.statName())
                .append(" on that stream was ")
                .append(esc(ByteSize.formatSigned(largest)))
                .append("; the cache held ")
                .append(esc(ByteSize.formatSigned(all.cachedFree())))
                .append(" free in ")
                .append(all.freeBlocks())
                .append(" blocks (")
                .append(esc(ByteSize.formatSigned(all.pinnedFree())))
                .append(" of it pinned between live blocks), and the driver had ")
                .append(a.state().deviceFree() >= 0 ? esc(ByteSize.formatSigned(driverFree)) : "an unknown amount")
                .append(" free.</p>\n");
        h.append("<p><b>Why it failed:</b> ")
                .append(esc(AnalysisPrinter.headline(a.diagnosis().kind())))
                .append(".</p>\n");
        long[] values = {request, largest, all.cachedFree(), driverFree, all.cachedFree() + driverFree};
        String[] labels = {
            "asked",
            "largest free block that could serve it",
            "free in the cache (all blocks)",
            "free at the driver",
            "cache + driver together"
        };
        String[] classes = {"ask", "largest", "cached", "driver", "together"};
        // the driver's free bytes unknown (an oom entry without device_free): no bar says 0 bytes for them
        int shown = a.state().deviceFree() >= 0 ? values.length : 3;
        Html.bars(
                h,
                "request against free space",
                Arrays.copyOf(values, shown),
                Arrays.copyOf(labels, shown),
                Arrays.copyOf(classes, shown));
        h.append("</div>\n");
    }

    private static void stateTables(StringBuilder h, StateAnalysis a) {
        MemoryState s = a.state();
        h.append("<h3>Memory at: ").append(esc(s.label())).append("</h3>\n<p>");
        s.allocatorConf()
                .ifPresent(c -> h.append("allocator config: <code>")
                        .append(esc(c.isEmpty() ? "(defaults)" : c))
                        .append("</code>. "));
        if (s.capacity() >= 0 || s.deviceFree() >= 0) {
            h.append("device capacity: ")
                    .append(s.capacity() >= 0 ? ByteSize.formatSigned(s.capacity()) : "unknown")
                    .append(", driver free: ")
                    .append(s.deviceFree() >= 0 ? ByteSize.formatSigned(s.deviceFree()) : "unknown");
        }
        h.append(
                "</p>\n<table class=\"pools\"><thead><tr><th>pool</th><th>segments</th><th>reserved</th><th>allocated</th>"
                        + "<th>active</th><th>inactive split</th><th>releasable</th><th>largest free</th><th>ext frag</th></tr></thead><tbody>\n");
        for (PoolUsage u : List.of(a.small(), a.large(), a.all())) {
            h.append("<tr><td>").append(u.scope()).append("</td>");
            num(h, Integer.toString(u.segments()));
            for (long v : new long[] {
                u.reserved(), u.allocated(), u.active(), u.inactiveSplit(), u.releasable(), u.largestFree()
            }) {
                num(h, ByteSize.formatSigned(v));
            }
            num(h, Percent.of(u.externalFragmentation()));
            h.append("</tr>\n");
        }
        h.append("</tbody></table>\n<p>reserved/allocated ")
                .append(a.all().reservedPerAllocatedText())
                .append(", requested ")
                .append(ByteSize.formatSigned(a.all().requested()))
                .append(" (rounding slack ")
                .append(ByteSize.formatSigned(a.all().allocated() - a.all().requested()))
                .append(")</p>\n");
        if (a.streamFree().isEmpty()) {
            h.append("<p>free space: no cached free blocks</p>\n");
        } else {
            h.append(
                    "<table class=\"free\"><caption>largest free block per pool and stream</caption><thead><tr><th>pool</th>"
                            + "<th>stream</th><th>largest</th><th>free</th><th>blocks</th><th>ext frag</th></tr></thead><tbody>\n");
            for (StreamFree f : a.streamFree()) {
                h.append("<tr><td>").append(f.pool().statName()).append("</td>");
                num(h, Long.toString(f.stream()));
                num(h, ByteSize.formatSigned(f.largestFree()));
                num(h, ByteSize.formatSigned(f.totalFree()));
                num(h, Integer.toString(f.freeBlocks()));
                num(h, Percent.of(f.externalFragmentation()));
                h.append("</tr>\n");
            }
            h.append("</tbody></table>\n");
        }
        if (a.topWaste().isEmpty()) {
            h.append("<p>segments that waste most: none wastes a byte</p>\n");
        } else {
            h.append(
                    "<table class=\"waste\"><caption>segments that waste most (free + rounding slack)</caption><thead><tr>"
                            + "<th>segment</th><th>pool</th><th>stream</th><th>kind</th><th>size</th><th>waste</th><th>free</th>"
                            + "<th>slack</th><th></th></tr></thead><tbody>\n");
            for (SegmentWaste w : a.topWaste()) {
                h.append("<tr><td><code>0x")
                        .append(Long.toHexString(w.address()))
                        .append("</code></td><td>")
                        .append(w.pool().statName())
                        .append("</td>");
                num(h, Long.toString(w.stream()));
                h.append("<td>").append(w.expandable() ? "expandable" : "").append("</td>");
                num(h, ByteSize.formatSigned(w.totalSize()));
                num(h, ByteSize.formatSigned(w.waste()));
                num(h, ByteSize.formatSigned(w.freeBytes()));
                num(h, ByteSize.formatSigned(w.slackBytes()));
                h.append("<td>")
                        .append(w.pinned() ? "pinned by live blocks" : "releasable")
                        .append("</td></tr>\n");
            }
            h.append("</tbody></table>\n");
        }
    }

    private static void diagnosis(StringBuilder h, Diagnosis d) {
        h.append("<h3>Diagnosis</h3>\n<p class=\"headline ")
                .append(d.kind().name().toLowerCase(Locale.ROOT))
                .append("\">")
                .append(esc(AnalysisPrinter.headline(d.kind())))
                .append("</p>\n<p>because: ")
                .append(esc(d.trigger()))
                .append("</p>\n<ul>\n");
        for (String e : d.evidence()) {
            h.append("<li>").append(esc(e)).append("</li>\n");
        }
        h.append("</ul>\n");
    }

    /**
     * Where {@code rows} already hold the run {@code extra} shows, or −1: the recorded configuration's as the
     * baseline (first when {@code hasBaseline}, in the same mode), another configuration's by its label, a policy's
     * among the recommender's rows not yet {@code replaced} by its name (the recommender tries the very policies the
     * user asked for, in the same order, under its own label for them).
     */
    private static int sameRun(List<RunOutcome> rows, boolean[] replaced, RunOutcome extra, boolean hasBaseline) {
        boolean policy = !PolicyRegistry.isExact(extra.policy());
        if (!policy && extra.recorded() && hasBaseline && rows.getFirst().steady() == extra.steady()) {
            return 0; // compare's recorded row is the recommender's baseline, labelled otherwise
        }
        for (int i = 0; i < (policy ? replaced.length : rows.size()); i++) {
            RunOutcome o = rows.get(i);
            if (policy
                    ? !replaced[i] && o.policy().equals(extra.policy())
                    : o.label().equals(extra.label())) {
                return i;
            }
        }
        return -1;
    }

    private static void whatIf(StringBuilder h, DeviceReport d) {
        Recommender.Result r = d.analysis().recommendations();
        List<RunOutcome> rows = new ArrayList<>();
        if (r.baseline() != null) {
            rows.add(r.baseline());
            rows.addAll(r.alternatives());
        }
        RunOutcome best = r.recommendations().isEmpty()
                ? null
                : r.recommendations().getFirst().outcome();
        boolean[] replaced = new boolean[rows.size()];
        for (RunOutcome extra : d.extraRows()) {
            int same = sameRun(rows, replaced, extra, r.baseline() != null);
            if (same < 0) {
                rows.add(extra);
            } else if (!PolicyRegistry.isExact(extra.policy())) {
                // the policy's row as compare labels and computes it stands for the recommender's run of it
                if (rows.get(same).equals(best)) {
                    best = extra;
                }
                rows.set(same, extra);
                replaced[same] = true;
            }
        }
        h.append("<h3>What if</h3>\n");
        for (String n : d.analysis().replayNotes()) {
            h.append("<p class=\"note\">note: ").append(esc(n)).append("</p>\n");
        }
        if (rows.isEmpty()) {
            h.append("<p>No compare runs: ")
                    .append(
                            r.baseline() == null && !r.notes().isEmpty()
                                    ? "see the notes below"
                                    : "the analysis found nothing that needs one")
                    .append(".</p>\n");
        } else {
            boolean withCapacity = rows.stream().anyMatch(o -> o.minCapacity() >= 0);
            h.append("<table class=\"whatif\"><thead><tr><th>config</th><th>mode</th><th>peak allocated</th>"
                            + "<th>peak reserved</th>"
                            + "<th>res/alloc</th><th>driver allocs</th><th>retries</th><th>OOMs</th>")
                    .append(withCapacity ? "<th>min capacity</th>" : "")
                    .append("</tr></thead><tbody>\n");
            for (RunOutcome o : rows) {
                h.append("<tr")
                        .append(
                                o.equals(best)
                                        ? " class=\"recommended\""
                                        : o.equals(r.baseline()) ? " class=\"baseline\"" : "")
                        .append("><td>")
                        .append(esc(o.label().isEmpty() ? "(defaults)" : o.label()))
                        .append(o.equals(best) ? " <span class=\"tag\">recommended</span>" : "")
                        .append(o.equals(r.baseline()) ? " <span class=\"tag base\">as recorded</span>" : "")
                        .append("</td><td class=\"mode\" title=\"")
                        .append(
                                o.steady()
                                        ? o.warmUpPasses()
                                                + (o.warmUpPasses() == 1 ? " warm-up pass" : " warm-up passes")
                                                + " of the step from the live blocks, then"
                                                + " the measured one"
                                        : "the window from its recorded start")
                        .append("\">")
                        .append(esc(o.modeLabel()))
                        .append("</td>");
                num(h, ByteSize.formatSigned(o.peakAllocated()));
                num(h, ByteSize.formatSigned(o.peakReserved()));
                num(h, String.format(Locale.ROOT, "%.3f", o.reservedPerAllocated()));
                num(h, Long.toString(o.deviceAllocs()));
                num(h, Long.toString(o.retries()));
                num(h, Long.toString(o.ooms()));
                if (withCapacity) {
                    num(h, o.minCapacity() >= 0 ? ByteSize.formatSigned(o.minCapacity()) : "-");
                }
                h.append("</tr>\n");
            }
            h.append("</tbody></table>\n");
        }
        if (r.recommendations().isEmpty()) {
            h.append("<p>recommendation: none</p>\n");
        } else {
            h.append("<ol class=\"recommendations\">\n");
            for (Recommendation rec : r.recommendations()) {
                h.append("<li><b>")
                        .append(esc(rec.action()))
                        .append("</b><br>saves ")
                        .append(esc(ByteSize.formatSigned(rec.bytesSaved())))
                        .append("; ")
                        .append(esc(rec.basis()))
                        .append("</li>\n");
            }
            h.append("</ol>\n");
        }
        for (String n : r.notes()) {
            h.append("<p class=\"note\">note: ").append(esc(n)).append("</p>\n");
        }
    }

    /** The split by category and the remedies, the same figures as {@link CategoryPrinter} prints. */
    private static void categories(StringBuilder h, PeakCategories p) {
        h.append("<h3 class=\"categories\">What the live bytes are for</h3>\n<p>")
                .append(esc(CategoryPrinter.heading(p)))
                .append("</p>\n<table class=\"categories\"><thead><tr><th>category</th><th>at peak</th><th>share</th>")
                .append(p.atFailure() != null ? "<th>at the OOM</th>" : "")
                .append("<th>at end</th></tr></thead><tbody>\n");
        for (String[] row : CategoryPrinter.lines(p)) {
            h.append("<tr><td>").append(esc(row[0])).append("</td>");
            for (int i = 1; i < row.length; i++) {
                num(h, row[i]);
            }
            h.append("</tr>\n");
        }
        h.append("</tbody></table>\n<p class=\"hint\">by rule at the peak: ")
                .append(esc(CategoryPrinter.rules(p.rulesAtPeak())))
                .append("</p>\n");
        for (String n : p.notes()) {
            h.append("<p class=\"note\">note: ").append(esc(n)).append("</p>\n");
        }
        if (p.remedies().isEmpty()) {
            h.append("<p>remedies at the peak: none (no category at the peak that a remedy shrinks)</p>\n");
            return;
        }
        h.append("<h4>Remedies at the peak (best first)</h4>\n<ol class=\"remedies\">\n");
        for (CategoryRemedy r : p.remedies()) {
            h.append("<li><b>")
                    .append(esc(r.target()))
                    .append(": ")
                    .append(esc(r.remedy()))
                    .append("</b> saves ")
                    .append(esc(ByteSize.formatSigned(r.saves())))
                    .append("<br>model: ")
                    .append(esc(r.model()))
                    .append("<br>PyTorch today: <code>")
                    .append(esc(CategoryPrinter.today(r)))
                    .append("</code></li>\n");
        }
        h.append("</ol>\n");
    }

    /** The text before the first colon (a headline's short form), or all of it when there is none. */
    private static String beforeColon(String headline) {
        int colon = headline.indexOf(':');
        return colon < 0 ? headline : headline.substring(0, colon);
    }
}
