package io.gpumem.report;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.alloc.Pool;
import io.gpumem.engine.RunOutcome;
import io.gpumem.size.ByteSize;
import io.gpumem.trace.align.FrameSignatures;
import io.gpumem.trace.align.RecordingDiff;
import io.gpumem.trace.align.RequestAlignment;
import io.gpumem.trace.align.RequestSequence;
import io.gpumem.trace.analysis.AllocatorStates;
import io.gpumem.trace.analysis.AnalysisPrinter;
import io.gpumem.trace.analysis.DeviceAnalysis;
import io.gpumem.trace.analysis.MemoryState;
import io.gpumem.trace.analysis.OomEvent;
import io.gpumem.trace.analysis.Percent;
import io.gpumem.trace.analysis.PoolUsage;
import io.gpumem.trace.analysis.Recommender;
import io.gpumem.trace.analysis.SegmentWaste;
import io.gpumem.trace.analysis.StateAnalysis;
import io.gpumem.trace.analysis.StateAnalyzer;
import io.gpumem.trace.analysis.StreamFree;
import io.gpumem.trace.category.ByteCategory;
import io.gpumem.trace.category.CategoryPrinter;
import io.gpumem.trace.category.PeakCategories;
import io.gpumem.trace.io.AllocatorSnapshots;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.session.TraceSession;
import io.gpumem.trace.workload.TrainingWorkload;
import io.gpumem.trace.workload.WorkloadWhatIf;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The figures the pages show, read back out of their tables and cards and held to the models they come from: every
 * row of the report's pool, free-space, what-if and category tables and of the diff page's site and fragmentation
 * tables, each figure in its column, the cards, and what a diff of recordings without driver calls leaves out.
 */
class PageTablesTest {

    /** A small generated training job whose longest sequence is {@code maxSeq}. */
    private static TrainingWorkload workload(int maxSeq, long seed) {
        return TrainingWorkload.builder()
                .layers(3)
                .hidden(256)
                .heads(4)
                .vocab(4000)
                .batch(2)
                .seqLens(128, maxSeq, 128)
                .steps(3)
                .seed(seed)
                .build();
    }

    /** The job on a device of twice its peak live bytes and 64 MiB: room for everything. */
    private static WorkloadWhatIf job(int maxSeq, long seed) {
        TrainingWorkload w = workload(maxSeq, seed);
        return new WorkloadWhatIf(w, 2 * w.peakLiveBytes() + (64L << 20), 0, true);
    }

    /** The recording of the job's run under the default configuration. */
    private static TraceSnapshot recording(WorkloadWhatIf whatIf, String name) {
        return AllocatorSnapshots.toTraceSnapshot(
                whatIf.runWithHistory("").allocator().snapshot(), name);
    }

    static WorkloadWhatIf oomJob;
    static StateAnalysis analysis;
    static Recommender.Result recs;
    static PeakCategories categories;
    static TraceSnapshot oomTrace;
    static DeviceAnalysis oomResult;

    @BeforeAll
    static void renderAReportOfAnOom() {
        TrainingWorkload w = workload(1024, 3);
        oomJob = new WorkloadWhatIf(w, w.peakLiveBytes() * 3 / 4, 0, true);
        RunOutcome run = oomJob.runWithHistory("");
        assertThat(run.completed()).isFalse();
        OomEvent oom =
                new OomEvent(run.oomReport().roundedSize(), run.oomReport().deviceFree(), 0, -1);
        analysis = new StateAnalyzer().analyze(AllocatorStates.capture(run.allocator(), "", "at the oom", oom));
        recs = new Recommender().recommend(analysis, oomJob);
        oomTrace = AllocatorSnapshots.toTraceSnapshot(run.allocator().snapshot(), "oom");
        oomResult = new DeviceAnalysis(0, oomTrace.traceOf(0).size(), analysis, oomJob, recs, List.of());
        categories = PeakCategories.of(oomTrace, 0, oomResult, 3);
    }

    /**
     * The report's page, built anew by each test that reads it: what the page module does runs inside the test (the
     * analysis it draws from is shared), so that a mutation tester credits the test with it.
     */
    private static String report() {
        return new HtmlReport("oom job")
                .addDevice(TraceSession.of(oomTrace), oomResult, List.of(), categories)
                .render();
    }

    /** The rows of the first table of class {@code cls}: each cell's text, tags dropped and entities read. */
    static List<List<String>> rows(String page, String cls) {
        Matcher t = Pattern.compile("<table class=\"" + cls + "\">.*?<tbody>(.*?)</tbody>", Pattern.DOTALL)
                .matcher(page);
        assertThat(t.find()).as("table %s", cls).isTrue();
        List<List<String>> rows = new ArrayList<>();
        Matcher r = Pattern.compile("<tr[^>]*>(.*?)</tr>", Pattern.DOTALL).matcher(t.group(1));
        while (r.find()) {
            List<String> cells = new ArrayList<>();
            Matcher c = Pattern.compile("<td[^>]*>(.*?)</td>", Pattern.DOTALL).matcher(r.group(1));
            while (c.find()) {
                cells.add(text(c.group(1)));
            }
            rows.add(cells);
        }
        return rows;
    }

    static String text(String html) {
        return html.replaceAll("<[^>]+>", "")
                .replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&quot;", "\"")
                .replace("&#39;", "'")
                .replace("&amp;", "&")
                .strip();
    }

    /** The value and the line below it of the card labelled {@code label}. */
    static String[] card(String page, String label) {
        Matcher m = Pattern.compile(
                        "<div class=\"label\">" + Pattern.quote(label)
                                + "</div><div class=\"value\">(.*?)</div><div class=\"sub\">(.*?)</div>",
                        Pattern.DOTALL)
                .matcher(page);
        assertThat(m.find()).as("card %s", label).isTrue();
        return new String[] {text(m.group(1)), text(m.group(2))};
    }

    @Test
    void thePoolTableShowsEachPoolsFiguresInTheirColumns() {
        String report = report();
        List<List<String>> rows = rows(report, "pools");
        List<PoolUsage> pools = List.of(analysis.small(), analysis.large(), analysis.all());
        assertThat(rows).hasSize(3);
        for (int i = 0; i < 3; i++) {
            PoolUsage u = pools.get(i);
            assertThat(rows.get(i))
                    .as(u.scope())
                    .containsExactly(
                            u.scope(),
                            Integer.toString(u.segments()),
                            ByteSize.formatSigned(u.reserved()),
                            ByteSize.formatSigned(u.allocated()),
                            ByteSize.formatSigned(u.active()),
                            ByteSize.formatSigned(u.inactiveSplit()),
                            ByteSize.formatSigned(u.releasable()),
                            ByteSize.formatSigned(u.largestFree()),
                            Percent.of(u.externalFragmentation()));
        }
        assertThat(analysis.all().reserved()).isPositive();
        assertThat(text(report))
                .contains("requested " + ByteSize.formatSigned(analysis.all().requested()) + " (rounding slack "
                        + ByteSize.formatSigned(
                                analysis.all().allocated() - analysis.all().requested()) + ")");
    }

    @Test
    void theFreeSpaceTableHasARowPerPoolAndStream() {
        String report = report();
        assertThat(analysis.streamFree()).isNotEmpty();
        List<List<String>> rows = rows(report, "free");
        assertThat(rows).hasSameSizeAs(analysis.streamFree());
        for (int i = 0; i < rows.size(); i++) {
            StreamFree f = analysis.streamFree().get(i);
            assertThat(rows.get(i))
                    .containsExactly(
                            f.pool().statName(),
                            Long.toString(f.stream()),
                            ByteSize.formatSigned(f.largestFree()),
                            ByteSize.formatSigned(f.totalFree()),
                            Integer.toString(f.freeBlocks()),
                            Percent.of(f.externalFragmentation()));
        }
    }

    @Test
    void theWhatIfTableShowsEveryRunWithTheRecordedAndTheRecommendedOnesMarked() {
        String report = report();
        assertThat(recs.baseline()).isNotNull();
        List<RunOutcome> runs = new ArrayList<>();
        runs.add(recs.baseline());
        runs.addAll(recs.alternatives());
        List<List<String>> rows = rows(report, "whatif");
        assertThat(rows).hasSameSizeAs(runs);
        boolean withCapacity = runs.stream().anyMatch(o -> o.minCapacity() >= 0);
        RunOutcome best = recs.recommendations().isEmpty()
                ? null
                : recs.recommendations().getFirst().outcome();
        for (int i = 0; i < runs.size(); i++) {
            RunOutcome o = runs.get(i);
            List<String> expected = new ArrayList<>(List.of(
                    (o.label().isEmpty() ? "(defaults)" : o.label())
                            + (o.equals(best) ? " recommended" : "")
                            + (i == 0 ? " as recorded" : ""),
                    o.modeLabel(),
                    ByteSize.formatSigned(o.peakAllocated()),
                    ByteSize.formatSigned(o.peakReserved()),
                    String.format(Locale.ROOT, "%.3f", o.reservedPerAllocated()),
                    Long.toString(o.deviceAllocs()),
                    Long.toString(o.retries()),
                    Long.toString(o.ooms())));
            if (withCapacity) {
                expected.add(o.minCapacity() >= 0 ? ByteSize.formatSigned(o.minCapacity()) : "-");
            }
            assertThat(rows.get(i)).as(o.label()).containsExactlyElementsOf(expected);
        }
        assertThat(report).contains("<tr class=\"baseline\">");
        if (best != null) {
            assertThat(report).contains("<tr class=\"recommended\">");
        }
    }

    @Test
    void theCardsShowTheRecordedRunsPeaksAndTheFragmentation() {
        String report = report();
        assertThat(card(report, "peak allocated")[0])
                .isEqualTo(ByteSize.formatSigned(recs.baseline().peakAllocated()));
        assertThat(card(report, "peak allocated")[1]).endsWith("replay of the trace under its own configuration");
        assertThat(card(report, "peak reserved")[0])
                .isEqualTo(ByteSize.formatSigned(recs.baseline().peakReserved()));
        String[] frag = card(report, "fragmentation");
        assertThat(frag[0]).isEqualTo(Percent.of(analysis.all().externalFragmentation()));
        assertThat(frag[1])
                .contains("(" + ByteSize.formatSigned(analysis.all().largestFree()) + " of "
                        + ByteSize.formatSigned(analysis.all().cachedFree()) + ")");
        assertThat(card(report, "verdict")[1]).isEqualTo(analysis.diagnosis().trigger());
        if (!recs.recommendations().isEmpty()) {
            assertThat(card(report, "top recommendation")[0])
                    .isEqualTo(recs.recommendations().getFirst().action());
        }
    }

    @Test
    void theCategoryTableIsThePrintersLines() {
        String report = report();
        List<List<String>> rows = rows(report, "categories");
        List<String[]> lines = CategoryPrinter.lines(categories);
        assertThat(rows).hasSameSizeAs(lines);
        for (int i = 0; i < rows.size(); i++) {
            assertThat(rows.get(i)).containsExactly(lines.get(i));
        }
    }

    @Test
    void theWasteTableListsTheMostWastefulSegmentsWithWhatPinsThem() {
        String report = report();
        assertThat(analysis.topWaste()).isNotEmpty();
        List<List<String>> rows = rows(report, "waste");
        assertThat(rows).hasSameSizeAs(analysis.topWaste());
        for (int i = 0; i < rows.size(); i++) {
            SegmentWaste w = analysis.topWaste().get(i);
            assertThat(rows.get(i))
                    .containsExactly(
                            "0x" + Long.toHexString(w.address()),
                            w.pool().statName(),
                            Long.toString(w.stream()),
                            w.expandable() ? "expandable" : "",
                            ByteSize.formatSigned(w.totalSize()),
                            ByteSize.formatSigned(w.waste()),
                            ByteSize.formatSigned(w.freeBytes()),
                            ByteSize.formatSigned(w.slackBytes()),
                            w.pinned() ? "pinned by live blocks" : "releasable");
        }
    }

    @Test
    void theOomStoryTellsWhatWasAskedWhatWasFreeAndWhy() {
        String page = report();
        int at = page.indexOf("<div class=\"story\"");
        assertThat(at).isPositive();
        String story = text(page.substring(at, page.indexOf("</div>", at)));
        OomEvent oom = analysis.state().oom().orElseThrow();
        Pool pool = oom.requestBytes() <= (1L << 20) ? Pool.SMALL : Pool.LARGE;
        PoolUsage all = analysis.all();
        assertThat(story)
                .contains("What was asked: " + ByteSize.formatSigned(oom.requestBytes()) + " on stream " + oom.stream()
                        + " (" + pool.statName() + ").")
                .contains("the largest free block of " + pool.statName() + " on that stream was "
                        + ByteSize.formatSigned(analysis.largestFree(pool, oom.stream())) + "; the cache held "
                        + ByteSize.formatSigned(all.cachedFree()) + " free in " + all.freeBlocks() + " blocks ("
                        + ByteSize.formatSigned(all.pinnedFree())
                        + " of it pinned between live blocks), and the driver had "
                        + ByteSize.formatSigned(Math.max(0, analysis.state().deviceFree())) + " free.")
                .contains("Why it failed: "
                        + AnalysisPrinter.headline(analysis.diagnosis().kind()) + ".");
        assertThat(page).contains("aria-label=\"request against free space\"");
    }

    /**
     * An oom entry without {@code device_free} leaves the driver's free bytes unknown: the story says so, and its bars
     * draw none for them (they drew "free at the driver 0 bytes" beside "the driver had an unknown amount free").
     */
    @Test
    void theOomStoryDrawsNoDriverBarWhenTheDriversFreeBytesAreUnknown() {
        OomEvent recorded = analysis.state().oom().orElseThrow();
        MemoryState unknown = MemoryState.builder()
                .label("at the oom")
                .segments(analysis.state().segments())
                .oom(new OomEvent(recorded.requestBytes(), MemoryState.UNKNOWN, recorded.stream(), -1))
                .build();
        assertThat(unknown.deviceFree()).isEqualTo(MemoryState.UNKNOWN);
        StateAnalysis a = new StateAnalyzer().analyze(unknown);
        String page = new HtmlReport("oom job")
                .addDevice(
                        TraceSession.of(oomTrace),
                        new DeviceAnalysis(0, oomTrace.traceOf(0).size(), a, oomJob, recs, List.of()),
                        List.of(),
                        categories)
                .render();
        int at = page.indexOf("<div class=\"story\"");
        String story = page.substring(at, page.indexOf("</svg>", at));
        assertThat(text(story))
                .contains("and the driver had an unknown amount free.")
                .contains("free in the cache (all blocks)"
                        + ByteSize.formatSigned(a.all().cachedFree()));
        assertThat(story).doesNotContain("free at the driver", "cache + driver together");

        String known = report();
        int k = known.indexOf("<div class=\"story\"");
        assertThat(known.substring(k, known.indexOf("</svg>", k)))
                .contains("free at the driver", "cache + driver together");
    }

    @Test
    void theLiveAtThePeakCardNamesTheLargestCategoryAndTheRest() {
        String[] card = card(report(), "live at the peak");
        ByteCategory top = ByteCategory.OTHER;
        for (ByteCategory c : ByteCategory.values()) {
            if (categories.atPeak().get(c) > categories.atPeak().get(top)) {
                top = c;
            }
        }
        long peak = categories.peakAllocated();
        assertThat(peak).isPositive();
        assertThat(card[0])
                .isEqualTo(top.key() + " " + Percent.of(categories.atPeak().get(top) / (double) peak));
        assertThat(card[1])
                .startsWith(ByteSize.formatSigned(categories.atPeak().get(top)) + " of " + ByteSize.formatSigned(peak));
        for (ByteCategory c : ByteCategory.values()) {
            if (c != top && categories.atPeak().get(c) > 0) {
                assertThat(card[1])
                        .contains(c.key() + " "
                                + ByteSize.formatSigned(categories.atPeak().get(c)));
            }
        }
    }

    @Test
    void aPageOfSeveralDevicesOffersEachAndShowsTheFirst() {
        String page = new HtmlReport("two")
                .addDevice(TraceSession.of(oomTrace), oomResult, List.of(), categories)
                .addDevice(TraceSession.of(oomTrace), oomResult, List.of(), categories)
                .render();
        assertThat(page).contains("<select id=\"device-select\">");
        String headline = AnalysisPrinter.headline(analysis.diagnosis().kind());
        String shortForm = headline.contains(":") ? headline.substring(0, headline.indexOf(':')) : headline;
        assertThat(Pattern.compile("<option value=\"0\">device 0 &mdash; " + Pattern.quote(Html.esc(shortForm))
                                + "</option>")
                        .matcher(page)
                        .results()
                        .count())
                .isEqualTo(2);
        assertThat(Pattern.compile("<section class=\"device\"[^>]*>")
                        .matcher(page)
                        .results()
                        .map(m -> m.group()))
                .containsExactly(
                        "<section class=\"device\" id=\"device-0\" data-device=\"0\">",
                        "<section class=\"device\" id=\"device-0\" data-device=\"0\" hidden>");
        assertThat(report()).doesNotContain("<select id=\"device-select\">");
    }

    @Test
    void anExtraRowJoinsTheWhatIfTableOnceAndAPolicysRowTakesTheRecommendersRunOfIt() {
        RunOutcome again = RunOutcome.builder()
                .label(recs.baseline().label())
                .peakAllocated(1)
                .peakReserved(2)
                .build();
        RunOutcome other = RunOutcome.builder()
                .label("max_split_size_mb:77")
                .peakAllocated(3L << 20)
                .peakReserved(4L << 20)
                .build();
        String page = new HtmlReport("extra")
                .addDevice(TraceSession.of(oomTrace), oomResult, List.of(again, other), categories)
                .render();
        List<List<String>> rows = rows(page, "whatif");
        int runs = 1 + recs.alternatives().size();
        assertThat(rows).as("the recorded configuration's row is not repeated").hasSize(runs + 1);
        assertThat(rows.get(runs).get(0)).isEqualTo("max_split_size_mb:77");
        assertThat(rows.get(runs).get(2)).isEqualTo(ByteSize.formatSigned(3L << 20));
        assertThat(rows.get(0).get(2))
                .isEqualTo(ByteSize.formatSigned(recs.baseline().peakAllocated()));
    }

    /** Two sizes of one program, recorded with their driver calls, or stripped of them. */
    private static RecordingDiff diff(boolean driverCalls) {
        TraceSnapshot a = recording(job(512, 5), "a.pickle");
        TraceSnapshot b = recording(job(1024, 5), "b.pickle");
        if (!driverCalls) {
            a = withoutDriverCalls(a);
        }
        FrameSignatures signatures = new FrameSignatures();
        return RecordingDiff.of(
                RequestAlignment.align(RequestSequence.of(a, 0, signatures), RequestSequence.of(b, 0, signatures)));
    }

    private static TraceSnapshot withoutDriverCalls(TraceSnapshot s) {
        return new TraceSnapshot(
                s.source(),
                s.format(),
                s.segments(),
                s.deviceTraces(),
                s.allocatorSettings(),
                s.externalAnnotations(),
                s.extra(),
                false);
    }

    @Test
    void theDiffPageShowsTheCountsThePeaksAndEverySite() {
        RecordingDiff diff = diff(true);
        RequestAlignment al = diff.alignment();
        RequestSequence a = al.first();
        RequestSequence b = al.second();
        assertThat(diff.sameProgram()).isTrue();
        String page = new DiffReport(diff).render();
        assertThat(card(page, "requests A")[0]).isEqualTo(Integer.toString(a.size()));
        assertThat(card(page, "requests B")[0]).isEqualTo(Integer.toString(b.size()));
        assertThat(card(page, "matched")[0]).isEqualTo(Integer.toString(al.matched()));
        assertThat(card(page, "only in A")[0]).isEqualTo(Integer.toString(al.onlyInFirst()));
        assertThat(card(page, "only in B")[0]).isEqualTo(Integer.toString(al.onlyInSecond()));
        assertThat(b.peakAllocated()).as("the longer sequences take more").isGreaterThan(a.peakAllocated());
        assertThat(card(page, "peak allocated"))
                .containsExactly(
                        ByteSize.formatChange(b.peakAllocated() - a.peakAllocated()),
                        "A " + ByteSize.format(a.peakAllocated()) + ", B " + ByteSize.format(b.peakAllocated()));
        assertThat(card(page, "peak reserved")[0])
                .isEqualTo(ByteSize.formatChange(b.peakReserved() - a.peakReserved()));
        assertThat(page).contains("aria-label=\"peaks of the two recordings\"");
        assertThat(Pattern.compile("<rect ").matcher(page).results().count())
                .as("six bars")
                .isEqualTo(6);

        List<List<String>> rows = rows(page, "sites");
        List<RecordingDiff.Site> sites = diff.sites();
        assertThat(rows).hasSameSizeAs(sites).isNotEmpty();
        for (int i = 0; i < rows.size(); i++) {
            RecordingDiff.Site s = sites.get(i);
            assertThat(rows.get(i))
                    .as(s.name())
                    .containsExactly(
                            s.name(),
                            Long.toString(s.requests(0)),
                            Long.toString(s.requests(1)),
                            Long.toString(s.matched(0)),
                            Long.toString(s.matched(1)),
                            ByteSize.format(s.bytes(0)),
                            ByteSize.format(s.bytes(1)),
                            ByteSize.format(s.atPeakAllocated(0)),
                            ByteSize.format(s.atPeakAllocated(1)),
                            ByteSize.formatChange(s.peakAllocatedDifference()),
                            ByteSize.format(s.atPeakReserved(0)),
                            ByteSize.format(s.atPeakReserved(1)));
        }
        List<List<String>> frag = rows(page, "fragmentation");
        RequestSequence[] both = {a, b};
        for (int side = 0; side < 2; side++) {
            RequestSequence s = both[side];
            long cached = diff.cachedAtPeakReserved(side);
            assertThat(frag.get(side))
                    .containsExactly(
                            side == 0 ? "A" : "B",
                            ByteSize.format(s.peakReserved()),
                            ByteSize.format(s.allocatedAtPeakReserved()),
                            ByteSize.format(cached),
                            String.format(Locale.ROOT, "%.3f", (double) cached / s.peakReserved()));
            assertThat(cached).isEqualTo(s.peakReserved() - s.allocatedAtPeakReserved());
        }
    }

    @Test
    void aDiffWithoutDriverCallsLeavesOutWhatItCannotKnow() {
        RecordingDiff diff = diff(false);
        assertThat(diff.reservedRecorded()).isFalse();
        String page = new DiffReport(diff).render();
        assertThat(card(page, "peak reserved")[0]).isEqualTo("n/a");
        assertThat(card(page, "peak reserved")[1]).startsWith("A n/a, B ");
        assertThat(Pattern.compile("<rect ").matcher(page).results().count())
                .as("the peak allocated bars only")
                .isEqualTo(2);
        assertThat(text(page)).contains("A does not record the allocator's driver calls");
        assertThat(page).doesNotContain("<table class=\"fragmentation\">");
        for (List<String> row : rows(page, "sites")) {
            assertThat(row.get(10)).as("A's bytes at its peak reserved").isEqualTo("n/a");
            assertThat(row.get(11)).isNotEqualTo("n/a");
        }
        assertThat(Arrays.asList(card(page, "requests A"))).doesNotContain("n/a");
    }
}
