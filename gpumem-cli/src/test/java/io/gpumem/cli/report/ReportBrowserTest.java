package io.gpumem.cli.report;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpumem.alloc.Pool;
import io.gpumem.cli.CliRun;
import io.gpumem.cli.SnapshotFiles;
import io.gpumem.engine.RunOutcome;
import io.gpumem.history.BlockInfo;
import io.gpumem.history.BlockState;
import io.gpumem.history.PoolId;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.report.HtmlReport;
import io.gpumem.trace.io.AllocatorSnapshots;
import io.gpumem.trace.workload.TrainingWorkload;
import io.gpumem.trace.workload.WorkloadWhatIf;
import java.awt.image.BufferedImage;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import javax.imageio.ImageIO;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The HTML report in a real browser: for every shared trace, {@code gpumem report} writes a page that headless
 * Chromium renders with no script error and no blocked request, whose charts were all drawn, and whose text
 * holds every figure {@code gpumem analyze} prints for that trace. The demo's page is also screenshotted and
 * the screenshot must not be blank. One browser launch per page; skipped, saying so, without Chromium or
 * without the shared traces.
 */
class ReportBrowserTest {
    /** Byte sizes as format_size writes them, percentages, ratios, segment addresses. */
    private static final Pattern FIGURE = Pattern.compile(
            "-?\\d+(?:\\.\\d+)? (?:bytes|KiB|MiB|GiB|TiB|PiB)|\\d+\\.\\d%|\\b\\d\\.\\d{3}\\b|0x[0-9a-f]{6,}");

    private static final Pattern TAG = Pattern.compile("<[^>]*>");
    private static final Pattern HIDDEN = Pattern.compile("(?is)<(script|style)\\b.*?</\\1>");

    static HeadlessChromium chromium;

    @TempDir
    Path dir;

    private static void assumeBrowser() {
        chromium = HeadlessChromium.orSkip();
    }

    static Stream<String> sharedTraces() throws IOException {
        String traces = System.getProperty("gpumem.traces.dir");
        if (traces == null || !Files.isDirectory(Path.of(traces))) {
            return Stream.of("(shared traces absent)");
        }
        try (Stream<Path> files = Files.list(Path.of(traces))) {
            return files
                    .filter(p -> !p.getFileName().toString().endsWith(".md"))
                    .map(Path::toString)
                    .sorted()
                    .toList()
                    .stream();
        }
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("sharedTraces")
    void reportOfASharedTraceRendersOfflineAndShowsTheFiguresAnalyzePrints(String trace) throws Exception {
        assumeTrue(
                !trace.startsWith("("),
                "real traces not available (system property gpumem.traces.dir = "
                        + System.getProperty("gpumem.traces.dir") + "): skipped");
        assumeBrowser();
        Path page = dir.resolve("report.html");
        long started = System.nanoTime();
        CliRun report = CliRun.run("report", trace, "-o", page.toString());
        long reportMs = (System.nanoTime() - started) / 1_000_000;
        assertThat(report.exit()).as(report.err()).isZero();
        CliRun analyze = CliRun.run("analyze", trace);
        assertThat(analyze.exit()).as(analyze.err()).isZero();

        String html = Files.readString(page);
        assertNoRequestCanLeave(html);
        started = System.nanoTime();
        HeadlessChromium.Result shown = chromium.dumpDom(page);
        long renderMs = (System.nanoTime() - started) / 1_000_000;
        System.out.printf(
                "report of %s: %d KiB, written in %d ms, rendered by chromium in %d ms%n",
                Path.of(trace).getFileName(), Files.size(page) / 1024, reportMs, renderMs);
        assertRenderedCleanly(shown);
        String text = visibleText(shown.stdout());
        assertThat(missing(figures(analyze.out()), text))
                .as("figures analyze prints that the page does not show")
                .isEmpty();
        for (String headline :
                List.of("no out-of-memory to explain", "FRAGMENTATION", "LIVE TENSORS", "MEMORY HELD OUTSIDE")) {
            if (analyze.out().contains("diagnosis: " + headline)) {
                assertThat(text).contains(headline);
            }
        }
        assertThat(text).contains("What the live bytes are for").contains("stack by site category");
        assertThat(shown.stdout()).contains("data-stack=\"site\"");
        if (trace.contains("llama-offload-10-streams")) {
            assertCategoryTimeline(chromium.dumpDom(page, "stack=category"));
        }
        if (trace.endsWith(".csv")) { // requests only: no reserved bytes to draw, and the legend says so
            assertThat(html).doesNotContain("\"res\":");
            assertThat(shown.stdout()).contains("(reserved not recorded)");
            assertThat(text).contains("without reserved bytes");
        }
    }

    /**
     * The timeline as the toggle's category side draws it: the radio checked, the chart marked and stacked in one band
     * per category (six legend entries), and still no script error.
     */
    static void assertCategoryTimeline(HeadlessChromium.Result shown) {
        assertRenderedCleanly(shown);
        String dom = shown.stdout();
        assertThat(dom).contains("data-stack=\"category\"").contains("class=\"timeline-svg category\"");
        assertThat(dom).doesNotContain("data-stack=\"site\"");
        String legend = dom.substring(dom.indexOf("class=\"timeline-svg category\""));
        for (String c : List.of("parameters", "gradients", "optimizer_state", "activations", "temporaries", "other")) {
            assertThat(legend).contains("</span>" + c + "</span>");
        }
        assertThat(countOf(legend, "class=\"band\""))
                .as("one band per category")
                .isGreaterThanOrEqualTo(6);
    }

    @Test
    void demoReportShowsWhyStep8RunsOutOfMemoryAndItsScreenshotIsNotBlank() throws Exception {
        assumeBrowser();
        Path snapshot = dir.resolve("demo.pickle");
        CliRun demo = CliRun.run("demo", "--snapshot", snapshot.toString());
        assertThat(demo.exit()).as(demo.err()).isZero();
        Path page = dir.resolve("demo.html");
        assertThat(demo.out()).contains("HTML report written to " + page.toAbsolutePath());
        assertNoRequestCanLeave(Files.readString(page));

        HeadlessChromium.Result shown = chromium.dumpDom(page);
        assertRenderedCleanly(shown);
        String text = visibleText(shown.stdout());
        // the story, drawn by the page itself: the OOM marker on the timeline and the request that failed
        assertThat(shown.stdout()).contains("class=\"oom-marker\"").contains("class=\"largest-free\"");
        assertThat(text)
                .contains("Why it ran out of memory")
                .contains("OOM: asked 1.46 GiB")
                .contains("FRAGMENTATION: enough cached free bytes, but no free block fits")
                .contains("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True");
        // sites come from the demo's frames (op, layer, phase), not from one anonymous label
        assertThat(shown.stdout()).contains("model.py:").contains("optim.py:").contains("exp_avg");
        String analysis = demo.out()
                .substring(demo.out().indexOf("== default config"), demo.out().indexOf("snapshot of the default run"));
        assertThat(missing(figures(analysis), text))
                .as("figures demo prints that the page does not show")
                .isEmpty();
        // the split at the OOM and the ranked remedies, printed and on the page; the timeline by category on request
        assertThat(demo.out()).contains("at the OOM").contains("remedies at the peak (best first):");
        assertThat(text)
                .contains("What the live bytes are for")
                .contains("at the OOM")
                .contains("PyTorch today: yes:");
        assertCategoryTimeline(chromium.dumpDom(page, "stack=category"));

        Path png = dir.resolve("demo.png");
        chromium.screenshot(page, png, 1280, 1800);
        BufferedImage image = ImageIO.read(png.toFile());
        assertThat(image).as("screenshot decodes").isNotNull();
        assertNotBlank(image);
    }

    /**
     * A long trace (a generated training job of many steps, recorded until its OOM: tens of thousands of entries)
     * gives a page whose timeline is cut to at most {@code MAX_POINTS} points plus one per OOM, among them the peak
     * and the OOM with their exact bytes, so the page stays as small and as quick to draw as a short trace's; it
     * renders cleanly with the OOM marked. The render time is printed (the issue's figure: under 10 s for a 1 GB
     * snapshot), not asserted: a test's clock on a loaded machine says nothing.
     */
    @Test
    void reportOfALongTraceIsDownsampledKeepingThePeakAndTheOomAndRenders() throws Exception {
        assumeBrowser();
        int[] schedule = new int[120]; // short sequences, then one long one that runs out of memory at the end
        Arrays.fill(schedule, 128);
        schedule[schedule.length - 1] = 1024;
        TrainingWorkload w = TrainingWorkload.builder()
                .layers(2)
                .hidden(256)
                .heads(4)
                .vocab(2000)
                .batch(2)
                .seqSchedule(schedule)
                .steps(schedule.length)
                .build();
        RunOutcome run = new WorkloadWhatIf(w, w.peakLiveBytes() * 9 / 10, 0, false).runWithHistory("");
        assertThat(run.completed()).as("the recorded run must hit an OOM").isFalse();
        Path trace = dir.resolve("long.pickle");
        AllocatorSnapshots.write(run.allocator().snapshot(), trace);
        Path page = dir.resolve("long.html");
        CliRun report = CliRun.run("report", trace.toString(), "-o", page.toString(), "--trace-device", "0");
        assertThat(report.exit()).as(report.err()).isZero();
        String html = Files.readString(page);
        int entries = intField(html, "\"entries\":(\\d+)");
        int peak = intField(html, "\"peak\":\\{\"index\":(\\d+)");
        int oom = intField(html, "\"oom\":\\{\"index\":(\\d+)");
        Matcher x = Pattern.compile("\"x\":\\[([0-9,]*)]").matcher(html);
        assertThat(x.find()).as("the timeline's points").isTrue();
        List<Integer> points =
                Stream.of(x.group(1).split(",")).map(Integer::parseInt).toList();
        assertThat(entries).as("entries: enough to be cut").isGreaterThan(20 * HtmlReport.TIMELINE_POINTS);
        assertThat(points.size()).isBetween(HtmlReport.TIMELINE_POINTS / 2, HtmlReport.TIMELINE_POINTS + 1);
        assertThat(points).contains(peak, oom).isSorted();
        long started = System.nanoTime();
        HeadlessChromium.Result shown = chromium.dumpDom(page);
        long renderMs = (System.nanoTime() - started) / 1_000_000;
        System.out.printf(
                "report of a generated trace of %d entries: %d timeline points, %d KiB, rendered by chromium in %d ms%n",
                entries, points.size(), Files.size(page) / 1024, renderMs);
        assertRenderedCleanly(shown);
        assertThat(shown.stdout()).contains("class=\"oom-marker\"");
    }

    /**
     * The figures the page's script draws (the OOM label on the timeline, the segment map's largest free block and
     * reserved bytes) read as {@code analyze} prints them, at the units' bounds too: a request of exactly 1 GiB is
     * "1024.00 MiB" (the script printed "1.00 GiB"), a segment of 1 GiB "1024.00 MiB", and a free block of 1.125 MiB
     * "1.12 MiB", rounded half to even as PyTorch's format_size does (the script rounded the tie up to "1.13 MiB").
     */
    @Test
    void figuresTheScriptDrawsReadAsAnalyzePrintsThemAtTheUnitsBounds() throws Exception {
        assumeBrowser();
        long base = 0x7f0000000000L;
        long gib = 1L << 30;
        long free = 1152L << 10; // 1.125 MiB: a tie at two decimals
        long live = gib - free;
        SegmentInfo segment = new SegmentInfo(
                0,
                base,
                gib,
                live,
                live,
                live,
                0,
                Pool.LARGE,
                false,
                List.of(),
                List.of(
                        BlockInfo.of(base, live, live, BlockState.ACTIVE_ALLOCATED),
                        BlockInfo.of(base + live, free, 0, BlockState.INACTIVE)),
                PoolId.DEFAULT,
                null);
        List<TraceEntry> trace = List.of(
                TraceEntry.of(TraceAction.SEGMENT_ALLOC, base, gib, 0),
                TraceEntry.of(TraceAction.ALLOC, base, live, 0),
                new TraceEntry(TraceAction.OOM, 0, gib, 0, 0, List.of(), 0, null));
        Path file = writeSnapshot("bounds.pickle", List.of(segment), trace);
        Path page = dir.resolve("bounds.html");
        CliRun report = CliRun.run("report", file.toString(), "-o", page.toString());
        assertThat(report.exit()).as(report.err()).isZero();
        CliRun analyze = CliRun.run("analyze", file.toString());
        assertThat(analyze.exit()).as(analyze.err()).isZero();
        assertThat(analyze.out())
                .contains("a request of 1024.00 MiB")
                .contains("1.12 MiB")
                .contains("1024.00 MiB");

        HeadlessChromium.Result shown = chromium.dumpDom(page);
        assertRenderedCleanly(shown);
        String text = visibleText(shown.stdout());
        assertThat(text)
                .contains("OOM: asked 1024.00 MiB")
                .contains("largest free block: 1.12 MiB")
                .contains("1 segments, 1024.00 MiB reserved");
    }

    /**
     * A program whose first request ran out of memory records one {@code oom} entry and nothing else: the page
     * renders it cleanly with the OOM marked, and its axes count whole bytes (with nothing allocated, it read "0.2
     * bytes", "0.6000000000000001 bytes") and name only the entry there is (the axis spans [0, 1] and named "#1").
     */
    @Test
    void reportOfATraceOfOneOomEntryRendersWithWholeBytesOnItsAxis() throws Exception {
        assumeBrowser();
        Path file = writeSnapshot(
                "first-request.pickle",
                List.of(),
                List.of(new TraceEntry(TraceAction.OOM, 0, 100L << 30, 0, 0, List.of(), 79L << 30, null)));
        Path page = dir.resolve("first-request.html");
        CliRun report = CliRun.run("report", file.toString(), "-o", page.toString());
        assertThat(report.exit()).as(report.err()).isZero();

        HeadlessChromium.Result shown = chromium.dumpDom(page);
        assertRenderedCleanly(shown);
        assertThat(shown.stdout()).contains("class=\"oom-marker\"");
        String text = visibleText(shown.stdout());
        assertThat(text).contains("OOM: asked 100.00 GiB").contains("0 bytes");
        assertThat(text).doesNotContainPattern("\\d\\.\\d+ bytes");
        assertThat(text).as("the entries the axis names").contains(" #0 ").doesNotContain("#1");
    }

    /** {@code segments} and one device's {@code trace} as a PyTorch snapshot in the test's folder. */
    private Path writeSnapshot(String name, List<SegmentInfo> segments, List<TraceEntry> trace) throws IOException {
        return SnapshotFiles.write(dir, name, segments, trace);
    }

    private static int intField(String html, String regex) {
        Matcher m = Pattern.compile(regex).matcher(html);
        assertThat(m.find()).as(regex).isTrue();
        return Integer.parseInt(m.group(1));
    }

    /** Every figure-looking token of a text report, in order, without repeats. */
    static Set<String> figures(String report) {
        Set<String> found = new LinkedHashSet<>();
        Matcher m = FIGURE.matcher(report);
        while (m.find()) {
            found.add(m.group());
        }
        return found;
    }

    private static java.util.List<String> missing(Set<String> figures, String text) {
        return figures.stream().filter(f -> !text.contains(f)).toList();
    }

    /**
     * The page's text as a reader sees it: scripts, styles and tags dropped (so the embedded data cannot stand in
     * for a figure), entities decoded, spaces collapsed.
     */
    static String visibleText(String dom) {
        String text = TAG.matcher(HIDDEN.matcher(dom).replaceAll(" "))
                .replaceAll(" ")
                .replace("&nbsp;", " ")
                .replace("&gt;", ">")
                .replace("&lt;", "<")
                .replace("&amp;", "&");
        return text.replaceAll("\\s+", " ");
    }

    static void assertNoRequestCanLeave(String html) {
        assertThat(html).contains("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none';");
        assertThat(html).doesNotContainPattern("(?i)(src|href|action|srcset)\\s*=\\s*[\"']?\\s*(https?:)?//");
        assertThat(html).doesNotContainPattern("(?i)url\\(\\s*[\"']?(https?:)?//");
        assertThat(html).doesNotContainPattern("(?i)@import|<link\\b|<iframe\\b|<img\\b[^>]*src=\"(?!data:)");
    }

    static void assertRenderedCleanly(HeadlessChromium.Result shown) {
        String dom = shown.stdout();
        assertThat(dom).as("chromium printed a DOM").contains("</html>");
        assertThat(dom)
                .as("no script error or blocked request recorded by the page")
                .contains("<div id=\"script-errors\" hidden=\"\"></div>");
        assertThat(dom).as("the page's script finished drawing").contains("data-render=\"ok\"");
        Matcher charts = Pattern.compile("data-charts=\"(\\d+)\"").matcher(dom);
        assertThat(charts.find()).isTrue();
        assertThat(Integer.parseInt(charts.group(1)))
                .as("charts drawn")
                .isEqualTo(countOf(dom, "class=\"chart timeline\"") + countOf(dom, "class=\"chart segmap\""));
        assertThat(shown.log())
                .as("browser log")
                .doesNotContain("Refused to")
                .doesNotContain("Uncaught")
                .doesNotContain("net::ERR_");
    }

    private static int countOf(String s, String what) {
        int n = 0;
        for (int i = s.indexOf(what); i >= 0; i = s.indexOf(what, i + 1)) {
            n++;
        }
        return n;
    }

    /** Not one flat colour: the luminance varies and many colours appear. */
    static void assertNotBlank(BufferedImage image) {
        Set<Integer> colours = new java.util.HashSet<>();
        double sum = 0;
        double sumSq = 0;
        int n = 0;
        for (int y = 0; y < image.getHeight(); y += 3) {
            for (int x = 0; x < image.getWidth(); x += 3) {
                int rgb = image.getRGB(x, y) & 0xffffff;
                colours.add(rgb);
                double lum = 0.2126 * (rgb >> 16) + 0.7152 * ((rgb >> 8) & 0xff) + 0.0722 * (rgb & 0xff);
                sum += lum;
                sumSq += lum * lum;
                n++;
            }
        }
        double variance = sumSq / n - (sum / n) * (sum / n);
        assertThat(variance).as("luminance variance of the screenshot").isGreaterThan(200.0);
        assertThat(colours.size()).as("distinct colours in the screenshot").isGreaterThan(50);
    }
}
