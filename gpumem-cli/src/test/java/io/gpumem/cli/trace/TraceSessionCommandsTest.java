package io.gpumem.cli.trace;

import static io.gpumem.testing.TestSizes.GiB;
import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.cli.CliRun;
import io.gpumem.cli.GpumemCli;
import io.gpumem.cli.report.ReportCommand;
import io.gpumem.trace.analysis.MemoryState;
import io.gpumem.trace.io.ReadLimits;
import io.gpumem.trace.replay.ProgressListener;
import io.gpumem.trace.session.TraceSession;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/**
 * The trace commands share one {@link TraceSession}: the file is read once under the same limits everywhere, and
 * a device's window is rebuilt (and its request stream compiled) once however many figures use it.
 */
class TraceSessionCommandsTest {

    @TempDir
    static Path dir;

    /** A generated training job recorded on a device too small for it: it ends in an OOM, so analysis replays. */
    static Path oomTrace;

    @BeforeAll
    static void record() throws Exception {
        oomTrace = OomTraces.record(dir);
    }

    /** Runs {@code gpumem ARGS} in-process and returns the command line, to reach the command object after the run. */
    private static CommandLine execute(StringWriter out, String... args) {
        CommandLine cl = GpumemCli.commandLine();
        StringWriter err = new StringWriter();
        cl.setOut(new PrintWriter(out, true));
        cl.setErr(new PrintWriter(err, true));
        int exit = cl.execute(args);
        assertThat(exit).as(err.toString()).isZero();
        return cl;
    }

    private static void assertReadAndRebuiltOnce(String command, TraceSession session) {
        System.out.println(command + ": file reads " + session.fileReads() + ", window rebuilds "
                + session.windowRebuilds() + ", stream compiles " + session.streamCompiles());
        assertThat(session.fileReads()).as(command).isEqualTo(1);
        assertThat(session.windowRebuilds()).as(command).isEqualTo(1);
        assertThat(session.streamCompiles()).as(command).isEqualTo(1);
    }

    @Test
    void compareHtmlReadsTheFileAndRebuildsTheWindowOnce() throws Exception {
        Path page = dir.resolve("compare.html");
        StringWriter out = new StringWriter();
        CommandLine cl = execute(
                out, "compare", oomTrace.toString(), "--config", "expandable_segments:True", "--html", page.toString());
        assertReadAndRebuiltOnce(
                "compare --html",
                ((CompareCommand) cl.getSubcommands().get("compare").getCommand()).session());
        // the page's what-if table holds the recommender's runs (they replayed that same window) beside compare's rows;
        // compare's recorded row is the recommender's baseline, shown once, as recorded
        String html = Files.readString(page);
        assertThat(html)
                .contains("<span class=\"tag base\">as recorded</span>", "max_split_size_mb:")
                .doesNotContain("recorded (defaults)");
        assertThat(out.toString()).contains("HTML report written to");
    }

    @Test
    void reportWithConfigsAndPoliciesRebuildsTheWindowOnce() throws Exception {
        Path page = dir.resolve("report.html");
        CommandLine cl = execute(
                new StringWriter(),
                "report",
                oomTrace.toString(),
                "-o",
                page.toString(),
                "--config",
                "expandable_segments:True",
                "--policy",
                "stitch");
        // the recommender's runs, the --config rows, the --policy rows and the page's timeline share one window
        assertReadAndRebuiltOnce(
                "report --config --policy",
                ((ReportCommand) cl.getSubcommands().get("report").getCommand()).session());
        assertThat(Files.readString(page)).contains("stitch");
    }

    @Test
    void reportOfAFileOfRequestsOnlyReplaysTheSessionsWindow() throws Exception {
        // a lifetime CSV: its states (at the peak, at the page's peak map) and its peak reserved card are all replays
        Path csv = dir.resolve("lifetimes.csv");
        List<String> rows = new ArrayList<>(List.of("id,lower,upper,size"));
        for (int i = 0; i < 40; i++) {
            rows.add(i + "," + i + "," + (i + 3 + i % 7) + "," + ((i % 5 + 1) << 20));
        }
        Files.write(csv, rows);
        Path page = dir.resolve("lifetimes.html");
        CommandLine cl = execute(new StringWriter(), "report", csv.toString(), "-o", page.toString());
        assertReadAndRebuiltOnce(
                "report of a lifetime CSV",
                ((ReportCommand) cl.getSubcommands().get("report").getCommand()).session());
        assertThat(Files.readString(page)).contains("replay");
    }

    /** Runs {@code gpumem COMMAND TRACE ARGS... --max-file-size 1KiB} and checks the one refusal every command gives. */
    private static CliRun refusedOverOneKiB(String command, String... args) throws Exception {
        long bytes = Files.size(oomTrace);
        List<String> all = new ArrayList<>(List.of(command, oomTrace.toString()));
        all.addAll(List.of(args));
        all.addAll(List.of("--max-file-size", "1KiB"));
        CliRun r = CliRun.run(all.toArray(String[]::new));
        assertThat(r.exit()).isEqualTo(2);
        assertThat(r.err())
                .isEqualTo("gpumem " + command + ": " + oomTrace + ": file is " + bytes
                        + " bytes, over the limit of 1024 bytes\n");
        assertThat(r.out()).isEmpty();
        return r;
    }

    @Test
    void analyzeRefusesAFileOverMaxFileSize() throws Exception {
        refusedOverOneKiB("analyze");
        long bytes = Files.size(oomTrace);
        assertThat(CliRun.run("analyze", oomTrace.toString(), "--no-compare", "--max-file-size", bytes + "B")
                        .exit())
                .as("a file of exactly the limit is read")
                .isZero();
    }

    @Test
    void reportRefusesAFileOverMaxFileSizeAndWritesNothing() throws Exception {
        Path page = dir.resolve("refused.html");
        refusedOverOneKiB("report", "-o", page.toString());
        assertThat(page).doesNotExist();
    }

    @Test
    void planRefusesAFileOverMaxFileSizeWithTheSameMessage() throws Exception {
        refusedOverOneKiB("plan");
    }

    @Test
    void analyzeAndReportRefuseAFileOverMaxEntries() {
        CliRun a = CliRun.run("analyze", oomTrace.toString(), "--max-entries", "10");
        assertThat(a.exit()).isEqualTo(2);
        assertThat(a.err()).startsWith("gpumem analyze: " + oomTrace + ": ").contains("10");
        CliRun r = CliRun.run(
                "report", oomTrace.toString(), "-o", dir.resolve("x.html").toString(), "--max-entries", "10");
        assertThat(r.exit()).isEqualTo(2);
        assertThat(r.err()).startsWith("gpumem report: " + oomTrace + ": ");
    }

    @Test
    void reportTakesTheDeviceByTheNameAnalyzeUsesAndByItsOldName() {
        for (String name : List.of("--trace-device", "--device")) {
            CliRun absent = CliRun.run(
                    "report", oomTrace.toString(), "-o", dir.resolve("d.html").toString(), name, "7");
            assertThat(absent.exit()).as(name).isEqualTo(2);
            assertThat(absent.err()).as(name).startsWith("gpumem report: ").contains("device 7");
        }
        CliRun analyze = CliRun.run("analyze", oomTrace.toString(), "--trace-device", "7", "--no-compare");
        assertThat(analyze.exit()).isEqualTo(2);
        assertThat(analyze.err()).startsWith("gpumem analyze: ").contains("device 7");
    }

    @Test
    void aSessionRebuildsEachWindowOnceForEveryUse() {
        TraceSession session = TraceSession.open(oomTrace, new ReadLimits(GiB, 1_000_000));
        int d = session.busiestDevice();
        assertThat(session.window(d)).isSameAs(session.window(d));
        session.analyze(d, null, MemoryState.UNKNOWN, 5, true);
        session.compare(d, List.of(session.recordedConfig()), List.of(), null, ProgressListener.NONE);
        assertThat(session.windowRebuilds()).isEqualTo(1);
        assertThat(session.streamCompiles()).isEqualTo(1);
        assertThat(session.fileReads()).isEqualTo(1);
    }
}
