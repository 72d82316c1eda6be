package io.gpumem.cli.sim;

import static io.gpumem.testing.TestSizes.MiB;
import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpumem.cli.CliRun;
import io.gpumem.cli.GpumemCli;
import io.gpumem.stats.GoldenSummaries;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** End to end: {@code gpumem sim} through {@link GpumemCli#commandLine()} with the real allocator. */
class SimCommandTest {

    /** The fake CUDA driver gpumem-cuda's test build compiles (8 GiB, virtual memory supported). */
    private static final Path FAKE_CUDA = Path.of("../gpumem-cuda/target/test-classes/native/libfakecuda.so")
            .toAbsolutePath()
            .normalize();

    /** allocator.md §8.3, character for character (kept once, in gpumem-core's test resources). */
    private static final String SECTION_8_3 = GoldenSummaries.SECTION_8_3;

    private static CliRun run(String stdin, String... args) {
        return CliRun.withInput(stdin, args);
    }

    private static Map<String, Long> parseStats(String block) {
        Map<String, Long> m = new LinkedHashMap<>();
        for (String line : block.lines().toList()) {
            if (!line.isEmpty()) {
                String[] kv = line.split(" ");
                assertThat(kv).hasSize(2);
                m.put(kv[0], Long.parseLong(kv[1]));
            }
        }
        return m;
    }

    @Test
    void workedExampleFromAFilePrintsTheSection83Table(@TempDir Path dir) throws Exception {
        Path script = dir.resolve("example.ops");
        Files.writeString(script, """
                # allocator.md §6.3
                alloc a 1000
                alloc b 3MiB
                alloc c 25000000
                free b
                free a
                summary
                """);
        CliRun r = run("", "sim", script.toString());
        assertThat(r.err()).isEmpty();
        assertThat(r.exit()).isZero();
        assertThat(r.out()).isEqualTo(SECTION_8_3);
    }

    @Test
    void workedExampleFromStandardInputWithDash() {
        CliRun r = run("alloc a 1000\nalloc b 3MiB\nalloc c 25000000\nfree b\nfree a\nsummary\n", "sim", "-");
        assertThat(r.exit()).isZero();
        assertThat(r.out()).isEqualTo(SECTION_8_3);
        CliRun noArg = run("alloc a 1000\nalloc b 3MiB\nalloc c 25000000\nfree b\nfree a\nsummary\n", "sim");
        assertThat(noArg.out()).isEqualTo(SECTION_8_3);
    }

    @Test
    void workedExampleStatsAndEmptyCache() {
        CliRun r = run("""
                alloc a 1000
                alloc b 3MiB
                alloc c 25000000
                free b
                free a
                stats
                """, "sim");
        Map<String, Long> s = parseStats(r.out());
        assertThat(new java.util.ArrayList<>(s.keySet())).isSorted();
        assertThat(s)
                .containsEntry("reserved_bytes.all.current", 48_234_496L)
                .containsEntry("allocated_bytes.all.current", 25_165_824L)
                .containsEntry("requested_bytes.all.current", 25_000_000L)
                .containsEntry("segment.all.current", 3L)
                .containsEntry("inactive_split.all.peak", 2L)
                .containsEntry("num_ooms", 0L)
                .containsEntry("max_split_size", -1L);
        CliRun after = run("alloc a 1000\nalloc b 3MiB\nalloc c 25000000\nfree b\nfree a\nempty_cache\nstats\n", "sim");
        assertThat(parseStats(after.out())).containsEntry("reserved_bytes.all.current", 25_165_824L);
    }

    @Test
    void expandableSegmentsWorkedExample() {
        // allocator.md §5.3.
        CliRun r = run("""
                config expandable_segments:True
                alloc a 3MiB
                stats
                alloc b 30MiB
                stats
                free a
                free b
                empty_cache
                stats
                """, "sim");
        assertThat(r.err()).isEmpty();
        assertThat(r.exit()).isZero();
        String[] blocks = r.out().split("(?m)^(?=active\\.all\\.allocated )", -1);
        assertThat(blocks).hasSize(3);
        Map<String, Long> first = parseStats(blocks[0]);
        Map<String, Long> second = parseStats(blocks[1]);
        Map<String, Long> third = parseStats(blocks[2]);
        assertThat(first)
                .containsEntry("reserved_bytes.all.current", 20 * MiB)
                .containsEntry("allocated_bytes.all.current", 3 * MiB)
                .containsEntry("num_device_alloc", 1L);
        assertThat(second)
                .containsEntry("reserved_bytes.all.current", 40 * MiB)
                .containsEntry("allocated_bytes.all.current", 33 * MiB)
                .containsEntry("num_device_alloc", 2L)
                .containsEntry("segment.all.current", 0L);
        assertThat(third)
                .containsEntry("reserved_bytes.all.current", 0L)
                .containsEntry("num_device_free", 1L)
                .containsEntry("segment.all.current", 0L)
                .containsEntry("allocated_bytes.all.current", 0L);
    }

    @Test
    void earlyConfigSetsTheMaxSplitSizeStatLaterConfigDoesNot() {
        CliRun early = run("config max_split_size_mb:128\nstats\n", "sim");
        assertThat(parseStats(early.out())).containsEntry("max_split_size", 128 * MiB);
        CliRun late = run("stats\nconfig max_split_size_mb:128\nstats\n", "sim");
        assertThat(late.out()).contains("max_split_size -1\n").doesNotContain("max_split_size " + 128 * MiB);
    }

    @Test
    void oomPrintsPyTorchsMessageAndTheScriptGoesOn() {
        CliRun r = run("""
                device capacity=64MiB
                alloc a 30MiB
                alloc big 100MiB
                free big
                alloc b 10MiB
                stats
                """, "sim");
        assertThat(r.exit()).isZero();
        assertThat(r.err())
                .startsWith("gpumem sim: line 3: alloc big: CUDA out of memory. Tried to allocate 100.00 MiB."
                        + " GPU 0 has a total capacity of 64.00 MiB of which ");
        assertThat(r.err())
                .contains(
                        "If reserved but unallocated memory is large try setting"
                                + " PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation");
        assertThat(r.err())
                .contains("gpumem sim: line 4: free big skipped: its allocation on line 3 ran out of memory");
        Map<String, Long> s = parseStats(r.out());
        assertThat(s)
                .containsEntry("num_ooms", 1L)
                .containsEntry("allocation.all.current", 2L)
                .containsEntry("allocated_bytes.all.current", 40 * MiB);
    }

    @Test
    void failOnOomExitsOne() {
        CliRun r = run("device capacity=64MiB\nalloc big 100MiB\nstats\n", "sim", "--fail-on-oom");
        assertThat(r.exit()).isEqualTo(1);
        assertThat(r.out()).isEmpty();
        assertThat(r.err()).contains("line 2: alloc big: CUDA out of memory.");
    }

    @Test
    void heldMemoryReducesWhatTheAllocatorCanGet() {
        CliRun r = run("device capacity=64MiB held=40MiB\nalloc a 30MiB\nstats\n", "sim");
        assertThat(r.err()).contains("line 2: alloc a: CUDA out of memory. Tried to allocate 30.00 MiB.");
        assertThat(parseStats(r.out())).containsEntry("num_ooms", 1L).containsEntry("reserved_bytes.all.current", 0L);
    }

    @Test
    void recordStreamKeepsTheBlockActiveUntilEventsComplete() {
        CliRun r = run("""
                alloc a 1MiB
                record_stream a 5
                free a
                stats
                complete_events
                alloc b 1000
                stats
                """, "sim");
        assertThat(r.exit()).isZero();
        String[] blocks = r.out().split("(?m)^(?=active\\.all\\.allocated )", -1);
        Map<String, Long> pending = parseStats(blocks[0]);
        Map<String, Long> done = parseStats(blocks[1]);
        assertThat(pending)
                .containsEntry("allocated_bytes.all.current", 0L)
                .containsEntry("active_bytes.all.current", MiB);
        assertThat(done).containsEntry("active_bytes.all.current", 1024L);
    }

    @Test
    void abbreviatedSummaryAndResetPeak() {
        CliRun r = run("alloc a 3MiB\nfree a\nreset_peak\nsummary abbreviated\n", "sim");
        assertThat(r.out())
                .doesNotContain("from large pool")
                .contains("| Allocated memory      |      0 B   |      0 B   |   3072 KiB |   3072 KiB |");
    }

    @Test
    void anEmptyScriptNameIsRefusedAsSuch() {
        CliRun r = run("alloc a 1\nstats\n", "sim", "");
        assertThat(r.exit()).isEqualTo(2);
        assertThat(r.out()).isEmpty();
        assertThat(r.err())
                .isEqualTo("gpumem sim: the script's file name is empty (name a file, or '-' for standard input)\n");
    }

    @Test
    void badInputStopsWithExitTwoAndNoOutput() {
        String[][] cases = {
            {
                "alloc a 1\nsummary\nfree a\nfree a\n",
                "gpumem sim: line 4: double free of 'a' (allocated on line 1, freed on line 3)"
            },
            {"summary\nfree x\n", "gpumem sim: line 2: free of unknown name 'x'"},
            {"alloc a 3MB\n", "gpumem sim: line 1: alloc size: bad size '3MB'"},
            {"stats\nalloc a -4\n", "gpumem sim: line 2: alloc size: bad size '-4'"},
            {
                "stats\nconfig max_split_size_mb:10\n",
                "gpumem sim: line 2: bad config: CachingAllocator option max_split_size_mb too small, must be > 20"
            },
            {
                "config expandable_segments:true\n",
                "gpumem sim: line 1: bad config: Expected a single True/False argument for expandable_segments"
            },
            {"stats\nmalloc a 1\n", "gpumem sim: line 2: unknown op 'malloc'"},
            {"alloc a\n", "gpumem sim: line 1: usage: alloc NAME SIZE [stream=N]"},
            {"set_fraction 2\n", "gpumem sim: line 1: Invalid fraction value: 2. Allowed range: 0~1"},
            // devices that used to parse, then fail part way through a run (exit 1, after output)
            {
                "# 4 MiB granules\ndevice capacity=1GiB granularity=4MiB\nstats\n",
                "gpumem sim: line 2: device cannot hold expandable segments: expandable page size 2097152 is not a"
                        + " multiple of the device granularity 4194304"
            },
            {
                "device capacity=4096TiB\nconfig expandable_segments:True\nstats\nalloc a 1\n",
                "gpumem sim: line 1: device cannot hold expandable segments: cannot size an expandable segment for"
                        + " 4503599627370496 bytes"
            },
            // every request would fail here, and compare and analyze could not size a device
            {
                "device capacity=64MiB held=64MiB\nalloc a 1\nstats\n",
                "gpumem sim: line 1: device held=67108864 leaves no memory: it must be less than capacity=67108864"
            },
        };
        for (String[] c : cases) {
            CliRun r = run(c[0], "sim");
            assertThat(r.exit()).as(c[0]).isEqualTo(2);
            assertThat(r.out()).as(c[0]).isEmpty();
            assertThat(r.err()).as(c[0]).startsWith(c[1]).endsWith("\n");
            assertThat(r.err().lines().count()).as(c[0]).isEqualTo(1);
        }
    }

    @Test
    void aSnapshotLineThatCannotBeWrittenIsRefusedBeforeAnythingRuns(@TempDir Path dir) throws Exception {
        Path missing = dir.resolve("no/such/s.pickle");
        CliRun r = run("alloc a 1\nsummary\nsnapshot " + missing + "\n", "sim");
        assertThat(r.exit()).isEqualTo(2);
        assertThat(r.out()).isEmpty();
        assertThat(r.err())
                .isEqualTo("gpumem sim: line 3: snapshot " + missing + ": the directory " + missing.getParent()
                        + " does not exist\n");
        CliRun intoDir = run("alloc a 1\nsnapshot " + dir + "\n", "sim");
        assertThat(intoDir.exit()).isEqualTo(2);
        assertThat(intoDir.err()).isEqualTo("gpumem sim: line 2: snapshot " + dir + ": is a directory; name a file\n");
        Path script = dir.resolve("s.ops");
        String text = "alloc a 1\nsnapshot " + script + "\n";
        Files.writeString(script, text);
        CliRun overItself = run("", "sim", script.toString());
        assertThat(overItself.exit()).isEqualTo(2);
        assertThat(overItself.err()).startsWith("gpumem sim: line 2: snapshot " + script + ": is the input file");
        assertThat(Files.readString(script)).isEqualTo(text);
    }

    @Test
    void missingFileIsExitTwo(@TempDir Path dir) {
        Path missing = dir.resolve("nope.ops");
        CliRun r = run("", "sim", missing.toString());
        assertThat(r.exit()).isEqualTo(2);
        assertThat(r.err()).isEqualTo("gpumem sim: " + missing + ": no such file\n");
    }

    @Test
    void unknownOptionIsExitTwo() {
        CliRun r = run("", "sim", "--frobnicate");
        assertThat(r.exit()).isEqualTo(2);
        assertThat(r.err()).contains("--frobnicate");
    }

    @Test
    void emptyScriptPrintsNothing() {
        CliRun r = run("# nothing\n", "sim");
        assertThat(r.exit()).isZero();
        assertThat(r.out()).isEmpty();
        assertThat(r.err()).isEmpty();
    }

    @Test
    void cudaRunsTheWorkedExampleOnTheFakeDriverWithTheSameTable() {
        assumeTrue(Files.isRegularFile(FAKE_CUDA), "fake CUDA driver not built (build gpumem-cuda's tests first)");
        CliRun r = run(
                "alloc a 1000\nalloc b 3MiB\nalloc c 25000000\nfree b\nfree a\nsummary\n",
                "sim",
                "--device",
                "cuda",
                "--cuda-library",
                FAKE_CUDA.toString());
        assertThat(r.err()).isEmpty();
        assertThat(r.exit()).isZero();
        assertThat(r.out()).isEqualTo(SECTION_8_3);
    }

    @Test
    void cudaMapsScriptStreamsAndRunsExpandableSegmentsOnTheFakeDriver() {
        assumeTrue(Files.isRegularFile(FAKE_CUDA), "fake CUDA driver not built (build gpumem-cuda's tests first)");
        CliRun r = run("""
                config expandable_segments:True
                alloc a 3MiB stream=7
                alloc b 30MiB stream=7
                record_stream a 9
                free a
                free b
                complete_events
                empty_cache
                stats
                """, "sim", "--device", "cuda", "--cuda-library", FAKE_CUDA.toString());
        assertThat(r.err()).isEmpty();
        assertThat(r.exit()).isZero();
        assertThat(parseStats(r.out()))
                .containsEntry("reserved_bytes.all.current", 0L)
                .containsEntry("num_device_alloc", 2L)
                .containsEntry("num_device_free", 1L)
                .containsEntry("active_bytes.all.current", 0L);
    }

    @Test
    void cudaOomUsesTheDriversCapacity() {
        assumeTrue(Files.isRegularFile(FAKE_CUDA), "fake CUDA driver not built (build gpumem-cuda's tests first)");
        CliRun r = run("alloc big 9GiB\nstats\n", "sim", "--device", "cuda", "--cuda-library", FAKE_CUDA.toString());
        assertThat(r.exit()).isZero();
        assertThat(r.err())
                .startsWith("gpumem sim: line 1: alloc big: CUDA out of memory. Tried to allocate 9.00 GiB."
                        + " GPU 0 has a total capacity of 8.00 GiB of which ");
        assertThat(parseStats(r.out())).containsEntry("num_ooms", 1L);
    }

    /**
     * Each run ends holding 3 GiB of the fake driver's 8 GiB (its allocation is never freed) and releases its primary
     * context: the driver frees a context's memory on its last release, so the third run in this JVM still finds room
     * where a driver that kept it would fail with out-of-memory (stop 53's fix, seen here through the CLI).
     */
    @Test
    void cudaRunsInOneProcessGetTheMemoryEarlierRunsLeftAllocated() {
        assumeTrue(Files.isRegularFile(FAKE_CUDA), "fake CUDA driver not built (build gpumem-cuda's tests first)");
        for (int run = 0; run < 4; run++) {
            CliRun r = run("alloc kept 3GiB\n", "sim", "--device", "cuda", "--cuda-library", FAKE_CUDA.toString());
            assertThat(r.err()).as("run %d", run).isEmpty();
            assertThat(r.exit()).as("run %d", run).isZero();
        }
    }

    @Test
    void cudaRefusesADeviceLine() {
        CliRun r = run("alloc a 1\ndevice capacity=1GiB\n", "sim", "--device", "cuda");
        assertThat(r.exit()).isEqualTo(2);
        assertThat(r.err()).startsWith("gpumem sim: line 2: device must come before any allocator op");
        CliRun first = run(
                "device capacity=1GiB\nalloc a 1\n",
                "sim",
                "--device",
                "cuda",
                "--cuda-library",
                "/nonexistent/libcuda.so.1");
        assertThat(first.exit()).isEqualTo(2);
        assertThat(first.err())
                .isEqualTo("gpumem sim: line 1: a device line describes the simulated device;"
                        + " remove it to run on --device cuda\n");
        assertThat(first.out()).isEmpty();
    }

    @Test
    void cudaWithoutADriverExitsTwoLikeTheDeviceCommandAndRunsNothing() {
        CliRun r = run("alloc a 1\nstats\n", "sim", "--device", "cuda", "--cuda-library", "/nonexistent/libcuda.so.1");
        assertThat(r.exit()).isEqualTo(2);
        assertThat(r.out()).isEmpty();
        assertThat(r.err())
                .startsWith("gpumem sim: --device cuda: no usable CUDA driver")
                .contains("/nonexistent");
    }

    @Test
    void aZeroByteAllocationTakesNoMemoryAndChangesNoCounterLikePyTorch() {
        CliRun zero = run("alloc a 0\nrecord_stream a 3\nstats\nfree a\nstats\n", "sim");
        assertThat(zero.exit()).isZero();
        assertThat(zero.err()).isEmpty();
        CliRun none = run("stats\nstats\n", "sim");
        assertThat(zero.out()).isEqualTo(none.out());
        assertThat(parseStats(zero.out()))
                .containsEntry("allocation.all.allocated", 0L)
                .containsEntry("reserved_bytes.all.current", 0L);
    }

    @Test
    void bytesThatAreNotUtf8AreReportedWithTheirLine(@TempDir Path dir) throws Exception {
        Path script = dir.resolve("bin.ops");
        Files.write(
                script, new byte[] {'a', 'l', 'l', 'o', 'c', ' ', 'a', ' ', '1', '\n', 's', 't', (byte) 0xff, 0, 1});
        CliRun r = run("", "sim", script.toString());
        assertThat(r.exit()).isEqualTo(2);
        assertThat(r.out()).isEmpty();
        assertThat(r.err().strip()).isEqualTo("gpumem sim: line 2: not UTF-8 text (byte 0xff at column 3)");
    }

    @Test
    void aDeviceOf3000TibWithExpandableSegmentsCostsMemoryForTheBlocksInUseOnly() {
        // The reservation of an expandable segment is 1.125 x capacity: 1.7 billion 2 MiB pages here. Memory must
        // follow the pages mapped, not the pages reserved (a per-page table used to need 13 GB).
        var threads = (com.sun.management.ThreadMXBean) java.lang.management.ManagementFactory.getThreadMXBean();
        long before = threads.getCurrentThreadAllocatedBytes();
        CliRun r = run("""
                device capacity=3000TiB
                config expandable_segments:True
                alloc small 1KiB
                alloc a 30MiB
                alloc b 5GiB
                free a
                empty_cache
                stats
                """, "sim");
        long allocated = threads.getCurrentThreadAllocatedBytes() - before;
        assertThat(r.exit()).as(r.err()).isZero();
        assertThat(parseStats(r.out())).containsEntry("allocated_bytes.all.current", 5L * 1024 * 1024 * 1024 + 1024);
        assertThat(allocated).as("bytes allocated by the run").isLessThan(64L << 20);
    }
}
