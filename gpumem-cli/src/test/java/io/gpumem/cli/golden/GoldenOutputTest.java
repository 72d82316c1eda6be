package io.gpumem.cli.golden;

import static org.assertj.core.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpumem.cli.CliRun;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicContainer;
import org.junit.jupiter.api.DynamicNode;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.io.TempDir;

/**
 * Golden output: what {@code compare}, {@code plan}, {@code analyze}, {@code report} and {@code demo} print on
 * every shared trace (and on two demo workloads) is pinned in {@code src/test/resources/golden/}, one readable
 * file per trace and command. Issue 18 refactors the what-if layer, the CLI and the snapshot model behind them;
 * this test, written before the refactor from the figures of main at that time, holds it to printing the same
 * figures afterwards.
 *
 * <p>Each run of {@code gpumem ARGS} is in-process ({@link CliRun}); its exit status, standard output and error,
 * and for {@code report} and {@code demo} the figures of the page written (its visible text and the embedded
 * report-data blocks, see {@link GoldenText#page}) are normalised by {@link GoldenText} (timings, written-page
 * sizes and absolute paths replaced by placeholders; every byte count, count, label, verdict and recommendation
 * kept) and compared with the golden file. A difference fails with a unified-style diff of the first differing
 * lines, naming the golden file and the command.
 *
 * <p><b>Updating.</b> {@code -Dgpumem.golden.update=true} (e.g. {@code ./run-tests -pl gpumem-cli -am
 * -Dtest=GoldenOutputTest -Dsurefire.failIfNoSpecifiedTests=false -Dgpumem.golden.update=true}) rewrites the
 * golden files from this run instead of comparing. Do that only when a figure changes on purpose, and say in the
 * commit message which figures changed and why; never to make a failure go away.
 *
 * <p>The shared traces are read from {@code gpumem.traces.dir} ({@code ../shared/traces}); where that folder is
 * absent the trace part is skipped, saying so. Pages and snapshots go to a temporary folder, never into the
 * repository (except the golden files themselves, and only in update mode).
 */
class GoldenOutputTest {

    static final boolean UPDATE = Boolean.getBoolean("gpumem.golden.update");
    static final Path GOLDEN = Path.of(System.getProperty("user.dir"), "src", "test", "resources", "golden");

    /** The what-if alternatives every trace's JSON compare runs, besides the recorded configuration. */
    static final String[] COMPARE_ALTERNATIVES = {
        "-c",
        "expandable_segments:True",
        "-c",
        "max_split_size_mb:64",
        "-c",
        "roundup_power2_divisions:4",
        "--policy",
        "stitch",
        "--policy",
        "planned"
    };

    @TempDir
    static Path tmp;

    @TestFactory
    Stream<DynamicNode> sharedTraces() throws IOException {
        String dir = System.getProperty("gpumem.traces.dir");
        Path traces = dir == null ? null : Path.of(dir);
        assumeTrue(
                traces != null && Files.isDirectory(traces),
                "real traces not present at " + dir
                        + " (gpumem.traces.dir): golden output of the shared traces skipped");
        List<Path> files;
        try (Stream<Path> s = Files.list(traces)) {
            files = s.filter(p -> p.getFileName().toString().matches(".*\\.(pickle|csv)"))
                    .sorted()
                    .toList();
        }
        assumeTrue(!files.isEmpty(), "no shared traces in " + traces + ": golden output skipped");
        GoldenText text = new GoldenText(Map.of(traces, "<traces>", tmp, "<tmp>"));
        return files.stream().map(f -> {
            String name = f.getFileName().toString();
            String stem = name.substring(0, name.lastIndexOf('.'));
            String file = f.toString();
            List<String> json = new ArrayList<>(List.of("compare", file, "--json"));
            json.addAll(Arrays.asList(COMPARE_ALTERNATIVES));
            Path html = tmp.resolve(stem + ".html");
            return DynamicContainer.dynamicContainer(
                    name,
                    Stream.of(
                            check(text, stem + ".compare", null, "compare", file),
                            check(text, stem + ".compare-json", null, json.toArray(String[]::new)),
                            check(text, stem + ".plan-json", null, "plan", file, "--json"),
                            check(text, stem + ".analyze", null, "analyze", file),
                            check(text, stem + ".report", html, "report", file, "-o", html.toString())));
        });
    }

    @TestFactory
    Stream<DynamicNode> demo() {
        GoldenText text = new GoldenText(Map.of(tmp, "<tmp>"));
        Path snapshot = tmp.resolve("demo.pickle");
        Path small = tmp.resolve("demo-small.pickle");
        return Stream.of(
                check(text, "demo.default", tmp.resolve("demo.html"), "demo", "--snapshot", snapshot.toString()),
                check(
                        text,
                        "demo.small",
                        tmp.resolve("demo-small.html"),
                        "demo",
                        "--layers=4",
                        "--hidden=1024",
                        "--heads=8",
                        "--steps=4",
                        "--seq-max=1024",
                        "--capacity=3GiB",
                        "--seed=7",
                        "--snapshot",
                        small.toString()));
    }

    /** One command against one golden file; {@code page}, when not null, is the HTML file the command writes. */
    private static DynamicTest check(GoldenText text, String golden, Path page, String... args) {
        return DynamicTest.dynamicTest(golden, () -> {
            CliRun r = CliRun.run(args);
            StringBuilder actual = new StringBuilder();
            actual.append("$ gpumem ")
                    .append(text.output(String.join(" ", args)))
                    .append('\n');
            actual.append("exit ").append(r.exit()).append('\n');
            actual.append("-- stdout\n").append(text.output(r.out()));
            if (!r.err().isEmpty()) {
                actual.append("-- stderr\n").append(text.output(r.err()));
            }
            if (page != null) {
                if (Files.isRegularFile(page)) {
                    actual.append(text.page(Files.readString(page, StandardCharsets.UTF_8)));
                } else {
                    actual.append("-- no page written\n");
                }
            }
            compare(golden + ".txt", text.output(String.join(" ", args)), actual.toString());
        });
    }

    private static void compare(String fileName, String command, String actual) throws IOException {
        Path file = GOLDEN.resolve(fileName);
        if (UPDATE) {
            Files.createDirectories(GOLDEN);
            Files.writeString(file, actual, StandardCharsets.UTF_8);
            return;
        }
        if (!Files.isRegularFile(file)) {
            fail("no golden file " + file + " for gpumem " + command
                    + "; write it with -Dgpumem.golden.update=true (and check what it pins)");
        }
        String expected = Files.readString(file, StandardCharsets.UTF_8);
        if (!expected.equals(actual)) {
            fail("golden output differs: " + fileName + " (gpumem " + command + ")\n"
                    + diff(fileName, expected, actual)
                    + "if the change is intended, rewrite with -Dgpumem.golden.update=true and say why in the commit");
        }
    }

    /** A unified-style hunk around the first difference: common prefix and suffix trimmed, 3 lines of context. */
    static String diff(String name, String expected, String actual) {
        String[] a = expected.split("\n", -1);
        String[] b = actual.split("\n", -1);
        int start = 0;
        while (start < a.length && start < b.length && a[start].equals(b[start])) {
            start++;
        }
        int endA = a.length;
        int endB = b.length;
        while (endA > start && endB > start && a[endA - 1].equals(b[endB - 1])) {
            endA--;
            endB--;
        }
        int from = Math.max(0, start - 3);
        int limit = 30;
        StringBuilder sb = new StringBuilder();
        sb.append("--- golden/").append(name).append('\n').append("+++ actual\n");
        sb.append("@@ -")
                .append(from + 1)
                .append(',')
                .append(endA - from)
                .append(" +")
                .append(from + 1)
                .append(',')
                .append(endB - from)
                .append(" @@\n");
        for (int i = from; i < start; i++) {
            sb.append(' ').append(a[i]).append('\n');
        }
        for (int i = start; i < Math.min(endA, start + limit); i++) {
            sb.append('-').append(a[i]).append('\n');
        }
        if (endA - start > limit) {
            sb.append("... ").append(endA - start - limit).append(" more golden lines differ\n");
        }
        for (int i = start; i < Math.min(endB, start + limit); i++) {
            sb.append('+').append(b[i]).append('\n');
        }
        if (endB - start > limit) {
            sb.append("... ").append(endB - start - limit).append(" more actual lines differ\n");
        }
        return sb.toString();
    }
}
