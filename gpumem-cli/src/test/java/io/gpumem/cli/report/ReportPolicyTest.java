package io.gpumem.cli.report;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import io.gpumem.cli.CliRun;
import io.gpumem.size.ByteSize;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code report --policy}: the page's what-if table carries each policy's row with the figures
 * {@code compare --policy} prints for it, on the example snapshot that ships with the repository.
 */
class ReportPolicyTest {

    static final Path DEMO_SMALL = Path.of("..", "examples", "demo-small.pickle");

    @TempDir
    Path dir;

    @Test
    void stitchRowShowsTheMinimumCapacityCompareComputes() throws Exception {
        assertThat(DEMO_SMALL).isRegularFile();
        CliRun compare =
                CliRun.run("compare", DEMO_SMALL.toString(), "--policy", "stitch", "--policy", "planned", "--json");
        assertThat(compare.exit()).as(compare.err()).isZero();
        Map<String, Long> minCapacity = minCapacityByPolicy(compare.lastLine());
        assertThat(minCapacity).containsKeys("stitch", "planned");

        Path page = dir.resolve("page.html");
        CliRun report = CliRun.run(
                "report", DEMO_SMALL.toString(), "-o", page.toString(), "--policy", "stitch", "--policy", "planned");
        assertThat(report.exit()).as(report.err()).isZero();
        assertThat(report.err()).doesNotContain("failed");
        String html = Files.readString(page);
        String table = html.substring(html.indexOf("<table class=\"whatif\">"));
        table = table.substring(0, table.indexOf("</table>"));
        // one row a policy: the recommender, which tries the --policy policies too, does not list its run again
        List<String> labels = new ArrayList<>();
        Matcher label = Pattern.compile("<tr[^>]*><td>([^<]*)").matcher(table);
        while (label.find()) {
            labels.add(label.group(1).trim());
        }
        assertThat(labels).filteredOn(l -> l.contains("stitch")).containsExactly("stitch");
        assertThat(labels).filteredOn(l -> l.contains("planned")).containsExactly("planned");
        for (String policy : List.of("stitch", "planned")) {
            List<String> cells = rowCells(table, policy);
            // the last column is the minimum capacity
            assertThat(cells.getLast())
                    .as(policy + " row of " + cells)
                    .isEqualTo(ByteSize.formatSigned(minCapacity.get(policy)));
        }
    }

    @Test
    void withoutPolicyThePageHasNoPolicyRow() throws Exception {
        Path page = dir.resolve("plain.html");
        CliRun report = CliRun.run("report", DEMO_SMALL.toString(), "-o", page.toString());
        assertThat(report.exit()).as(report.err()).isZero();
        assertThat(Files.readString(page)).doesNotContain("<td>stitch</td>").doesNotContain("<td>planned</td>");
    }

    @Test
    void unknownPolicyIsBadInputAndWritesNothing() {
        Path page = dir.resolve("bad.html");
        CliRun r = CliRun.run("report", DEMO_SMALL.toString(), "-o", page.toString(), "--policy", "bestfit");
        assertThat(r.exit()).isEqualTo(2);
        assertThat(r.err()).startsWith("gpumem report: bad --policy: unknown policy 'bestfit'");
        assertThat(page).doesNotExist();
    }

    /**
     * The text of each cell after the label of the what-if row labelled {@code label} (which may carry a tag such as
     * "recommended").
     */
    static List<String> rowCells(String table, String label) {
        Matcher row = Pattern.compile(
                        "<tr[^>]*><td>" + Pattern.quote(label) + "(?: <span[^>]*>[^<]*</span>)*</td>(.*?)</tr>")
                .matcher(table);
        assertThat(row.find()).as("row " + label + " in " + table).isTrue();
        Matcher cell = Pattern.compile("<td[^>]*>(.*?)</td>").matcher(row.group(1));
        List<String> cells = new ArrayList<>();
        while (cell.find()) {
            cells.add(cell.group(1));
        }
        return cells;
    }

    /** compare's JSON array: policy name -> min_capacity, for the rows of policies other than pytorch. */
    static Map<String, Long> minCapacityByPolicy(String json) throws Exception {
        Map<String, Long> result = new LinkedHashMap<>();
        try (JsonParser p = new JsonFactory().createParser(json)) {
            assertThat(p.nextToken()).isEqualTo(JsonToken.START_ARRAY);
            while (p.nextToken() == JsonToken.START_OBJECT) {
                String policy = null;
                long min = -1;
                while (p.nextToken() != JsonToken.END_OBJECT) {
                    String key = p.currentName();
                    p.nextToken();
                    if (key.equals("policy")) {
                        policy = p.getText();
                    } else if (key.equals("min_capacity")) {
                        min = p.getLongValue();
                    }
                }
                if (!"pytorch".equals(policy)) {
                    result.put(policy, min);
                }
            }
        }
        return result;
    }
}
