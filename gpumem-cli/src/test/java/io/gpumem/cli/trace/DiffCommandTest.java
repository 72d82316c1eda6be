package io.gpumem.cli.trace;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpumem.cli.CliRun;
import io.gpumem.cli.JsonTree;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * {@code gpumem diff}: the issue 19 acceptance checks on the shared families (99% of the smaller recording matched,
 * the JSON keys, sites ordered by difference), unrelated programs reported as such, and bad input refused with
 * exit 2 and the file named. Trace-based cases are skipped, saying so, without {@code ../shared/traces}.
 */
public class DiffCommandTest {

    /** A small snapshot of the repository's own: diffed with itself, every request matches. */
    static final Path DEMO_SMALL = Path.of("..", "examples", "demo-small.pickle");

    @SuppressWarnings("unchecked")
    static Map<String, Object> object(String text) throws IOException {
        return (Map<String, Object>) JsonTree.parse(text);
    }

    static long num(Map<String, Object> o, String key) {
        return (Long) o.get(key);
    }

    @SuppressWarnings("unchecked")
    static List<Map<String, Object>> sites(Map<String, Object> o) {
        return (List<Map<String, Object>>) o.get("sites");
    }

    /** The shared trace {@code name}'s path; the test is skipped, saying so, where it is absent. */
    public static String trace(String name) {
        String d = System.getProperty("gpumem.traces.dir");
        assumeTrue(d != null && Files.isRegularFile(Path.of(d, name)), "trace " + name + " not available: skipped");
        return Path.of(d, name).toString();
    }

    @ParameterizedTest(name = "{0} vs {1}")
    @CsvSource({
        "lm2.7b-sweep-ctx128, lm2.7b-sweep-ctx256",
        "lm-medium-train-ctx128, lm-medium-train-ctx256",
        "lm-medium-infer-ctx128, lm-medium-infer-ctx256",
        "lm-medium-infer-ctx256, lm-medium-infer-ctx512",
        "lm-medium-infer-ctx128, lm-medium-infer-ctx512"
    })
    void twoSizesOfOneProgram(String a, String b) throws IOException {
        CliRun run = CliRun.run("diff", trace(a + ".pickle"), trace(b + ".pickle"), "--json");
        assertThat(run.exit()).as(run.err()).isZero();
        Map<String, Object> o = object(run.out());
        long ra = num(o, "requests_a");
        long rb = num(o, "requests_b");
        long matched = num(o, "matched");
        System.out.printf("diff %s %s: %d / %d requests, %d matched%n", a, b, ra, rb, matched);
        assertThat(matched).isGreaterThanOrEqualTo((long) Math.ceil(0.99 * Math.min(ra, rb)));
        assertThat(num(o, "only_a")).isEqualTo(ra - matched);
        assertThat(num(o, "only_b")).isEqualTo(rb - matched);
        assertThat(o.get("same_program")).isEqualTo(true);
        for (String key : new String[] {"peak_allocated_a", "peak_allocated_b", "peak_reserved_a", "peak_reserved_b"}) {
            assertThat(num(o, key)).as(key).isPositive();
        }
        // the sites split each peak exactly, and come largest difference first
        long sumA = 0;
        long sumB = 0;
        long previous = Long.MAX_VALUE;
        long requestsA = 0;
        for (Map<String, Object> s : sites(o)) {
            sumA += num(s, "at_peak_allocated_a");
            sumB += num(s, "at_peak_allocated_b");
            requestsA += num(s, "requests_a");
            long diff = Math.abs(num(s, "at_peak_allocated_b") - num(s, "at_peak_allocated_a"));
            assertThat(diff).isLessThanOrEqualTo(previous);
            previous = diff;
        }
        assertThat(sumA).isEqualTo(num(o, "peak_allocated_a"));
        assertThat(sumB).isEqualTo(num(o, "peak_allocated_b"));
        assertThat(requestsA).isEqualTo(ra);
    }

    @Test
    void unrelatedProgramsAreSaidToBeUnrelated() throws IOException {
        String a = trace("lm2.7b-sweep-ctx128.pickle");
        String b = trace("nca-train-empty-cache.pickle");
        CliRun text = CliRun.run("diff", a, b);
        assertThat(text.exit()).as(text.err()).isZero();
        assertThat(text.out()).contains("do not look like the same program").doesNotContain("sites, largest");
        Map<String, Object> o = object(CliRun.run("diff", a, b, "--json").out());
        assertThat(o.get("same_program")).isEqualTo(false);
        assertThat(sites(o)).isEmpty();
    }

    @Test
    void textNamesTheSitesThatExplainThePeak() {
        CliRun run = CliRun.run("diff", trace("lm-medium-infer-ctx128.pickle"), trace("lm-medium-infer-ctx512.pickle"));
        assertThat(run.exit()).as(run.err()).isZero();
        assertThat(run.out())
                .contains("matched 1280 (100.0% of the smaller")
                .contains("softmax")
                .contains("sites, largest difference at peak allocated first");
    }

    @Test
    void aPeakReservedThatIsTheWindowsStartIsSaidToBe(@TempDir Path dir) throws IOException {
        // the context-256 window opens with an empty_cache() that releases its start's 56.91 GiB, and never
        // reserves as much again; the context-128 window reaches its peak inside the window
        Path page = dir.resolve("sweep.html");
        CliRun run = CliRun.run(
                "diff",
                trace("lm2.7b-sweep-ctx128.pickle"),
                trace("lm2.7b-sweep-ctx256.pickle"),
                "--html",
                page.toString());
        assertThat(run.exit()).as(run.err()).isZero();
        String said = "B's peak reserved is its window's start, before any request of the window";
        assertThat(run.out()).contains(said).doesNotContain("A's peak reserved is its window's start");
        // (the page escapes the apostrophes)
        assertThat(Files.readString(page).replace("&#39;", "'"))
                .contains(said)
                .doesNotContain("A's peak reserved is its window's start");
    }

    @Test
    void unrelatedProgramsGetAPageThatSaysSoWithoutSites(@TempDir Path dir) throws IOException {
        Path page = dir.resolve("unrelated.html");
        CliRun run = CliRun.run(
                "diff",
                trace("lm2.7b-sweep-ctx128.pickle"),
                trace("nca-train-empty-cache.pickle"),
                "--html",
                page.toString());
        assertThat(run.exit()).as(run.err()).isZero();
        assertThat(run.out()).contains("HTML report written to " + page.toAbsolutePath());
        String html = Files.readString(page);
        assertThat(html)
                .contains("do not look like the same program")
                .doesNotContain("<table class=\"sites\">")
                .doesNotContain("Where fragmentation differs");
    }

    /** The page's path is checked before either recording is read: a bad one writes nothing and prints nothing. */
    @Test
    void aBadHtmlPathExitsTwoAndWritesNothing(@TempDir Path dir) throws IOException {
        String demo = DEMO_SMALL.toString();
        Path missingDir = dir.resolve("no-such-dir").resolve("diff.html");
        CliRun run = CliRun.run("diff", demo, demo, "--html", missingDir.toString());
        assertThat(run.exit()).isEqualTo(2);
        assertThat(run.err()).startsWith("gpumem diff: --html " + missingDir).contains("does not exist");
        assertThat(run.out()).isEmpty();
        assertThat(missingDir.getParent()).doesNotExist();

        Path folder = Files.createDirectory(dir.resolve("a-folder"));
        CliRun onDir = CliRun.run("diff", demo, demo, "--json", "--html", folder.toString());
        assertThat(onDir.exit()).isEqualTo(2);
        assertThat(onDir.err()).contains("--html").contains("is a directory");
        assertThat(onDir.out()).isEmpty();
        try (var left = Files.list(dir)) {
            assertThat(left).as("nothing written beside the bad paths").containsExactly(folder);
        }
        try (var inside = Files.list(folder)) {
            assertThat(inside).isEmpty();
        }

        // the same command with a good path writes the page, and --json stays one object on stdout
        Path good = dir.resolve("demo-diff.html");
        CliRun ok = CliRun.run("diff", demo, demo, "--json", "--html", good.toString());
        assertThat(ok.exit()).as(ok.err()).isZero();
        assertThat(object(ok.out())).containsEntry("matched", object(ok.out()).get("requests_a"));
        assertThat(ok.err()).contains("HTML report written to " + good.toAbsolutePath());
        assertThat(Files.readString(good)).contains("<table class=\"sites\">");
    }

    @Test
    void aSingleFileIsRefused() {
        CliRun run = CliRun.run("diff", "only-one.pickle");
        assertThat(run.exit()).isEqualTo(2);
        assertThat(run.err())
                .contains("gpumem diff:")
                .contains("two recordings")
                .contains("only-one.pickle");
    }

    @Test
    void aDeviceNeitherFileHasIsRefusedNamingTheFile() {
        CliRun run =
                CliRun.run("diff", "--trace-device", "3", trace("tiny-forward.pickle"), trace("tiny-forward.pickle"));
        assertThat(run.exit()).as(run.err()).isEqualTo(2);
        assertThat(run.err()).contains("tiny-forward.pickle: device 3 has no alloc entry to align");
        assertThat(run.out()).isEmpty();
        // a negative index is refused in the same words by every trace command
        for (String command : new String[] {"diff", "compare", "analyze", "report", "plan"}) {
            CliRun negative = command.equals("diff")
                    ? CliRun.run(
                            command, "--trace-device", "-1", trace("tiny-forward.pickle"), trace("tiny-forward.pickle"))
                    : CliRun.run(command, "--trace-device", "-1", trace("tiny-forward.pickle"));
            assertThat(negative.exit()).as(command).isEqualTo(2);
            assertThat(negative.err())
                    .as(command)
                    .isEqualTo("gpumem " + command + ": --trace-device must be 0 or more, got -1"
                            + System.lineSeparator());
        }
    }

    @Test
    void anUnreadableFileIsNamed(@TempDir Path dir) throws IOException {
        Path garbage = dir.resolve("garbage.pickle");
        Files.write(garbage, new byte[] {(byte) 0x80, 5, 'x', 'y'});
        Path missing = dir.resolve("missing.pickle");
        CliRun run = CliRun.run("diff", garbage.toString(), missing.toString());
        assertThat(run.exit()).isEqualTo(2);
        assertThat(run.err()).contains("gpumem diff:").contains("garbage.pickle");
        CliRun second = CliRun.run("diff", missing.toString(), garbage.toString());
        assertThat(second.exit()).isEqualTo(2);
        assertThat(second.err()).contains("missing.pickle");
    }

    @Test
    void aStateOnlySnapshotIsRefused() {
        String state = trace("opt1.3b-state-only.pickle");
        CliRun run = CliRun.run("diff", trace("tiny-forward.pickle"), state);
        assertThat(run.exit()).isEqualTo(2);
        assertThat(run.err()).contains("opt1.3b-state-only.pickle").contains("no alloc entry");
        assertThat(run.out()).isEmpty();
    }

    /**
     * An ops script records no driver calls: its reserved figures are unknown, printed as n/a and written as null, not
     * as 0 bytes; with nothing live before either window, no "(allocated before the window)" row of zeros.
     */
    @Test
    void aRecordingWithoutDriverCallsHasNoReservedFigures(@TempDir Path dir) throws IOException {
        Path ops = dir.resolve("steps.ops");
        Files.writeString(ops, "alloc a 3MiB\nalloc b 30MiB\nfree a\nalloc c 1MiB\nfree b\nfree c\n");
        CliRun text = CliRun.run("diff", ops.toString(), ops.toString());
        assertThat(text.exit()).as(text.err()).isZero();
        assertThat(text.out())
                .contains("peak allocated  A 33.00 MiB  B 33.00 MiB")
                .contains("peak reserved   A n/a  B n/a  (n/a)")
                .contains("A records no driver calls (not a PyTorch snapshot): its reserved bytes are unknown")
                .contains("cached, unused at peak reserved  A n/a  B n/a")
                .doesNotContain("(allocated before the window)");
        Map<String, Object> json = object(
                CliRun.run("diff", ops.toString(), ops.toString(), "--json").out());
        assertThat(json).containsEntry("peak_reserved_a", null).containsEntry("cached_at_peak_reserved_b", null);
        assertThat(sites(json)).allSatisfy(site -> assertThat(site).containsEntry("at_peak_reserved_a", null));
        assertThat(sites(json)).extracting(site -> site.get("site")).doesNotContain("(allocated before the window)");

        Path page = dir.resolve("steps.html");
        assertThat(CliRun.run("diff", ops.toString(), ops.toString(), "--html", page.toString())
                        .exit())
                .isZero();
        assertThat(Files.readString(page))
                .contains("Neither A nor B records the allocator")
                .doesNotContain("Where fragmentation differs");
    }

    /**
     * One 1 MiB request in a fresh 2 MiB small-pool segment: at peak reserved the program holds the request that
     * segment was made for, so 1 MiB is cached and unused, not the whole segment (PyTorch writes the segment_alloc
     * just before the alloc it serves, and the moment was once taken there).
     */
    @Test
    void cachedAtPeakReservedCountsTheRequestTheSegmentWasMadeFor(@TempDir Path dir) throws IOException {
        Path ops = dir.resolve("one.ops");
        Path pickle = dir.resolve("one.pickle");
        Files.writeString(
                ops, "alloc act 1MiB\nalloc ws 4096\nfree ws\nfree act\n".repeat(2) + "snapshot " + pickle + "\n");
        CliRun sim = CliRun.run("sim", ops.toString());
        assertThat(sim.exit()).as(sim.err()).isZero();
        CliRun run = CliRun.run("diff", pickle.toString(), pickle.toString(), "--json");
        assertThat(run.exit()).as(run.err()).isZero();
        Map<String, Object> json = object(run.out());
        assertThat(num(json, "peak_reserved_a")).isEqualTo(2L << 20);
        assertThat(num(json, "cached_at_peak_reserved_a")).isEqualTo(1L << 20);
        assertThat(sites(json).stream()
                        .mapToLong(site -> (Long) site.get("at_peak_reserved_a"))
                        .sum())
                .as("the sites hold what is allocated at peak reserved")
                .isEqualTo(1L << 20);
        CliRun text = CliRun.run("diff", pickle.toString(), pickle.toString());
        assertThat(text.out()).containsPattern("cached, unused at peak reserved  A \\S+ KiB \\(0.500 of reserved\\)");
    }

    /**
     * Inference and the training that contains it: nearly all of the inference matches, but not most of the
     * training, so diff says they are not one program (the rule predict refuses them by), with no per-site story.
     */
    @Test
    void inferenceAndTrainingAreNotOneProgram() throws IOException {
        String infer = trace("lm-medium-infer-ctx128.pickle");
        String train = trace("lm-medium-train-ctx256.pickle");
        Map<String, Object> json =
                object(CliRun.run("diff", infer, train, "--json").out());
        assertThat((Double) json.get("matched_fraction")).isGreaterThan(0.5);
        assertThat(json.get("same_program")).isEqualTo(false);
        assertThat(sites(json)).isEmpty();
        CliRun text = CliRun.run("diff", infer, train);
        assertThat(text.exit()).as(text.err()).isZero();
        assertThat(text.out())
                .contains("these recordings do not look like the same program: ")
                .contains("% of B's 6624 requests match (one program matches at least 50% of each)")
                .doesNotContain("sites, largest");
    }

    /**
     * A frameless program (sim) of act = 1 MiB·x, sq = 64 KiB·x² and a 4 KiB workspace, two steps: at x = 16 act and
     * sq are equal, which flips the "same size as the previous request" hint of sq's token. Every request still
     * matches (it was 4 of 6), and predict from 4, 8 and 16 gives the recording at 32 (it was refused as not one
     * program).
     */
    @Test
    void withoutFramesTwoSizesCoincidingAtOneValueStillAlign(@TempDir Path dir) throws Exception {
        Path q4 = twoLaws(dir, 4);
        Path q8 = twoLaws(dir, 8);
        Path q16 = twoLaws(dir, 16);
        Path q32 = twoLaws(dir, 32);
        Map<String, Object> diff = object(
                CliRun.run("diff", q8.toString(), q16.toString(), "--json").out());
        assertThat(diff.get("signal")).isEqualTo("order");
        assertThat(num(diff, "matched")).isEqualTo(6);
        CliRun three = CliRun.run("predict", q4 + "@4", q8 + "@8", q16 + "@16", "--at", "32", "--json");
        assertThat(three.exit()).as(three.err()).isZero();
        Map<String, Object> predicted = PredictCommandTest.rows(three.out()).get(0);
        Map<String, Object> real = PredictCommandTest.rows(
                        CliRun.run("compare", q32.toString(), "--json").out())
                .get(0);
        assertThat(predicted.get("unpredicted_requests")).isEqualTo(0L);
        assertThat(predicted.get("peak_allocated")).isEqualTo(real.get("peak_allocated"));
    }

    /** act = 1 MiB·x, sq = 64 KiB·x², ws = 4 KiB, two steps, recorded by sim (no frames). */
    private static Path twoLaws(Path dir, long x) throws IOException {
        Path pickle = dir.resolve("q" + x + ".pickle");
        String step = "alloc act " + (x << 20) + "\nalloc sq " + ((x * x) << 16)
                + "\nalloc ws 4096\nfree ws\nfree sq\nfree act\n";
        Path script = Files.writeString(dir.resolve("q" + x + ".ops"), step.repeat(2) + "snapshot " + pickle + "\n");
        CliRun sim = CliRun.run("sim", script.toString());
        assertThat(sim.exit()).as(sim.err()).isZero();
        return pickle;
    }

    /** Beside a PyTorch snapshot, only the side without driver calls goes without reserved figures. */
    @Test
    void onlyTheSideWithoutDriverCallsLacksReservedFigures(@TempDir Path dir) throws IOException {
        Path ops = dir.resolve("one.ops");
        Files.writeString(ops, "alloc a 3MiB\nfree a\n");
        Map<String, Object> json = object(CliRun.run("diff", ops.toString(), DEMO_SMALL.toString(), "--json")
                .out());
        assertThat(json.get("peak_reserved_a")).isNull();
        assertThat(num(json, "peak_reserved_b")).isPositive();
        assertThat(json.get("cached_at_peak_reserved_b")).isInstanceOf(Long.class);
    }
}
