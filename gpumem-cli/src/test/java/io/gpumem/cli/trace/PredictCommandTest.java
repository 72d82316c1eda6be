package io.gpumem.cli.trace;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.cli.CliRun;
import io.gpumem.cli.JsonTree;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code gpumem predict}: predicting a recorded size from the laws over it and another size reproduces compare's
 * figures for the real recording (the method's own check), the JSON rows carry compare's keys plus at,
 * predicted_requests and unpredicted_requests, and bad input exits 2 with a message. Skipped, saying so, without
 * {@code ../shared/traces}.
 */
class PredictCommandTest {

    @SuppressWarnings("unchecked")
    static List<Map<String, Object>> rows(String json) throws Exception {
        return (List<Map<String, Object>>) JsonTree.parse(json);
    }

    @Test
    void predictingARecordedSizeReproducesItsCompareRow() throws Exception {
        String a = DiffCommandTest.trace("lm-medium-train-ctx128.pickle");
        String b = DiffCommandTest.trace("lm-medium-train-ctx256.pickle");
        CliRun predicted =
                CliRun.run("predict", a + "@128", b + "@256", "--at", "256", "--capacity", "80GiB", "--json");
        assertThat(predicted.exit()).as(predicted.err()).isZero();
        CliRun real = CliRun.run("compare", b, "--json");
        Map<String, Object> p = rows(predicted.out()).get(0);
        Map<String, Object> r = rows(real.out()).get(0);
        assertThat(p.keySet()).containsAll(r.keySet()).contains("at", "predicted_requests", "unpredicted_requests");
        assertThat(p.get("at")).isEqualTo(256L);
        // the reference is the recording nearest the target (here the 256 one itself): its 6,624 requests, of
        // which the 6,526 both recordings share have a law
        assertThat((Long) p.get("predicted_requests") + (Long) p.get("unpredicted_requests"))
                .isEqualTo(6624L);
        assertThat(p.get("predicted_requests")).isEqualTo(6526L);
        double peak = (Long) p.get("peak_allocated");
        double realPeak = (Long) r.get("peak_allocated");
        System.out.printf(
                "predict medium-train at 256: peak allocated %.0f vs %.0f, min capacity %s vs %s%n",
                peak, realPeak, p.get("min_capacity"), r.get("min_capacity"));
        assertThat(Math.abs(peak - realPeak) / realPeak).isLessThan(0.001);
        double cap = (Long) p.get("min_capacity");
        double realCap = (Long) r.get("min_capacity");
        assertThat(Math.abs(cap - realCap) / realCap).isLessThan(0.02);
    }

    @Test
    void extrapolatesTheInferenceToContext512() throws Exception {
        String a = DiffCommandTest.trace("lm-medium-infer-ctx128.pickle");
        String b = DiffCommandTest.trace("lm-medium-infer-ctx256.pickle");
        CliRun run = CliRun.run("predict", a + "@128", b + "@256", "--at", "512", "--capacity", "8GiB");
        assertThat(run.exit()).as(run.err()).isZero();
        assertThat(run.out())
                .contains("predicted at 512")
                .contains("1280 requests predicted")
                .contains("recorded (");
    }

    @Test
    void badInputExitsTwo() {
        String a = DiffCommandTest.trace("lm-medium-infer-ctx128.pickle");
        String other = DiffCommandTest.trace("nca-train-empty-cache.pickle");
        CliRun one = CliRun.run("predict", a + "@128", "--at", "512");
        assertThat(one.exit()).isEqualTo(2);
        assertThat(one.err()).contains("gpumem predict:").contains("two or more");
        CliRun equal = CliRun.run("predict", a + "@128", a + "@128", "--at", "512");
        assertThat(equal.exit()).isEqualTo(2);
        assertThat(equal.err()).contains("same label 128");
        CliRun noLabel = CliRun.run("predict", a, a + "@256", "--at", "512");
        assertThat(noLabel.exit()).isEqualTo(2);
        assertThat(noLabel.err()).contains("FILE@VALUE");
        CliRun unrelated = CliRun.run("predict", a + "@128", other + "@256", "--at", "512");
        assertThat(unrelated.exit()).isEqualTo(2);
        assertThat(unrelated.err()).contains("do not look like the same program");
        CliRun missing = CliRun.run("predict", a + "@128", "missing.pickle@256", "--at", "512");
        assertThat(missing.exit()).isEqualTo(2);
        assertThat(missing.err()).contains("missing.pickle");
        assertThat(missing.out()).isEmpty();
    }

    /**
     * A small program recorded by {@code sim} at value {@code x}: an activation of 1 MiB·x, a constant workspace, a
     * buffer of {@code 3 MiB − 1 MiB·x} (it shrinks: no size at x ≥ 3), and two steps of it.
     */
    static Path program(Path dir, long x, boolean shrinking) throws Exception {
        return program(dir, x, shrinking, null);
    }

    /** {@link #program(Path, long, boolean)} recorded under configuration {@code conf} (null: the defaults). */
    static Path program(Path dir, long x, boolean shrinking, String conf) throws Exception {
        String name = "x" + x + (shrinking ? "s" : "") + (conf == null ? "" : "c");
        Path pickle = dir.resolve(name + ".pickle");
        StringBuilder ops = new StringBuilder();
        if (conf != null) {
            ops.append("config ").append(conf).append('\n');
        }
        for (int step = 0; step < 2; step++) {
            ops.append("alloc act ").append(x << 20).append('\n');
            ops.append("alloc ws 4096\n");
            if (shrinking) {
                ops.append("alloc buf ").append((3L << 20) - (x << 20)).append('\n');
                ops.append("free buf\n");
            }
            ops.append("free ws\nfree act\n");
        }
        ops.append("snapshot ").append(pickle).append('\n');
        Path script = Files.writeString(dir.resolve(name + ".ops"), ops);
        CliRun sim = CliRun.run("sim", script.toString());
        assertThat(sim.exit()).as(sim.err()).isZero();
        return pickle;
    }

    @Test
    void traceDevicePicksTheDeviceOfEveryRecording(@TempDir Path dir) throws Exception {
        Path one = program(dir, 1, false);
        Path two = program(dir, 2, false);
        CliRun byDefault = CliRun.run("predict", one + "@1", two + "@2", "--at", "3", "--json");
        CliRun deviceZero = CliRun.run("predict", one + "@1", two + "@2", "--at", "3", "--json", "--trace-device", "0");
        assertThat(deviceZero.exit()).as(deviceZero.err()).isZero();
        assertThat(rows(deviceZero.out()).get(0).get("min_capacity"))
                .isEqualTo(rows(byDefault.out()).get(0).get("min_capacity"));
        CliRun deviceOne = CliRun.run("predict", one + "@1", two + "@2", "--at", "3", "--trace-device", "1");
        assertThat(deviceOne.exit()).isEqualTo(2);
        assertThat(deviceOne.err()).startsWith("gpumem predict: ").contains("device 1 has no alloc entry to align");
    }

    @Test
    void predictsBelowTheSmallestRecordedValueExactly(@TempDir Path dir) throws Exception {
        Path one = program(dir, 1, false);
        Path two = program(dir, 2, false);
        Path three = program(dir, 3, false);
        CliRun p = CliRun.run("predict", two + "@2", three + "@3", "--at", "1", "--json");
        assertThat(p.exit()).as(p.err()).isZero();
        CliRun real = CliRun.run("compare", one.toString(), "--json");
        Map<String, Object> predicted = rows(p.out()).get(0);
        Map<String, Object> recorded = rows(real.out()).get(0);
        assertThat(predicted.get("peak_allocated")).isEqualTo(recorded.get("peak_allocated"));
        assertThat(predicted.get("min_capacity")).isEqualTo(recorded.get("min_capacity"));
        assertThat(predicted.get("unpredicted_requests")).isEqualTo(0L);
    }

    @Test
    void fitFindsTheLargestValueThatRuns(@TempDir Path dir) throws Exception {
        Path one = program(dir, 1, false);
        Path two = program(dir, 2, false);
        CliRun fit = CliRun.run("predict", one + "@1", two + "@2", "--fit", "64MiB", "--json");
        assertThat(fit.exit()).as(fit.err()).isZero();
        assertThat(fit.err()).as("recordings of one configuration").doesNotContain("warning:");
        Map<String, Object> row = rows(fit.out()).get(0);
        long largest = (Long) row.get("largest_value");
        assertThat(largest).isGreaterThan(2);
        assertThat((Long) row.get("min_capacity")).isLessThanOrEqualTo(64L << 20);
        // one more does not run in 64 MiB; the largest does
        CliRun over = CliRun.run(
                "predict", one + "@1", two + "@2", "--at", Long.toString(largest + 1), "--capacity", "64MiB", "--json");
        assertThat(over.exit()).as(over.err()).isZero();
        assertThat((Long) rows(over.out()).get(0).get("ooms")).isPositive();
        CliRun at = CliRun.run(
                "predict", one + "@1", two + "@2", "--at", Long.toString(largest), "--capacity", "64MiB", "--json");
        assertThat(rows(at.out()).get(0).get("ooms")).isEqualTo(0L);
        CliRun stepped = CliRun.run("predict", one + "@1", two + "@2", "--fit", "64MiB", "--step", "8", "--json");
        long steppedLargest = (Long) rows(stepped.out()).get(0).get("largest_value");
        assertThat(steppedLargest % 8).isZero();
        assertThat(steppedLargest).isLessThanOrEqualTo(largest).isGreaterThan(largest - 8);
        CliRun text = CliRun.run("predict", one + "@1", two + "@2", "--fit", "64MiB");
        assertThat(text.out()).contains("largest value that fits in 64.00 MiB").contains("replays");
        // a step past every value that fits tries one value: counted in the singular
        CliRun single = CliRun.run("predict", one + "@1", two + "@2", "--fit", "64MiB", "--step", "1000000000");
        assertThat(single.out()).contains(": 1 value predicted, 1 replay, ").contains("none (not even 1000000000)");
    }

    /**
     * Inference is contained in the training of the same model (its forward pass): nearly all of the inference's
     * requests match, but most of the training's have no counterpart, so no law. That is not one program at two
     * sizes, and predict refuses it (it once predicted at 512 with 80% of the reference's requests kept as recorded).
     */
    @Test
    void refusesInferenceAndTrainingAsOneProgram() {
        String infer = DiffCommandTest.trace("lm-medium-infer-ctx128.pickle");
        String train = DiffCommandTest.trace("lm-medium-train-ctx256.pickle");
        CliRun p = CliRun.run("predict", infer + "@128", train + "@256", "--at", "512");
        assertThat(p.exit()).as(p.out()).isEqualTo(2);
        assertThat(p.err())
                .startsWith("gpumem predict: ")
                .contains("do not look like the same program")
                .containsPattern("\\d+\\.\\d% of \\S*lm-medium-train-ctx256.pickle's 6624 requests")
                .contains("one program matches at least 50% of each");
        assertThat(p.out()).isEmpty();
    }

    /**
     * Recordings of two unrelated programs are bad input under --fit as under --at (exit 2, the same message): the
     * search once took the same-program refusal for "this value does not fit" and answered, exit 0, that nothing fits.
     */
    @Test
    void fitRefusesUnrelatedRecordingsAsAtDoes() {
        String a = DiffCommandTest.trace("tiny-forward.pickle");
        String b = DiffCommandTest.trace("nca-train-empty-cache.pickle");
        CliRun at = CliRun.run("predict", a + "@1", b + "@2", "--at", "3");
        assertThat(at.exit()).isEqualTo(2);
        assertThat(at.err()).contains("do not look like the same program");
        for (String format : new String[] {"--json", "--step=1"}) {
            CliRun fit = CliRun.run("predict", a + "@1", b + "@2", "--fit", "80GiB", format);
            assertThat(fit.exit()).as(format + ": " + fit.out()).isEqualTo(2);
            assertThat(fit.err()).startsWith("gpumem predict: ").contains("do not look like the same program");
            assertThat(fit.out()).isEmpty();
        }
    }

    /** A row where nothing fits is labelled as one where something does (compare's labels), not by its parts. */
    @Test
    void rowsWhereNothingFitsKeepCompareLabels(@TempDir Path dir) throws Exception {
        Path one = program(dir, 1, false);
        Path two = program(dir, 2, false);
        CliRun none = CliRun.run(
                "predict",
                one + "@1",
                two + "@2",
                "--fit",
                "1KiB",
                "-c",
                "expandable_segments:True",
                "--policy",
                "stitch");
        assertThat(none.exit()).as(none.err()).isZero();
        assertThat(none.out().lines().skip(2).map(l -> l.substring(0, l.indexOf("  "))))
                .containsExactly("recorded (defaults)", "expandable_segments:True", "stitch");
        assertThat(none.out()).contains("none (not even 1)").doesNotContain("recorded pytorch");
    }

    @Test
    void valuesAfterTheAtSignAreSizesOfOneOrMore(@TempDir Path dir) throws Exception {
        Path one = program(dir, 1, false);
        Path two = program(dir, 2, false);
        for (String bad : new String[] {"0", "-5"}) {
            CliRun r = CliRun.run("predict", one + "@" + bad, two + "@2", "--at", "3");
            assertThat(r.exit()).as(bad).isEqualTo(2);
            assertThat(r.err()).contains(one + "@" + bad + ": the value after @ must be 1 or more, got " + bad);
            assertThat(r.out()).isEmpty();
        }
    }

    /**
     * Every row of {@code --fit} on a warm recording is {@code predict --at} at its largest value, and one more does
     * not run: under expandable segments the row once came from the steady state (3.58 GiB) while the search's probes
     * ran the window as predicted (which needs 4 GiB), so the "largest value" was not the last one that fits.
     */
    @Test
    void fitRowsArePredictAtRowsUnderEveryConfiguration() throws Exception {
        String a = DiffCommandTest.trace("lm-medium-infer-ctx128.pickle");
        String b = DiffCommandTest.trace("lm-medium-infer-ctx256.pickle");
        String conf = "expandable_segments:True";
        CliRun fit = CliRun.run("predict", a + "@128", b + "@256", "--fit", "4GiB", "-c", conf, "--json");
        assertThat(fit.exit()).as(fit.err()).isZero();
        List<Map<String, Object>> fitRows = rows(fit.out());
        assertThat(fitRows).hasSize(2);
        for (int i = 0; i < fitRows.size(); i++) {
            long largest = (Long) fitRows.get(i).get("largest_value");
            assertThat(largest).as("row %d", i).isGreaterThan(256);
            Map<String, Object> at = predictAt(a, b, largest, conf, "4GiB").get(i);
            assertThat(at.get("ooms")).as("row %d at %d", i, largest).isEqualTo(0L);
            assertThat(fitRows.get(i).get("min_capacity")).as("row %d", i).isEqualTo(at.get("min_capacity"));
            assertThat(fitRows.get(i).get("peak_reserved")).as("row %d", i).isEqualTo(at.get("peak_reserved"));
            Map<String, Object> over =
                    predictAt(a, b, largest + 1, conf, "4GiB").get(i);
            assertThat((Long) over.get("ooms"))
                    .as("row %d at %d", i, largest + 1)
                    .isPositive();
        }
    }

    /**
     * Recordings made under different configurations: --fit's recorded row runs each value under its reference's
     * configuration, as --at does, so it is --at's first row at its largest value and does not depend on the order of
     * the arguments (it once ran every value under the first file's configuration).
     */
    @Test
    void fitsRecordedRowIsTheReferencesWhateverTheOrderOfTheRecordings(@TempDir Path dir) throws Exception {
        Path one = program(dir, 1, false);
        Path two = program(dir, 2, false, "expandable_segments:True");
        CliRun fit = CliRun.run("predict", one + "@1", two + "@2", "--fit", "64MiB", "--json");
        CliRun swapped = CliRun.run("predict", two + "@2", one + "@1", "--fit", "64MiB", "--json");
        assertThat(fit.exit()).as(fit.err()).isZero();
        assertThat(swapped.exit()).as(swapped.err()).isZero();
        // the rows may use different configurations at different values: said on stderr, the JSON untouched
        assertThat(fit.err())
                .contains("warning: the recordings were made under different allocator configurations (")
                .contains(one.getFileName() + ": defaults")
                .contains(two.getFileName() + ": expandable_segments:True");
        Map<String, Object> row = rows(fit.out()).get(0);
        assertThat(rows(swapped.out()).get(0)).isEqualTo(row);
        long largest = (Long) row.get("largest_value");
        assertThat(largest).isGreaterThan(2);
        CliRun at = CliRun.run(
                "predict", one + "@1", two + "@2", "--at", Long.toString(largest), "--capacity", "64MiB", "--json");
        assertThat(at.exit()).as(at.err()).isZero();
        Map<String, Object> atRow = rows(at.out()).get(0);
        assertThat(atRow.get("ooms")).isEqualTo(0L);
        assertThat(row.get("config")).isEqualTo(atRow.get("config")).asString().contains("expandable_segments:True");
        assertThat(row.get("min_capacity")).isEqualTo(atRow.get("min_capacity"));
        assertThat(row.get("peak_reserved")).isEqualTo(atRow.get("peak_reserved"));
    }

    /**
     * A prediction from an expandable-segments recording replays exactly: its segments' reservations are sized from
     * the device it was played on, which must be the one replay --check assumes (it was max(8 GiB, 2 x peak live),
     * and 1,463 of 2,434 allocs replayed at their address).
     */
    @Test
    void aPredictionFromAnExpandableRecordingPassesReplayCheck(@TempDir Path dir) throws Exception {
        String g = DiffCommandTest.trace("gnn-train-expandable-oom.pickle");
        Path out = dir.resolve("predicted.pickle");
        CliRun p =
                CliRun.run("predict", g + "@1", g + "@2", "--trace-device", "0", "--at", "3", "--out", out.toString());
        assertThat(p.exit()).as(p.err()).isZero();
        assertThat(p.out()).doesNotContain("played on a device of");
        CliRun check = CliRun.run("replay", "--check", out.toString());
        assertThat(check.exit()).as(check.out() + check.err()).isZero();
        assertThat(check.out()).contains("2434/2434 allocs exact").contains("first mismatch: none");
    }

    /** The rows of {@code predict A@128 B@256 --at VALUE -c CONF --capacity CAPACITY --json}. */
    private static List<Map<String, Object>> predictAt(String a, String b, long value, String conf, String capacity)
            throws Exception {
        CliRun run = CliRun.run(
                "predict",
                a + "@128",
                b + "@256",
                "--at",
                Long.toString(value),
                "-c",
                conf,
                "--capacity",
                capacity,
                "--json");
        assertThat(run.exit()).as(run.err()).isZero();
        return rows(run.out());
    }

    @Test
    void badInputExitsTwoAndWritesNothing(@TempDir Path dir) throws Exception {
        Path one = program(dir, 1, true);
        Path two = program(dir, 2, true);
        Path out = dir.resolve("predicted.pickle");
        CliRun negative = CliRun.run("predict", one + "@1", two + "@2", "--at", "4", "--out", out.toString());
        assertThat(negative.exit()).isEqualTo(2);
        assertThat(negative.err())
                .contains("at 4 the size law")
                .contains("gives -1048576 bytes")
                .containsPattern("recorded: \\d+ bytes at 2, \\d+ bytes at 1;")
                .contains("predict from those that are one program at several sizes");
        assertThat(out).doesNotExist();
        CliRun tooBig = CliRun.run(
                "predict",
                program(dir, 1, false) + "@1",
                program(dir, 2, false) + "@2",
                "--at",
                "100000000",
                "--out",
                out.toString());
        assertThat(tooBig.exit()).isEqualTo(2);
        assertThat(tooBig.err()).contains("at 100000000").contains("a simulated device models");
        assertThat(out).doesNotExist();
        CliRun equal = CliRun.run("predict", one + "@1", two + "@1", "--at", "3", "--out", out.toString());
        assertThat(equal.exit()).isEqualTo(2);
        assertThat(equal.err()).contains("same label 1");
        CliRun single = CliRun.run("predict", one + "@1", "--at", "3", "--out", out.toString());
        assertThat(single.exit()).isEqualTo(2);
        assertThat(single.err()).contains("two or more");
        CliRun neither = CliRun.run("predict", one + "@1", two + "@2");
        assertThat(neither.exit()).isEqualTo(2);
        assertThat(neither.err()).contains("--at VALUE").contains("--fit CAPACITY");
        CliRun outWithFit = CliRun.run("predict", one + "@1", two + "@2", "--fit", "1GiB", "--out", out.toString());
        assertThat(outWithFit.exit()).isEqualTo(2);
        assertThat(outWithFit.err()).contains("--out goes with --at");
        CliRun stepWithAt = CliRun.run("predict", one + "@1", two + "@2", "--at", "3", "--step", "2");
        assertThat(stepWithAt.exit()).isEqualTo(2);
        assertThat(stepWithAt.err()).contains("--step goes with --fit");
        assertThat(stepWithAt.out()).isEmpty();
        assertThat(out).doesNotExist();
        try (var files = Files.list(dir)) {
            assertThat(files.map(f -> f.getFileName().toString())).noneMatch(n -> n.contains("predicted"));
        }
    }
}
