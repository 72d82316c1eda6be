package io.gpumem.cli.report;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.cli.CliRun;
import io.gpumem.cli.JsonTree;
import io.gpumem.cli.trace.DiffCommandTest;
import io.gpumem.size.ByteSize;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The pages of issue 19 ("Will it fit?") in a real browser: the page of {@code diff A B --html} of two sizes of one
 * program renders in headless Chromium and shows the counts and the sites in the order {@code --json} of the same
 * run lists them; the report of a predicted recording ({@code predict ... --out}) renders with its timeline and a
 * what-if table whose mode column says what {@code compare --json} says for the same rows. Skipped, saying so,
 * without Chromium or without the shared traces.
 */
class WillItFitBrowserTest {
    private static final Pattern ROW = Pattern.compile("<tr><td><code>([^<]*)</code></td>(.*?)</tr>");
    private static final Pattern CELL = Pattern.compile("<td[^>]*>([^<]*)</td>");

    @TempDir
    Path dir;

    /** The medium model's inference at context 128 and 256; the test is skipped, saying so, without them. */
    private static String[] inferenceAt128And256() {
        return new String[] {
            DiffCommandTest.trace("lm-medium-infer-ctx128.pickle"),
            DiffCommandTest.trace("lm-medium-infer-ctx256.pickle")
        };
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> parseObject(String json) throws Exception {
        return (Map<String, Object>) JsonTree.parse(json);
    }

    @SuppressWarnings("unchecked")
    private static List<Map<String, Object>> parseRows(String json) throws Exception {
        return (List<Map<String, Object>>) JsonTree.parse(json);
    }

    @Test
    void diffPageOfTwoContextLengthsShowsTheSitesTheJsonLists() throws Exception {
        String[] traces = inferenceAt128And256();
        HeadlessChromium chromium = HeadlessChromium.orSkip();
        Path page = dir.resolve("diff.html");
        CliRun run = CliRun.run("diff", traces[0], traces[1], "--json", "--html", page.toString());
        assertThat(run.exit()).as(run.err()).isZero();
        Map<String, Object> o = parseObject(run.out());
        ReportBrowserTest.assertNoRequestCanLeave(Files.readString(page));

        HeadlessChromium.Result shown = chromium.dumpDom(page);
        ReportBrowserTest.assertRenderedCleanly(shown);
        String dom = shown.stdout();
        String text = ReportBrowserTest.visibleText(dom);
        // the counts and the peaks of the JSON, as the cards show them
        for (String[] card : new String[][] {
            {"requests A", "requests_a"},
            {"requests B", "requests_b"},
            {"matched", "matched"},
            {"only in A", "only_a"},
            {"only in B", "only_b"}
        }) {
            assertThat(text).as(card[0]).contains(card[0] + " " + o.get(card[1]));
        }
        assertThat((Long) o.get("matched")).isEqualTo((Long) o.get("requests_a"));
        long peakA = (Long) o.get("peak_allocated_a");
        long peakB = (Long) o.get("peak_allocated_b");
        assertThat(text)
                .contains("peak allocated " + ByteSize.formatChange(peakB - peakA))
                .contains("A " + ByteSize.format(peakA) + ", B " + ByteSize.format(peakB))
                .contains("A " + ByteSize.format((Long) o.get("peak_reserved_a")) + ", B "
                        + ByteSize.format((Long) o.get("peak_reserved_b")))
                .contains("Where fragmentation differs")
                .contains(ByteSize.format((Long) o.get("cached_at_peak_reserved_b")));

        // the sites table: every site of the JSON, in its order, with its figures
        @SuppressWarnings("unchecked")
        List<Map<String, Object>> sites = (List<Map<String, Object>>) o.get("sites");
        String table = dom.substring(dom.indexOf("<table class=\"sites\">"));
        table = table.substring(0, table.indexOf("</table>"));
        List<String> names = new ArrayList<>();
        List<List<String>> cells = new ArrayList<>();
        Matcher row = ROW.matcher(table);
        while (row.find()) {
            names.add(row.group(1).replace("&gt;", ">").replace("&lt;", "<").replace("&amp;", "&"));
            List<String> c = new ArrayList<>();
            Matcher cell = CELL.matcher(row.group(2));
            while (cell.find()) {
                c.add(cell.group(1));
            }
            cells.add(c);
        }
        assertThat(names)
                .as("sites in the order --json lists them")
                .containsExactlyElementsOf(
                        sites.stream().map(s -> (String) s.get("site")).toList());
        Map<String, Object> first = sites.getFirst();
        System.out.printf(
                "diff page of medium inference 128 vs 256: %d sites, first %s (%s at peak allocated in B), %d KiB%n",
                sites.size(), first.get("site"), first.get("at_peak_allocated_b"), Files.size(page) / 1024);
        assertThat(first.get("site")).isEqualTo("nn_utils.py:7 softmax");
        assertThat(cells.getFirst())
                .containsExactly(
                        first.get("requests_a").toString(),
                        first.get("requests_b").toString(),
                        first.get("matched_a").toString(),
                        first.get("matched_b").toString(),
                        ByteSize.format((Long) first.get("bytes_a")),
                        ByteSize.format((Long) first.get("bytes_b")),
                        ByteSize.format((Long) first.get("at_peak_allocated_a")),
                        ByteSize.format((Long) first.get("at_peak_allocated_b")),
                        ByteSize.formatChange(
                                (Long) first.get("at_peak_allocated_b") - (Long) first.get("at_peak_allocated_a")),
                        ByteSize.format((Long) first.get("at_peak_reserved_a")),
                        ByteSize.format((Long) first.get("at_peak_reserved_b")));
    }

    @Test
    void reportOfAPredictedRecordingRendersWithItsTimelineAndTheModeOfEachWhatIfRow() throws Exception {
        String[] traces = inferenceAt128And256();
        HeadlessChromium chromium = HeadlessChromium.orSkip();
        Path predicted = dir.resolve("predicted-512.pickle");
        CliRun predict = CliRun.run(
                "predict", traces[0] + "@128", traces[1] + "@256", "--at", "512", "--out", predicted.toString());
        assertThat(predict.exit()).as(predict.err()).isZero();
        assertThat(predicted).isRegularFile();
        Path page = dir.resolve("predicted-512.html");
        CliRun report =
                CliRun.run("report", predicted.toString(), "-o", page.toString(), "-c", "expandable_segments:True");
        assertThat(report.exit()).as(report.err()).isZero();
        CliRun compare = CliRun.run("compare", predicted.toString(), "-c", "expandable_segments:True", "--json");
        assertThat(compare.exit()).as(compare.err()).isZero();
        List<Map<String, Object>> rows = parseRows(compare.out());
        ReportBrowserTest.assertNoRequestCanLeave(Files.readString(page));

        HeadlessChromium.Result shown = chromium.dumpDom(page);
        ReportBrowserTest.assertRenderedCleanly(shown);
        String dom = shown.stdout();
        assertThat(dom).contains("class=\"chart timeline\"").contains("class=\"timeline-svg");
        String table = dom.substring(dom.indexOf("<table class=\"whatif\">"));
        table = table.substring(0, table.indexOf("</table>"));
        assertThat(table).contains("<th>config</th><th>mode</th>");
        for (Map<String, Object> r : rows) {
            String config = (String) r.get("config");
            String label = config.isEmpty() ? "(defaults)" : config;
            long passes = (Long) r.get("warm_up_passes");
            String mode = "steady".equals(r.get("mode")) ? "steady/" + (passes + 1) : "window";
            System.out.printf("predicted 512, %s: compare mode %s, warm-up passes %d%n", label, r.get("mode"), passes);
            List<String> cells = ReportPolicyTest.rowCells(table, label);
            assertThat(cells).as(label + " row of the what-if table").isNotEmpty();
            assertThat(cells.getFirst()).as(label + " mode").isEqualTo(mode);
        }
    }
}
