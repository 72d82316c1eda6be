package io.gpumem.cli.plan;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpumem.cli.CliRun;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class PlanCommandTest {

    @TempDir
    Path dir;

    /**
     * Reads a plan CSV and checks, pair by pair, that no two buffers live at the same time share an address
     * (written independently of the planner: plain O(n²) interval tests on the file's own columns, with the
     * sizes as given); returns the highest offset + size.
     */
    static long checkPlanCsv(Path csv, int expectedRows) throws Exception {
        List<String> lines = Files.readAllLines(csv);
        assertThat(lines.get(0)).isEqualTo("id,lower,upper,size,offset");
        int n = lines.size() - 1;
        assertThat(n).isEqualTo(expectedRows);
        long[][] b = new long[n][];
        for (int i = 0; i < n; i++) {
            String[] f = lines.get(i + 1).split(",", -1);
            b[i] = new long[] {Long.parseLong(f[1]), Long.parseLong(f[2]), Long.parseLong(f[3]), Long.parseLong(f[4])};
        }
        long peak = 0;
        for (int i = 0; i < n; i++) {
            if (b[i][0] == b[i][1]) {
                continue;
            }
            peak = Math.max(peak, b[i][3] + b[i][2]);
            for (int j = i + 1; j < n; j++) {
                boolean inTime = b[j][0] < b[j][1] && b[i][0] < b[j][1] && b[j][0] < b[i][1];
                boolean inSpace = b[i][3] < b[j][3] + b[j][2] && b[j][3] < b[i][3] + b[i][2];
                if (inTime && inSpace) {
                    throw new AssertionError("rows " + (i + 1) + " and " + (j + 1) + " overlap");
                }
            }
        }
        return peak;
    }

    @Test
    void plansAMiniMallocInputAndWritesAValidCsv() throws Exception {
        Path in = dir.resolve("in.csv");
        Files.writeString(in, """
                id,lower,upper,size
                0,0,10,1024
                1,0,5,512
                2,5,10,512
                3,2,8,1000
                4,3,3,4096
                """);
        Path out = dir.resolve("out.csv");
        CliRun r = CliRun.run("plan", in.toString(), "--json", "--out", out.toString());
        assertThat(r.exit()).as(r.err()).isZero();
        assertThat(r.out())
                .contains(
                        "\"buffers\":5",
                        "\"peak_live\":2560",
                        "\"planned_peak\":2560",
                        "\"ratio\":1.0",
                        "\"solve_ms\":");
        assertThat(checkPlanCsv(out, 5)).isLessThanOrEqualTo(2560);
        // The output reads back as input.
        CliRun again = CliRun.run("plan", out.toString(), "--json");
        assertThat(again.exit()).isZero();
        assertThat(again.out()).contains("\"planned_peak\":2560");
    }

    @Test
    void sharedTracePlansPassTheOverlapCheck() throws Exception {
        String d = System.getProperty("gpumem.traces.dir");
        for (String name : new String[] {"tiny-forward.pickle", "nca-train-empty-cache.pickle"}) {
            assumeTrue(d != null && Files.isRegularFile(Path.of(d, name)), "trace " + name + " not available: skipped");
            Path out = dir.resolve(name + ".csv");
            CliRun r = CliRun.run("plan", Path.of(d, name).toString(), "--out", out.toString(), "--json");
            assertThat(r.exit()).as(r.err()).isZero();
            int rows = Files.readAllLines(out).size() - 1;
            long peakOfGivenSizes = checkPlanCsv(out, rows);
            long planned = Long.parseLong(
                    r.out().replaceAll("(?s).*\"planned_peak\":(\\d+).*", "$1").strip());
            assertThat(peakOfGivenSizes).isLessThanOrEqualTo(planned).isGreaterThan(planned - 512);
        }
    }

    @Test
    void traceDevicePicksTheDeviceAsTheOtherTraceCommandsDo() throws Exception {
        Path in = dir.resolve("one.csv");
        Files.writeString(in, "id,lower,upper,size\n0,0,10,1024\n");
        assertThat(CliRun.run("plan", in.toString(), "--trace-device", "0").exit())
                .isZero();
        CliRun second = CliRun.run("plan", in.toString(), "--trace-device", "1");
        assertThat(second.exit()).isEqualTo(2);
        assertThat(second.err())
                .isEqualTo("gpumem plan: " + in + ": device 1 has no trace to plan (a lifetime CSV is" + " device 0)"
                        + System.lineSeparator());
        assertThat(CliRun.run("plan", in.toString(), "--trace-device", "-1").err())
                .contains("--trace-device must be 0 or more, got -1");

        String d = System.getProperty("gpumem.traces.dir");
        Path gnn = d == null ? null : Path.of(d, "gnn-train-expandable-oom.pickle");
        assumeTrue(
                gnn != null && Files.isRegularFile(gnn),
                "trace gnn-train-expandable-oom.pickle not available: skipped");
        // three device traces: 2,434 allocs on device 0 (the busiest, the default), 199 on 1, 392 on 2
        assertThat(CliRun.run("plan", gnn.toString(), "--json").out()).contains("\"buffers\":2434");
        assertThat(CliRun.run("plan", gnn.toString(), "--json", "--trace-device", "1")
                        .out())
                .contains("\"buffers\":199");
        assertThat(CliRun.run("plan", gnn.toString(), "--json", "--trace-device", "2")
                        .out())
                .contains("\"buffers\":392");
        CliRun absent = CliRun.run("plan", gnn.toString(), "--trace-device", "3");
        assertThat(absent.exit()).isEqualTo(2);
        assertThat(absent.err()).contains("device 3 has no trace to plan");
    }

    @Test
    void badInputExitsTwoAndWritesNothing() throws Exception {
        Path in = dir.resolve("bad.csv");
        Files.writeString(in, "id,lower,upper,size\n0,5,2,100\n");
        Path out = dir.resolve("out.csv");
        CliRun r = CliRun.run("plan", in.toString(), "--out", out.toString());
        assertThat(r.exit()).isEqualTo(2);
        assertThat(r.err()).startsWith("gpumem plan: ").contains("bad.csv", "line 2", "upper");
        assertThat(out).doesNotExist();
        Files.writeString(in, "id,lower,upper,size\n0,1,2,x\n");
        r = CliRun.run("plan", in.toString());
        assertThat(r.exit()).isEqualTo(2);
        assertThat(r.err()).contains("line 2, field size");
        assertThat(CliRun.run("plan", dir.resolve("missing.csv").toString()).exit())
                .isEqualTo(2);
        assertThat(CliRun.run("plan", in.toString(), "--align", "3").exit()).isEqualTo(2);
    }

    @Test
    void aTargetRatioBelowOneIsRefused() throws Exception {
        Path in = dir.resolve("in.csv");
        Files.writeString(in, "id,lower,upper,size\n0,0,10,1024\n");
        CliRun r = CliRun.run("plan", in.toString(), "--target-ratio", "0.99");
        assertThat(r.exit()).isEqualTo(2);
        assertThat(r.err()).contains("gpumem plan: --target-ratio must be a finite number >= 1.0, got 0.99");
        CliRun exact = CliRun.run("plan", in.toString(), "--target-ratio", "1.0", "--json");
        assertThat(exact.exit()).as(exact.err()).isZero();
        assertThat(exact.out()).contains("\"planned_peak\":1024");
    }
}
