package io.gpumem.cli.trace;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import io.gpumem.alloc.Pool;
import io.gpumem.cli.CliRun;
import io.gpumem.history.BlockInfo;
import io.gpumem.history.BlockState;
import io.gpumem.history.FileKeys;
import io.gpumem.history.SegmentInfo;
import io.gpumem.size.ByteSize;
import io.gpumem.trace.io.PytorchSnapshotWriter;
import io.gpumem.trace.io.TraceReaders;
import io.gpumem.trace.io.TraceSnapshot;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class TraceCommandsTest {

    static CliRun run(String... args) {
        return CliRun.run(args);
    }

    static Path trace(String name) {
        String d = System.getProperty("gpumem.traces.dir");
        assumeTrue(d != null && Files.isRegularFile(Path.of(d, name)), "trace " + name + " not available: skipped");
        return Path.of(d, name);
    }

    /** Flat JSON object (numbers, strings, null, nested objects skipped) into a map. */
    static Map<String, Object> object(JsonParser p) throws Exception {
        Map<String, Object> m = new LinkedHashMap<>();
        assertThat(p.currentToken()).isEqualTo(JsonToken.START_OBJECT);
        while (p.nextToken() != JsonToken.END_OBJECT) {
            String key = p.currentName();
            JsonToken t = p.nextToken();
            switch (t) {
                case VALUE_NUMBER_INT -> m.put(key, p.getLongValue());
                case VALUE_STRING -> m.put(key, p.getText());
                case VALUE_NULL -> m.put(key, null);
                case START_OBJECT -> {
                    m.put(key, object(p));
                }
                default -> m.put(key, p.getText());
            }
        }
        return m;
    }

    static Map<String, Object> parseObject(String json) throws Exception {
        try (JsonParser p = new JsonFactory().createParser(json)) {
            p.nextToken();
            return object(p);
        }
    }

    static List<Map<String, Object>> parseArray(String json) throws Exception {
        List<Map<String, Object>> rows = new ArrayList<>();
        try (JsonParser p = new JsonFactory().createParser(json)) {
            assertThat(p.nextToken()).isEqualTo(JsonToken.START_ARRAY);
            while (p.nextToken() == JsonToken.START_OBJECT) {
                rows.add(object(p));
            }
        }
        return rows;
    }

    @Test
    void replayCheckReportsExactFidelityAsJson() throws Exception {
        CliRun r =
                run("replay", "--check", "--json", trace("tiny-forward.pickle").toString());
        assertThat(r.exit()).as(r.err()).isZero();
        Map<String, Object> j = parseObject(r.lastLine());
        assertThat(j.keySet())
                .containsExactly("trace", "allocs", "exact", "segment_events", "segment_matched", "first_mismatch");
        assertThat(j)
                .containsEntry("allocs", 36L)
                .containsEntry("exact", 36L)
                .containsEntry("segment_events", 9L)
                .containsEntry("segment_matched", 9L)
                .containsEntry("first_mismatch", null);
        assertThat(r.out()).contains("first mismatch: none");
    }

    @Test
    void replayCheckIsExactOnTheExpandableSegmentsTraceWithItsThreeDevices() throws Exception {
        CliRun r = run(
                "replay",
                "--check",
                "--json",
                trace("gnn-train-expandable-oom.pickle").toString());
        assertThat(r.exit()).as(r.out() + r.err()).isZero();
        Map<String, Object> j = parseObject(r.lastLine());
        // 2,434 + 199 + 392 allocs; 175 + 40 + 78 maps and 6 unmaps.
        assertThat(j)
                .containsEntry("allocs", 3025L)
                .containsEntry("exact", 3025L)
                .containsEntry("segment_events", 299L)
                .containsEntry("segment_matched", 299L);
        assertThat(r.out()).contains("device 2:").contains("1 oom entry");
    }

    @Test
    void theModelSnapshotOfAMultiDeviceTraceKeepsDeviceNumbersAndEndState(@TempDir Path dir) throws Exception {
        Path original = trace("gnn-train-expandable-oom.pickle");
        Path out = dir.resolve("model.pickle");
        CliRun r = run("replay", "--snapshot", out.toString(), original.toString());
        assertThat(r.exit()).as(r.err()).isZero();
        var model = TraceReaders.read(out);
        var recorded = TraceReaders.read(original);
        // One reported segment per contiguous mapped run, on the same devices, block by block.
        assertThat(model.segments()).hasSameSizeAs(recorded.segments());
        for (int i = 0; i < recorded.segments().size(); i++) {
            var m = model.segments().get(i);
            var o = recorded.segments().get(i);
            assertThat(m.device()).isEqualTo(o.device());
            assertThat(m.address()).isEqualTo(o.address());
            assertThat(m.expandable()).isTrue();
            assertThat(m.blocks())
                    .extracting(b -> b.address() + ":" + b.size() + ":" + b.state())
                    .isEqualTo(o.blocks().stream()
                            .map(b -> b.address() + ":" + b.size() + ":" + b.state())
                            .toList());
        }
        assertThat(model.traceOf(2)).hasSameSizeAs(recorded.traceOf(2));
    }

    @Test
    void replayWritesASnapshotPythonCanLoad(@TempDir Path dir) throws Exception {
        Path out = dir.resolve("model.pickle");
        CliRun r = run(
                "replay",
                "--snapshot",
                out.toString(),
                trace("tiny-forward.pickle").toString());
        assertThat(r.exit()).as(r.err()).isZero();
        assertThat(out).exists();
        boolean python;
        try {
            python = new ProcessBuilder("python3", "-c", "pass").start().waitFor() == 0;
        } catch (Exception e) {
            python = false;
        }
        assumeTrue(python, "python3 not found: skipped the standard-pickle check");
        // The model's end state has the recorded trace's 9 segments; its history has 36 allocs.
        Process p = new ProcessBuilder(
                        "python3",
                        "-c",
                        "import pickle,sys; d=pickle.load(open(sys.argv[1],'rb'));"
                                + " print(len(d['segments']), sum(e['action']=='alloc' for e in d['device_traces'][0]),"
                                + " sorted(d.keys()))",
                        out.toString())
                .redirectErrorStream(true)
                .start();
        String text = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
        assertThat(p.waitFor()).as(text).isZero();
        assertThat(text).isEqualTo("9 36 ['allocator_settings', 'device_traces', 'external_annotations', 'segments']");
    }

    @Test
    void corruptAndTruncatedFilesExitWithStatusTwoAndNoStackTrace(@TempDir Path dir) throws Exception {
        byte[] whole = Files.readAllBytes(trace("tiny-forward.pickle"));
        Path truncated = dir.resolve("truncated.pickle");
        Files.write(truncated, Arrays.copyOf(whole, whole.length / 2));
        Path garbage = dir.resolve("garbage.csv");
        Files.writeString(garbage, "hello,world\n1,2\n");
        Path badRmm = dir.resolve("rmm.csv");
        Files.writeString(badRmm, "Thread,Time,Action,Pointer,Size,Stream\n1,1,allocate,0x10,12x,0\n");
        Path badLifetimes = dir.resolve("life.csv");
        Files.writeString(badLifetimes, "id,lower,upper,size\n0,1,2,3\n1,9,2,3\n");
        Path truncatedCsv = dir.resolve("cut.csv");
        Files.writeString(truncatedCsv, "id,lower,upper,size\n0,1,2,3\n1,4,");
        Path badScript = dir.resolve("job.ops");
        Files.writeString(badScript, "alloc a 1000\nfree a\nfree a\n");
        Path binary = dir.resolve("noise.bin");
        byte[] noise = new byte[2048];
        new Random(11).nextBytes(noise);
        noise[0] = '}';
        Files.write(binary, noise);
        for (String cmd : new String[] {"replay", "compare"}) {
            for (Path f : new Path[] {
                truncated, garbage, badRmm, badLifetimes, truncatedCsv, badScript, binary, dir.resolve("missing.pickle")
            }) {
                CliRun r = run(cmd, f.toString());
                assertThat(r.exit()).as(cmd + " " + f).isEqualTo(2);
                assertThat(r.err())
                        .contains(f.toString())
                        .doesNotContain("Exception")
                        .doesNotContain("\tat ");
            }
        }
        CliRun line = run("replay", badRmm.toString());
        assertThat(line.err()).contains("line 2, field Size");
    }

    /**
     * {@code replay --snapshot} of a file of requests only writes the layout the caching allocator gives its requests
     * (there is no recorded placement to replay in oracle mode): the snapshot's end state is the state {@code analyze}
     * replays the log to at its last entry, pool for pool; on a device too small, the snapshot is the state the first
     * request that does not fit failed in, with its oom entry.
     */
    @Test
    void aFileOfRequestsOnlyIsReplayedIntoTheCachingAllocatorsLayout(@TempDir Path dir) throws Exception {
        StringBuilder log = new StringBuilder("Thread,Time,Action,Pointer,Size,Stream\n");
        java.util.SplittableRandom random = new SplittableRandom(17);
        List<long[]> live = new ArrayList<>();
        long next = 0x7f0000000000L;
        int lines = 0;
        for (int i = 0; i < 300; i++) {
            if (!live.isEmpty() && random.nextInt(5) < 2) {
                long[] b = live.remove(random.nextInt(live.size()));
                log.append(String.format("1,%d.%03d,free,0x%x,%d,0x0%n", i / 1000, i % 1000, b[0], b[1]));
            } else {
                long size = random.nextInt(3) == 0 ? 1 + random.nextInt(100_000) : (1 + random.nextInt(40)) << 20;
                log.append(String.format("1,%d.%03d,allocate,0x%x,%d,0x0%n", i / 1000, i % 1000, next, size));
                live.add(new long[] {next, size});
                next += (size + 4095) & ~4095L;
            }
            lines++;
        }
        Path csv = dir.resolve("requests.csv");
        Files.writeString(csv, log);
        Path pickle = dir.resolve("replayed.pickle");
        CliRun replay = run("replay", csv.toString(), "--snapshot", pickle.toString());
        assertThat(replay.exit()).as(replay.err()).isZero();
        assertThat(replay.out())
                .contains("placement cannot be checked")
                .contains("replayed under the default configuration")
                .doesNotContain("does not fit");
        int entries = Integer.parseInt(replay.out().replaceAll("(?s).*: (\\d+) entries on 1 device trace.*", "$1"));
        assertThat(entries).isGreaterThanOrEqualTo(lines);

        CliRun ofSnapshot = run("analyze", pickle.toString(), "--no-compare");
        CliRun ofLog = run("analyze", csv.toString(), "--no-compare", "--at", Integer.toString(entries - 1));
        assertThat(ofSnapshot.exit()).as(ofSnapshot.err()).isZero();
        assertThat(ofLog.exit()).as(ofLog.err()).isZero();
        assertThat(poolRows(ofSnapshot.out())).hasSize(3).isEqualTo(poolRows(ofLog.out()));

        Path small = dir.resolve("small.pickle");
        CliRun tight = run("replay", csv.toString(), "--snapshot", small.toString(), "--capacity", "64MiB");
        assertThat(tight.exit()).as(tight.err()).isZero();
        assertThat(tight.out()).contains("does not fit, and the snapshot is the state it failed in");
        CliRun failed = run("analyze", small.toString(), "--no-compare");
        assertThat(failed.out()).contains("because: oom entry #");

        // the report's card: the log records no reserved bytes, so the page shows what a replay of it reserves (its
        // own replay, or the recommender's baseline when the analysis ran compare runs), compare's recorded row
        Path page = dir.resolve("page.html");
        CliRun report = run("report", csv.toString(), "-o", page.toString());
        assertThat(report.exit()).as(report.err()).isZero();
        CliRun cmp = run("compare", csv.toString(), "--json");
        long peakReserved = (Long) parseArray(cmp.lastLine()).getFirst().get("peak_reserved");
        assertThat(Files.readString(page))
                .contains("<div class=\"label\">peak reserved</div><div class=\"value\">"
                        + ByteSize.formatSigned(peakReserved) + "</div>");
    }

    /**
     * A request the log saw fail (RMM's {@code allocate failure}) is asked again by the replay and, where it fits now,
     * served and freed at once; the frees after it release their own blocks. They released the block one slot
     * before theirs until the compile counted the asks: here the 8 MiB block stayed allocated and the 4 MiB one was
     * freed.
     */
    @Test
    void aFailedRequestServedByTheReplayLeavesLaterFreesTheirOwnBlocks(@TempDir Path dir) throws Exception {
        Path csv = dir.resolve("failed.csv");
        Files.writeString(csv, """
                Thread,Time,Action,Pointer,Size,Stream
                1,0.001,allocate,0x7f0000000000,1048576,0x0
                1,0.002,allocate failure,0x0,2097152,0x0
                1,0.003,allocate,0x7f0000100000,4194304,0x0
                1,0.004,allocate,0x7f0000500000,8388608,0x0
                1,0.005,free,0x7f0000500000,8388608,0x0
                1,0.006,allocate,0x7f0000d00000,2097152,0x0
                """);
        Path pickle = dir.resolve("replayed.pickle");
        CliRun replay = run("replay", csv.toString(), "--snapshot", pickle.toString());
        assertThat(replay.exit()).as(replay.err()).isZero();
        assertThat(replay.out()).doesNotContain("does not fit");
        List<Long> live = new ArrayList<>();
        for (SegmentInfo seg : TraceReaders.read(pickle).segments()) {
            for (BlockInfo b : seg.blocks()) {
                if (b.state() == BlockState.ACTIVE_ALLOCATED) {
                    live.add(b.requestedSize());
                }
            }
        }
        assertThat(live).containsExactlyInAnyOrder(1L << 20, 4L << 20, 2L << 20);
    }

    /**
     * A log whose first request no device could hold gets the engine's refusal, naming the request, from every command
     * that sizes a device for it; the recorded run's capacity came out as 0 bytes before, and the user read
     * "inconsistent snapshot: capacity must be positive, got 0".
     */
    @Test
    void aLogNoDeviceCanHoldIsRefusedWithTheLargestRequest(@TempDir Path dir) throws Exception {
        Path csv = dir.resolve("huge.csv");
        Files.writeString(csv, """
                Thread,Time,Action,Pointer,Size,Stream
                1,10:00:00.000001,allocate,0x7f00,9223372036854775807,0x0
                1,10:00:00.000002,free,0x7f00,9223372036854775807,0x0
                """);
        CliRun r = run("compare", csv.toString());
        assertThat(r.exit()).isEqualTo(2);
        assertThat(r.err())
                .startsWith("gpumem compare: no device capacity runs these requests")
                .contains("the largest request asks for 9223372036854775807 bytes")
                .doesNotContain("capacity must be positive");
        // analyze sizes the request at round_size first (what its live bytes are for), which 64 bits cannot hold
        CliRun a = run("analyze", csv.toString());
        assertThat(a.exit()).isEqualTo(2);
        assertThat(a.err())
                .startsWith("gpumem analyze: " + csv + ": entry 0: a request of 9223372036854775807 bytes")
                .doesNotContain("capacity must be positive");
    }

    /** The per-pool rows of {@code analyze}'s text (small_pool, large_pool, all). */
    private static List<String> poolRows(String analyzeOutput) {
        return analyzeOutput
                .lines()
                .filter(l -> l.startsWith("small_pool ") || l.startsWith("large_pool ") || l.startsWith("all "))
                .toList();
    }

    /**
     * A log whose requests no device holds (one asks for 2^61 bytes, which PyTorch refuses on any device): every
     * command that searches a minimum capacity says there is none, exit 2, where the search once doubled its capacity
     * past the largest long and refused a negative one as an "inconsistent snapshot".
     */
    @Test
    void whatIfSnapshotsAreOfTheRunCompareReportsUnlessACapacityIsGiven(@TempDir Path dir) throws Exception {
        // two 50 GiB blocks live at once: more than the 79.17 GiB the oracle replay assumes for expandable segments
        Path csv = dir.resolve("big.csv");
        Files.writeString(csv, """
                Thread,Time,Action,Pointer,Size,Stream
                1,0.001,allocate,0x7f0000000000,53687091200,0x0
                1,0.002,allocate,0x7f0d00000000,53687091200,0x0
                1,0.003,free,0x7f0000000000,53687091200,0x0
                """);
        CliRun compare = run("compare", csv.toString());
        assertThat(compare.exit()).as(compare.err()).isZero();
        assertThat(compare.out()).contains("capacity 100.00 GiB");

        Path layout = dir.resolve("layout.pickle");
        CliRun replay = run("replay", csv.toString(), "--snapshot", layout.toString());
        assertThat(replay.exit()).as(replay.err()).isZero();
        assertThat(replay.out()).contains("on 100.00 GiB").doesNotContain("does not fit");
        Path stitched = dir.resolve("stitch.pickle");
        CliRun policy = run("replay", csv.toString(), "--policy", "stitch", "--snapshot", stitched.toString());
        assertThat(policy.exit()).as(policy.err()).isZero();
        assertThat(policy.out()).contains("on 100.00 GiB");
        assertThat(TraceReaders.read(stitched).segments().stream()
                        .mapToLong(SegmentInfo::allocatedSize)
                        .sum())
                .as("the second block, live at the end")
                .isEqualTo(50L << 30);

        CliRun tight = run("replay", csv.toString(), "--snapshot", layout.toString(), "--capacity", "80GiB");
        assertThat(tight.exit()).as(tight.err()).isZero();
        assertThat(tight.out()).contains("on 80.00 GiB").contains("the request of entry #1 does not fit");
    }

    @Test
    void aFailedRequestNoDeviceServesLeavesTheRowsWithoutAMinimumCapacity(@TempDir Path dir) throws Exception {
        // a program that asked for 4 EiB (a size gone wrong) and failed: asked again, no capacity serves it
        Path csv = dir.resolve("absurd.csv");
        Files.writeString(csv, """
                Thread,Time,Action,Pointer,Size,Stream
                1,0.001,allocate,0x7f0000000000,10485760,0x0
                1,0.002,allocate failure,0x0,4611686018427387904,0x0
                1,0.003,free,0x7f0000000000,10485760,0x0
                """);
        CliRun text = run("compare", csv.toString(), "-c", "expandable_segments:True");
        assertThat(text.exit()).as(text.err()).isZero();
        assertThat(text.out()).containsPattern("recorded \\(defaults\\) .* 1 +none ");
        CliRun json = run("compare", csv.toString(), "--json");
        assertThat(json.exit()).as(json.err()).isZero();
        assertThat(json.out()).contains("\"min_capacity\":null", "\"ooms\":1");
        CliRun analyze = run("analyze", csv.toString());
        assertThat(analyze.exit()).as(analyze.err()).isZero();
        assertThat(analyze.out()).contains("compare runs:");

        // without the failure, the same requests have a minimum capacity
        Files.writeString(csv, """
                Thread,Time,Action,Pointer,Size,Stream
                1,0.001,allocate,0x7f0000000000,10485760,0x0
                1,0.003,free,0x7f0000000000,10485760,0x0
                """);
        assertThat(run("compare", csv.toString(), "--json").out()).contains("\"min_capacity\":10485760");
    }

    @Test
    void requestsBeyondAnyDeviceAreRefusedWithTheReason(@TempDir Path dir) throws Exception {
        Path log = dir.resolve("huge.csv");
        Files.writeString(log, """
                Thread,Time,Action,Pointer,Size,Stream
                1,0.001,allocate,0x7f0000000000,10485760,0x0
                1,0.002,allocate,0x7f0001000000,2305843009213693952,0x0
                """);
        for (String[] args : new String[][] {
            {"compare", log.toString()},
            {"analyze", log.toString()},
            {"report", log.toString(), "-o", dir.resolve("page.html").toString()}
        }) {
            CliRun r = run(args);
            assertThat(r.exit()).as(String.join(" ", args)).isEqualTo(2);
            assertThat(r.err())
                    .contains("no device capacity runs these requests")
                    .contains("the largest request asks for 2305843009213693952 bytes")
                    .doesNotContain("inconsistent")
                    .doesNotContain("\tat ");
        }
        assertThat(dir.resolve("page.html")).doesNotExist();
    }

    @Test
    void aRequestPastTheLargestModelledDeviceButNotPastAnyIsDiagnosedWithoutACapacitySearch(@TempDir Path dir)
            throws Exception {
        // 100 PiB: some device could hold it (PyTorch refuses 1 EiB and more), none the runs model (32 TiB). The
        // search climbed towards it on devices of PiB, which expandable segments cannot even be sized for.
        Path log = dir.resolve("100pib.csv");
        Files.writeString(log, """
                Thread,Time,Action,Pointer,Size,Stream
                1,0.001,allocate,0x7f00,112589990684262400,0x0
                1,0.002,free,0x7f00,112589990684262400,0x0
                """);
        CliRun r = run("analyze", log.toString());
        assertThat(r.exit()).as(r.err()).isZero();
        assertThat(r.out())
                .contains("diagnosis: REQUEST TOO LARGE")
                .contains("note: minimum capacity not searched: the workload has 104857600.00 GiB live at once, more"
                        + " than the largest device the runs model (32768.00 GiB)");
    }

    @Test
    void requestsWhoseSizesPass2To63WhenRoundedOrAddedAreRefusedNamingTheEntry(@TempDir Path dir) throws Exception {
        // the category table summed rounded sizes that had wrapped: "size must not be negative: -9223372036854775808"
        Path max = dir.resolve("max.csv");
        Files.writeString(max, """
                Thread,Time,Action,Pointer,Size,Stream
                1,0.001,allocate,0x7f00,9223372036854775807,0x0
                1,0.002,free,0x7f00,9223372036854775807,0x0
                """);
        Path two = dir.resolve("two.csv");
        Files.writeString(two, """
                Thread,Time,Action,Pointer,Size,Stream
                1,0.001,allocate,0x7f00,4611686018427387904,0x0
                1,0.002,allocate,0x9f00,4611686018427387904,0x0
                """);
        CliRun r = run("analyze", max.toString(), "--no-compare");
        assertThat(r.exit()).isEqualTo(2);
        assertThat(r.err())
                .contains(max + ": entry 0: a request of 9223372036854775807 bytes, rounded up as the allocator"
                        + " rounds it, is past 2^63 - 1 bytes")
                .doesNotContain("must not be negative");
        CliRun sum = run("analyze", two.toString(), "--no-compare");
        assertThat(sum.exit()).isEqualTo(2);
        assertThat(sum.err())
                .contains(two + ": entry 1: the requests live at once add up to more than 2^63 - 1 bytes")
                .doesNotContain("must not be negative");
    }

    @Test
    void compareRowsFollowTheSpecAndTheRecordedRowMatchesTheTrace() throws Exception {
        Path f = trace("lm2.7b-train-step.pickle");
        CliRun r = run(
                "compare",
                f.toString(),
                "--config",
                "expandable_segments:True",
                "--config",
                "max_split_size_mb:128",
                "--json");
        assertThat(r.exit()).as(r.err()).isZero();
        List<Map<String, Object>> rows = parseArray(r.lastLine());
        assertThat(rows).hasSize(3);
        assertThat(rows.getFirst().keySet())
                .containsExactly(
                        "config",
                        "peak_allocated",
                        "peak_reserved",
                        "min_capacity",
                        "device_allocs",
                        "retries",
                        "ooms",
                        "policy",
                        "device_maps",
                        "ns_per_pair",
                        "mode",
                        "warm_up_passes");
        assertThat(rows).allSatisfy(row -> assertThat(row.get("policy")).isEqualTo("pytorch"));
        // A cold-start recording (no cached block at its start) is replayed from its own window, never iterated.
        assertThat(rows).allSatisfy(row -> assertThat(row).containsEntry("mode", "window"));
        // This window never releases memory, so its peak reserved is the end state's total: 56.9 GiB.
        long endReserved = 0;
        var s = TraceReaders.read(f);
        for (var seg : s.segments()) {
            endReserved += seg.totalSize();
        }
        assertThat(rows.getFirst())
                .containsEntry("peak_reserved", endReserved)
                .containsEntry("device_allocs", 783L)
                .containsEntry("ooms", 0L);
        for (Map<String, Object> row : rows) {
            assertThat((Long) row.get("peak_reserved")).isGreaterThanOrEqualTo((Long) row.get("peak_allocated"));
            assertThat((Long) row.get("min_capacity") % (2L << 20)).isZero();
        }
        assertThat(rows.get(1)).containsEntry("config", "expandable_segments:True");
        CliRun table = run("compare", f.toString(), "-c", "expandable_segments:True");
        assertThat(table.out())
                .contains("recorded (defaults)")
                .contains("expandable_segments:True")
                .contains("min capacity");
    }

    @Test
    void aSnapshotWhoseBlocksDoNotTileTheirSegmentIsReportedAsInconsistent(@TempDir Path dir) throws Exception {
        var s = TraceReaders.read(trace("lm-medium-train-ctx128.pickle"));
        // Damage the end state: one segment claims 100 bytes more than its blocks cover.
        var segs = new ArrayList<>(s.segments());
        var g = segs.get(3);
        segs.set(
                3,
                new SegmentInfo(
                        g.device(),
                        g.address(),
                        g.totalSize() + 100,
                        g.allocatedSize(),
                        g.activeSize(),
                        g.requestedSize(),
                        g.stream(),
                        ("small".equals(g.segmentType()) ? Pool.SMALL : Pool.LARGE),
                        g.expandable(),
                        g.frames(),
                        g.blocks(),
                        g.poolId(),
                        FileKeys.of(g.fields(), null, null, g.extra())));
        Path f = dir.resolve("damaged.pickle");
        new PytorchSnapshotWriter()
                .write(
                        new TraceSnapshot(
                                s.source(),
                                s.format(),
                                segs,
                                s.deviceTraces(),
                                s.allocatorSettings(),
                                s.externalAnnotations(),
                                s.extra(),
                                true),
                        f);
        for (String cmd : new String[] {"replay", "compare"}) {
            CliRun r = run(cmd, f.toString());
            assertThat(r.exit()).as(cmd + ": " + r.out() + r.err()).isEqualTo(2);
            assertThat(r.err())
                    .contains(f.toString())
                    .contains("inconsistent snapshot")
                    .doesNotContain("\tat ");
        }
    }

    @Test
    void compareRejectsABadConfig() {
        CliRun r = run("compare", trace("tiny-forward.pickle").toString(), "--config", "max_split_size_mb:nope");
        assertThat(r.exit()).isEqualTo(2);
        assertThat(r.err()).contains("bad --config").doesNotContain("\tat ");
    }

    @Test
    void lifetimesCanBeComparedButNotChecked() throws Exception {
        Path f = trace("pangu13b-lifetimes.csv");
        CliRun check = run("replay", "--check", f.toString());
        assertThat(check.exit()).isEqualTo(2);
        assertThat(check.err()).contains("placement cannot be checked");
        CliRun cmp = run("compare", f.toString(), "--json", "-c", "expandable_segments:True");
        assertThat(cmp.exit()).as(cmp.err()).isZero();
        List<Map<String, Object>> rows = parseArray(cmp.lastLine());
        // No placement can hold less than the peak live bytes: 15.41 GiB.
        for (Map<String, Object> row : rows) {
            assertThat((Long) row.get("min_capacity") / (double) (1L << 30)).isGreaterThan(15.40);
        }
    }
}
