package io.gpumem.report;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import io.gpumem.engine.RunOutcome;
import io.gpumem.size.ByteSize;
import io.gpumem.trace.analysis.AllocatorStates;
import io.gpumem.trace.analysis.DeviceAnalysis;
import io.gpumem.trace.analysis.OomEvent;
import io.gpumem.trace.analysis.Percent;
import io.gpumem.trace.analysis.Recommender;
import io.gpumem.trace.analysis.StateAnalysis;
import io.gpumem.trace.analysis.StateAnalyzer;
import io.gpumem.trace.io.AllocatorSnapshots;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.session.TraceSession;
import io.gpumem.trace.workload.TrainingWorkload;
import io.gpumem.trace.workload.WorkloadWhatIf;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The page without a browser: what it contains, that it can fetch nothing, and that its data parses. */
class HtmlReportTest {
    static StateAnalysis analysis;
    static TraceSnapshot trace;
    static WorkloadWhatIf whatIf;
    static Recommender.Result recs;

    /** A small generated training job on a device too small for it: it runs out of memory. */
    @BeforeAll
    static void render() {
        TrainingWorkload w = TrainingWorkload.builder()
                .layers(4)
                .hidden(512)
                .heads(4)
                .vocab(8000)
                .batch(4)
                .seqLens(128, 1024, 128)
                .steps(6)
                .seed(11)
                .build();
        whatIf = new WorkloadWhatIf(w, w.peakLiveBytes() * 3 / 4, 0, false);
        RunOutcome run = whatIf.runWithHistory("");
        assertThat(run.completed()).isFalse();
        OomEvent oom =
                new OomEvent(run.oomReport().roundedSize(), run.oomReport().deviceFree(), 0, -1);
        analysis =
                new StateAnalyzer().analyze(AllocatorStates.capture(run.allocator(), "", "test <run> & \"oom\"", oom));
        recs = new Recommender().recommend(analysis, whatIf);
        trace = AllocatorSnapshots.toTraceSnapshot(run.allocator().snapshot(), "test");
    }

    /** The page, built by each test that reads it (so a mutation tester credits the test with building it). */
    static String page() {
        return new HtmlReport("a </script> trace")
                .addDevice(
                        TraceSession.of(trace),
                        new DeviceAnalysis(0, trace.traceOf(0).size(), analysis, whatIf, recs, List.of()),
                        List.of())
                .render();
    }

    /** Each what-if row says its mode as compare's table does: window, or steady/N after N passes. */
    @Test
    void whatIfRowsSayTheirMode() {
        RunOutcome steady = RunOutcome.builder()
                .label("garbage_collection_threshold:0.6")
                .peakAllocated(3L << 30)
                .peakReserved(4L << 30)
                .warmUpPasses(2)
                .build();
        String html = new HtmlReport("modes")
                .addDevice(
                        TraceSession.of(trace),
                        new DeviceAnalysis(0, trace.traceOf(0).size(), analysis, whatIf, recs, List.of()),
                        List.of(steady))
                .render();
        String table = html.substring(html.indexOf("<table class=\"whatif\">"));
        table = table.substring(0, table.indexOf("</table>"));
        assertThat(table).contains("<th>config</th><th>mode</th>");
        assertThat(table)
                .contains("<td>garbage_collection_threshold:0.6</td><td class=\"mode\" title=\"2 warm-up passes of the"
                        + " step from the live blocks, then the measured one\">steady/3</td>");
        String page = page();
        assertThat(page.substring(page.indexOf("<table class=\"whatif\">")))
                .contains("<td class=\"mode\" title=\"the window from its recorded start\">window</td>");
    }

    /**
     * compare's row for the recorded configuration is the recommender's baseline under another label: the page showed
     * the same run twice, first as the baseline and last as "recorded (defaults)".
     */
    @Test
    void comparesRecordedRowIsTheBaselineNotASecondRow() {
        assertThat(recs.baseline()).isNotNull();
        RunOutcome recorded = recs.baseline().toBuilder()
                .label("recorded (defaults)")
                .recorded(true)
                .build();
        String without = whatIfTable(List.of());
        String with = whatIfTable(List.of(recorded));
        assertThat(with.split("<tr", -1)).hasSameSizeAs(without.split("<tr", -1));
        assertThat(with).doesNotContain("recorded (defaults)");
    }

    private static String whatIfTable(List<RunOutcome> extra) {
        String html = new HtmlReport("rows")
                .addDevice(
                        TraceSession.of(trace),
                        new DeviceAnalysis(0, trace.traceOf(0).size(), analysis, whatIf, recs, List.of()),
                        extra)
                .render();
        String table = html.substring(html.indexOf("<table class=\"whatif\">"));
        return table.substring(0, table.indexOf("</table>"));
    }

    @Test
    void forbidsEveryRequestAndLinksNothing() {
        String page = page();
        assertThat(page).contains("<meta http-equiv=\"Content-Security-Policy\" content=\"" + HtmlReport.CSP + "\">");
        assertThat(page).doesNotContainPattern("(?i)(src|href)\\s*=\\s*[\"']?(https?:)?//");
        assertThat(page).doesNotContainPattern("(?i)<link\\b|<img\\b|<iframe\\b|@import|url\\(");
    }

    @Test
    void showsTheAnalysisFiguresAsTextAndEscapesNames() {
        String page = page();
        assertThat(page)
                .contains("Why it ran out of memory")
                .contains(ByteSize.formatSigned(analysis.all().reserved()))
                .contains(ByteSize.formatSigned(analysis.all().largestFree()))
                .contains(Percent.of(analysis.all().externalFragmentation()))
                .contains("test &lt;run&gt; &amp; &quot;oom&quot;")
                .contains("a &lt;/script&gt; trace")
                .doesNotContain("a </script> trace");
    }

    @Test
    void embeddedDataParsesAndNamesTheDemoSites() throws Exception {
        String page = page();
        Matcher m = Pattern.compile(
                        "<script type=\"application/json\" class=\"report-data\" data-device=\"0\">(.*?)</script>",
                        Pattern.DOTALL)
                .matcher(page);
        assertThat(m.find()).isTrue();
        String json = m.group(1);
        int tokens = 0;
        try (JsonParser p = new JsonFactory().createParser(json)) {
            while (p.nextToken() != null) {
                tokens++;
            }
        }
        assertThat(tokens).isGreaterThan(100);
        assertThat(json)
                .contains("\"oom\":{")
                .contains("\"maps\":[")
                .contains("model.py:")
                .contains("optim.py:")
                .contains("exp_avg");
    }

    @Test
    void writesAtomicallyAndReadably(@TempDir Path dir) throws Exception {
        Path file = dir.resolve("sub/report.html");
        new HtmlReport("x").write(file);
        assertThat(Files.readString(file)).startsWith("<!DOCTYPE html>").contains("nothing to show");
        try (var files = Files.list(file.getParent())) {
            assertThat(files.toList()).containsExactly(file);
        }
    }
}
