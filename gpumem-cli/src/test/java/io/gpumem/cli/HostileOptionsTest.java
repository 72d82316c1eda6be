package io.gpumem.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.AccessDeniedException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Nonsense and hostile option values (issue 12): each is refused with exit status 2 and a message naming the
 * option, before any work, and never with a stack trace or an internal exception's text.
 */
class HostileOptionsTest {

    private static void refused(CliRun r, String... expected) {
        assertThat(r.exit()).as(r.err()).isEqualTo(2);
        assertThat(r.err()).contains(expected).doesNotContain("\tat ", "Exception", "java.");
    }

    /** A snapshot with one 20 MiB segment, written by {@code gpumem sim}. */
    private static Path snapshot(Path dir) {
        Path snap = dir.resolve("s.pickle");
        CliRun r = CliRun.withInput("alloc a 3MiB\nsnapshot " + snap + "\n", "sim");
        assertThat(r.exit()).as(r.err()).isZero();
        return snap;
    }

    @Test
    void capacityOptionsRefuseNanInfinityZeroAndNegativesWhereTheyAreParsed() {
        for (String bad : new String[] {"NaN", "Infinity", "0", "-3", "99999999999TiB", "lots"}) {
            refused(CliRun.run("replay", "--capacity", bad, "no-such.pickle"), "--capacity", bad);
            CliRun compare = CliRun.run("compare", "--capacity", bad, "no-such.pickle");
            refused(compare, "--capacity", bad);
            assertThat(compare.err()).doesNotContain("no-such.pickle:"); // the option is blamed, not the input
        }
    }

    @Test
    void analyzeRefusesACapacityBelowWhatTheSnapshotHasReserved(@TempDir Path dir) {
        Path snap = snapshot(dir);
        refused(
                CliRun.run("analyze", "--capacity", "1", snap.toString()),
                "--capacity 1 (1 bytes) is less than the 20.00 MiB device 0 of " + snap + " has reserved");
        assertThat(CliRun.run("analyze", "--capacity", "1GiB", "--no-compare", snap.toString())
                        .exit())
                .isZero();
    }

    @Test
    void reportRefusesACapacityBelowWhatTheSnapshotHasReservedAndWritesNothing(@TempDir Path dir) {
        Path snap = snapshot(dir);
        Path page = dir.resolve("r.html");
        refused(
                CliRun.run("report", "--capacity", "1KiB", "-o", page.toString(), snap.toString()),
                "--capacity 1024 (1024 bytes) is less than the 20.00 MiB device 0 of " + snap + " has reserved");
        assertThat(page).doesNotExist();
        CliRun fits = CliRun.run("report", "--capacity", "1GiB", "-o", page.toString(), snap.toString());
        assertThat(fits.exit()).as(fits.err()).isZero();
        assertThat(page).exists();
    }

    @Test
    void compareKeepsASmallCapacityForItsTableButNotForItsPagesAnalysis(@TempDir Path dir) throws Exception {
        Path snap = snapshot(dir);
        Path page = dir.resolve("c.html");
        CliRun r = CliRun.run("compare", "--capacity", "1MiB", "--html", page.toString(), snap.toString());
        assertThat(r.exit()).as(r.err()).isZero();
        assertThat(r.out()).contains("capacity 1024.00 KiB");
        assertThat(r.err())
                .contains("note: --capacity 1048576 (1024.00 KiB) is less than the 20.00 MiB device 0 of " + snap
                        + " has reserved; the HTML report's analysis treats the capacity as unknown");
        assertThat(Files.readString(page)).doesNotContain("of capacity (1.00 MiB)", "of capacity (1024.00 KiB)");
    }

    @Test
    void outputPathsAreCheckedBeforeAnyWork(@TempDir Path dir) throws Exception {
        Path snap = snapshot(dir);
        byte[] before = Files.readAllBytes(snap);
        refused(
                CliRun.run("replay", "--snapshot", snap.toString(), snap.toString()),
                "gpumem replay: --snapshot " + snap + ": is the input file");
        assertThat(Files.readAllBytes(snap)).isEqualTo(before);
        Path missing = dir.resolve("no/such/dir/out.pickle");
        CliRun r = CliRun.run("replay", "--snapshot", missing.toString(), snap.toString());
        refused(r, "--snapshot " + missing + ": the directory " + missing.getParent() + " does not exist");
        assertThat(r.out()).isEmpty(); // refused before the replay ran
        refused(
                CliRun.run("demo", "--snapshot", missing.toString()),
                "--snapshot " + missing + ": the directory " + missing.getParent() + " does not exist");
        // a path through a file: it was "the directory FILE is not a directory"
        Path underFile = snap.resolve("out.pickle");
        refused(
                CliRun.run("replay", "--snapshot", underFile.toString(), snap.toString()),
                "--snapshot " + underFile + ": " + snap + " is a file, not a directory");
    }

    @Test
    void everyOptionThatWritesAFileRefusesTheInputAndAMissingDirectoryBeforeAnyWork(@TempDir Path dir)
            throws Exception {
        Path snap = snapshot(dir);
        Path csv = dir.resolve("l.csv");
        Files.writeString(csv, "id,lower,upper,size\n0,0,2,4096\n1,1,3,4096\n");
        byte[] pickle = Files.readAllBytes(snap);
        byte[] lifetimes = Files.readAllBytes(csv);
        Path missing = dir.resolve("no/such/dir/out.html");
        String[][] writers = {
            {"report", "-o", "OUT", "IN"},
            {"report", "--output", "OUT", "IN"},
            {"analyze", "--html", "OUT", "IN"},
            {"compare", "--html", "OUT", "IN"},
            {"plan", "--out", "OUT", "CSV"},
        };
        for (String[] w : writers) {
            String option = w[0].equals("report") ? "-o/--output" : w[1];
            boolean plan = w[0].equals("plan");
            Path in = plan ? csv : snap;
            CliRun overwrite = CliRun.run(args(w, in, in, csv));
            refused(overwrite, "gpumem " + w[0] + ": " + option + " " + in + ": is the input file");
            assertThat(overwrite.out()).as(w[0]).isEmpty(); // refused before the work
            CliRun nowhere = CliRun.run(args(w, missing, in, csv));
            refused(nowhere, option + " " + missing + ": the directory " + missing.getParent() + " does not exist");
            assertThat(nowhere.out()).as(w[0]).isEmpty();
        }
        assertThat(Files.readAllBytes(snap)).isEqualTo(pickle);
        assertThat(Files.readAllBytes(csv)).isEqualTo(lifetimes);
        assertThat(dir.resolve("no")).doesNotExist();

        // demo writes two files: neither may be the other, and the page's directory must exist too
        Path demoSnap = dir.resolve("demo.pickle");
        CliRun same =
                CliRun.run("demo", "--steps", "1", "--snapshot", demoSnap.toString(), "--html", demoSnap.toString());
        refused(same, "--html " + demoSnap + ": is the input file");
        assertThat(same.out()).isEmpty();
        CliRun pageNowhere =
                CliRun.run("demo", "--steps", "1", "--snapshot", demoSnap.toString(), "--html", missing.toString());
        refused(pageNowhere, "--html " + missing + ": the directory " + missing.getParent() + " does not exist");
        assertThat(pageNowhere.out()).isEmpty();
        assertThat(demoSnap).doesNotExist();
    }

    /**
     * A page that cannot be written, in a directory that takes no new file, is refused saying why, and leaves no file
     * behind: the message said only the name of the temporary file it failed on ("cannot write d/r.html:
     * d/.r.html.123.tmp"), a name the user never gave and no reason. A read-only directory, or (where that does not
     * stop the user, as root) {@code /proc}, which takes no file from anyone.
     */
    @Test
    void aPageThatCannotBeWrittenIsRefusedSayingWhyAndLeavesNothing(@TempDir Path dir) throws Exception {
        Path snap = snapshot(dir);
        Path readOnly = Files.createDirectory(dir.resolve("read-only"));
        Files.setPosixFilePermissions(readOnly, PosixFilePermissions.fromString("r-xr-xr-x"));
        Path where = readOnly;
        String why = "permission denied";
        try {
            Files.delete(Files.createTempFile(readOnly, "probe", ".tmp"));
            where = Path.of("/proc");
            why = "no such file or directory";
            assumeTrue(Files.isDirectory(where), "the user may write anywhere and there is no /proc: skipped");
        } catch (AccessDeniedException expected) {
            // an ordinary user: the read-only directory refuses the file
        }
        Path page = where.resolve("gpumem-unwritable-page.html");
        try {
            CliRun report = CliRun.run("report", snap.toString(), "-o", page.toString());
            refused(report, "gpumem report: cannot write " + page + ": " + why);
            assertThat(report.err()).doesNotContain(".tmp");
            for (String command : new String[] {"analyze", "compare"}) {
                CliRun html = CliRun.run(command, snap.toString(), "--html", page.toString());
                refused(html, "gpumem " + command + ": cannot write the HTML report to " + page + ": " + why);
                assertThat(html.err()).doesNotContain(".tmp");
            }
            assertThat(page).doesNotExist();
            if (where.equals(readOnly)) {
                try (Stream<Path> left = Files.list(readOnly)) {
                    assertThat(left).as("nothing left behind").isEmpty();
                }
            }
        } finally {
            Files.setPosixFilePermissions(readOnly, PosixFilePermissions.fromString("rwxr-xr-x"));
        }
    }

    /** {@code template} with OUT, IN and CSV put in. */
    private static String[] args(String[] template, Path out, Path in, Path csv) {
        String[] a = template.clone();
        for (int i = 0; i < a.length; i++) {
            a[i] = switch (a[i]) {
                case "OUT" -> out.toString();
                case "IN" -> in.toString();
                case "CSV" -> csv.toString();
                default -> a[i];
            };
        }
        return a;
    }

    @Test
    void demoRefusesABadConfigurationBeforePrintingAnything(@TempDir Path dir) {
        Path snap = dir.resolve("d.pickle");
        CliRun r = CliRun.run("demo", "--steps", "1", "--snapshot", snap.toString(), "--config", "bogus:1");
        refused(r, "gpumem demo: bad --config: Unrecognized CachingAllocator option: bogus");
        assertThat(r.out()).isEmpty();
        assertThat(snap).doesNotExist();
    }

    @Test
    void hugeGeneratedWorkloadsAreRefusedUpFront() {
        refused(
                CliRun.run("demo", "--steps", "2000000000"),
                "2000000000 steps of 16 layers would generate 2954000000588 ops",
                "over the limit of 20000000");
        refused(CliRun.run("demo", "--hidden", "2000000000", "--heads", "1"), "the model is too large to simulate");
        refused(CliRun.run("demo", "--layers", "2000000000"), "over the limit");
        refused(CliRun.run("kv-sim", "--layers", "2000000000"), "--layers 2000000000 is over the limit of 1024");
        refused(
                CliRun.run("kv-sim", "--requests", "2000000000"),
                "--requests 2000000000 is over the limit of 10000000");
        refused(
                CliRun.run("kv-sim", "--blocks", "2000000000", "--layers", "1000", "--head-size", "100000"),
                "the KV cache",
                "over the simulated device's limit");
    }

    @Test
    void aSmallGpuMemoryOnAnExpandableTraceReplaysWithoutAnInternalError() {
        String d = System.getProperty("gpumem.traces.dir");
        Path trace = d == null ? null : Path.of(d, "gnn-train-expandable-oom.pickle");
        assumeTrue(
                trace != null && Files.isRegularFile(trace),
                "trace gnn-train-expandable-oom.pickle not available: skipped");
        CliRun r = CliRun.run("replay", "--capacity", "1GiB", trace.toString());
        assertThat(r.err()).doesNotContain("null", "Exception");
        assertThat(r.exit()).as(r.err()).isZero();
        assertThat(r.out()).contains("total: ");
    }
}
