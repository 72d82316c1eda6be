package io.gpumem.cli.policy;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.cli.CliRun;
import io.gpumem.cli.trace.OomTraces;
import io.gpumem.policy.PolicyFactory;
import io.gpumem.policy.PolicyRegistry;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 18's acceptance check for the policy registry and the one engine: a new policy is one class
 * ({@link FirstFitAllocator}) plus one registry line, and then runs through {@code compare --policy},
 * {@code analyze}'s recommender, {@code report} and {@code demo} with no other change anywhere.
 */
class ToyPolicyTest {

    @TempDir
    static Path dir;

    /** A generated training job recorded on a device too small for it: it ends in an OOM, so analysis replays. */
    static Path oomTrace;

    @BeforeAll
    static void registerAndRecord() throws Exception {
        // the one registry line
        PolicyRegistry.register(PolicyFactory.simple(
                FirstFitAllocator.NAME,
                "first fit by address in one segment as large as the device",
                FirstFitAllocator::new));
        oomTrace = OomTraces.record(dir);
    }

    @AfterAll
    static void unregister() {
        PolicyRegistry.unregister(FirstFitAllocator.NAME);
    }

    @Test
    void compareRunsTheToyPolicyAsARow() throws Exception {
        CliRun r = CliRun.run(
                "compare", oomTrace.toString(), "--json", "--policy", FirstFitAllocator.NAME, "--policy", "stitch");
        assertThat(r.exit()).as(r.err()).isZero();
        List<String> rows = new ArrayList<>();
        Matcher m = Pattern.compile("\\{[^{}]*\\}").matcher(r.out());
        while (m.find()) {
            rows.add(m.group());
        }
        assertThat(rows).hasSize(3);
        String recorded = rows.get(0);
        String toy = rows.get(1);
        assertThat(field(toy, "policy")).isEqualTo("\"" + FirstFitAllocator.NAME + "\"");
        // the toy serves the same requests as the recorded run: its peak allocated is at least the live bytes the
        // exact allocator held, and no capacity below that peak can run it
        long peak = Long.parseLong(field(toy, "peak_allocated"));
        assertThat(peak).isPositive();
        assertThat(Long.parseLong(field(toy, "min_capacity"))).isGreaterThanOrEqualTo(peak);
        assertThat(Long.parseLong(field(toy, "device_allocs")))
                .as("one segment")
                .isEqualTo(1);
        assertThat(field(recorded, "policy")).isEqualTo("\"" + PolicyRegistry.EXACT + "\"");

        CliRun table = CliRun.run("compare", oomTrace.toString(), "--policy", FirstFitAllocator.NAME);
        assertThat(table.exit()).as(table.err()).isZero();
        assertThat(table.out()).contains(FirstFitAllocator.NAME);
    }

    /** The raw JSON value of {@code name} in one flat object. */
    private static String field(String object, String name) {
        Matcher m = Pattern.compile("\"" + name + "\":([^,}]*)").matcher(object);
        assertThat(m.find()).as(name + " in " + object).isTrue();
        return m.group(1);
    }

    @Test
    void analyzesRecommenderTriesTheToyPolicy() {
        CliRun r = CliRun.run("analyze", oomTrace.toString(), "--policy", FirstFitAllocator.NAME);
        assertThat(r.exit()).as(r.err()).isZero();
        // either recommended, or named among what was tried when nothing beat the baseline
        assertThat(r.out())
                .containsAnyOf(
                        "use allocation policy " + FirstFitAllocator.NAME, "policy " + FirstFitAllocator.NAME + ")");

        CliRun unknown = CliRun.run("analyze", oomTrace.toString(), "--policy", "no-such-policy");
        assertThat(unknown.exit()).isEqualTo(2);
        assertThat(unknown.err()).contains("no-such-policy").contains(FirstFitAllocator.NAME);
    }

    @Test
    void reportShowsTheToyPolicy() throws Exception {
        Path page = dir.resolve("report.html");
        CliRun r = CliRun.run("report", oomTrace.toString(), "--policy", FirstFitAllocator.NAME, "-o", page.toString());
        assertThat(r.exit()).as(r.err()).isZero();
        assertThat(Files.readString(page)).contains(FirstFitAllocator.NAME);
    }

    @Test
    void demoTableListsEveryRegisteredPolicyAndTheRecommenderTriesTheToy() {
        Path snapshot = dir.resolve("demo.pickle");
        CliRun r = CliRun.run(
                "demo",
                "--layers=2",
                "--hidden=512",
                "--heads=4",
                "--vocab=4000",
                "--steps=2",
                "--seq-max=512",
                "--capacity=1GiB",
                "--no-min-capacity",
                "--policy",
                FirstFitAllocator.NAME,
                "--snapshot",
                snapshot.toString());
        assertThat(r.exit()).as(r.err()).isZero();
        assertThat(r.out()).contains("policy " + FirstFitAllocator.NAME).contains("policy stitch");
    }
}
