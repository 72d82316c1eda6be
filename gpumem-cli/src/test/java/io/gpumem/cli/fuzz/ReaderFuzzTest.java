package io.gpumem.cli.fuzz;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.cli.CliRun;
import io.gpumem.cli.GpumemCli;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.config.ConfigException;
import io.gpumem.script.OpsScript;
import io.gpumem.script.ScriptException;
import io.gpumem.trace.io.PytorchSnapshotReader;
import io.gpumem.trace.io.TraceFormatException;
import io.gpumem.trace.io.TraceReaders;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/**
 * Fuzzes every reader and parser a user's file or command line reaches (issue 12): PyTorch snapshot pickles, RMM
 * logs, lifetime CSVs, ops scripts, {@code PYTORCH_CUDA_ALLOC_CONF} strings and the CLI options. Each input is a
 * seeded mutation ({@link Mutator}) of an input of the reader's corpus ({@link #corpus}) or of a shared trace (read
 * from {@code ../shared/traces}, never copied), and must either load or fail with the project's own error type for
 * that reader ({@link #check}), allocating no more than {@link #ALLOWED_BYTES_PER_INPUT_BYTE} bytes per input byte
 * plus {@link #ALLOWED_BASE_BYTES}. {@link ReaderCoverageFuzzTest} holds the same readers to the same check under
 * Jazzer's coverage-guided fuzzing, and shares these corpora with this test.
 *
 * <p>Runs in its own surefire execution under {@code -Xmx256m} (tag {@code fuzz}). The seed is printed and can be
 * set with {@code -Dgpumem.fuzz.seed=N}; {@code -Dgpumem.fuzz.scale=K} multiplies the input counts. An input that
 * fails is written to {@code target/fuzz-crashes}; keep it in the reader's corpus directory (see {@link #corpus}),
 * where {@link ReaderCoverageFuzzTest} replays it in every run.
 */
@Tag("fuzz")
class ReaderFuzzTest {

    static final long SEED = Long.getLong("gpumem.fuzz.seed", System.nanoTime());
    static final int SCALE = Integer.getInteger("gpumem.fuzz.scale", 1);
    static final long ALLOWED_BYTES_PER_INPUT_BYTE = 2_000;
    static final long ALLOWED_BASE_BYTES = 32L << 20;
    private static final AtomicLong TOTAL = new AtomicLong();
    private static final AtomicLong REJECTED = new AtomicLong();
    private static final long STARTED = System.nanoTime();

    private static final com.sun.management.ThreadMXBean THREADS =
            (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();

    @AfterAll
    static void printTotals() {
        System.out.printf(
                "fuzz: %,d inputs (%,d rejected with the reader's own error) in %.1f s, seed %d%n",
                TOTAL.get(), REJECTED.get(), (System.nanoTime() - STARTED) / 1e9, SEED);
    }

    /** What one reader must do with one input. */
    interface Reader {
        void read(byte[] input, Path scratch) throws Exception;
    }

    /**
     * Every input of one reader's corpus, in file-name order: {@code src/test/resources/io/gpumem/cli/fuzz/
     * ReaderCoverageFuzzTestInputs/KIND/} (KIND: pickle, rmm, lifetime, ops, conf), where Jazzer looks for the inputs
     * of {@link ReaderCoverageFuzzTest}'s method KIND. Small inputs of our own, and every input a fuzz run found.
     */
    static List<byte[]> corpus(String kind) throws IOException, URISyntaxException {
        var url = ReaderFuzzTest.class.getResource("ReaderCoverageFuzzTestInputs/" + kind);
        assertThat(url).as("corpus " + kind).isNotNull();
        List<byte[]> inputs = new ArrayList<>();
        try (Stream<Path> files = Files.list(Path.of(url.toURI()))) {
            for (Path f : files.filter(Files::isRegularFile).sorted().toList()) {
                inputs.add(Files.readAllBytes(f));
            }
        }
        assertThat(inputs).as("corpus " + kind).isNotEmpty();
        return inputs;
    }

    private static Path sharedTrace(String name) {
        String d = System.getProperty("gpumem.traces.dir");
        Path p = d == null ? null : Path.of(d, name);
        return p != null && Files.isRegularFile(p) ? p : null;
    }

    /** Runs one input; an exception other than the expected type, or too much allocation, fails the test. */
    static void check(String kind, byte[] input, Class<? extends Throwable> expected, Reader reader, Path scratch) {
        long before = THREADS.getCurrentThreadAllocatedBytes();
        Throwable failure = null;
        try {
            reader.read(input, scratch);
        } catch (Throwable t) {
            failure = t;
        }
        long allocated = THREADS.getCurrentThreadAllocatedBytes() - before;
        TOTAL.incrementAndGet();
        boolean rejectedForRecursion = false;
        if (failure != null && expected.isInstance(failure) && !(failure.getCause() instanceof OutOfMemoryError)) {
            REJECTED.incrementAndGet();
            // Refused at the recursion limit (a dict used as a key of itself, say): the StackOverflowError's
            // trace costs memory bounded by the thread's stack size, not by the input, and none of it is kept.
            rejectedForRecursion = failure.getMessage().contains("nested in themselves");
            failure = null;
        }
        long allowed = ALLOWED_BASE_BYTES + ALLOWED_BYTES_PER_INPUT_BYTE * input.length;
        if (failure == null && allocated > allowed && !rejectedForRecursion) {
            // The first input to reach a code path loads its classes in this thread, and under Jazzer's agent
            // instruments them too: tens of MiB that no input causes. Runaway allocation repeats; that does not.
            allocated = allocationOf(input, reader, scratch);
        }
        if (failure == null && (allocated <= allowed || rejectedForRecursion)) {
            return;
        }
        Path saved = save(kind, input);
        if (failure != null) {
            throw new AssertionError(
                    kind + " input (saved to " + saved + ", seed " + SEED + ") escaped as " + failure, failure);
        }
        throw new AssertionError(kind + " input of " + input.length + " bytes (saved to " + saved + ", seed " + SEED
                + ") allocated " + allocated + " bytes, over the bound of " + allowed);
    }

    /** The bytes one more read of an input allocates in this thread, whatever way the read ends. */
    private static long allocationOf(byte[] input, Reader reader, Path scratch) {
        long before = THREADS.getCurrentThreadAllocatedBytes();
        try {
            reader.read(input, scratch);
        } catch (Throwable t) {
            // its outcome was judged on the first read; only the allocation is measured again
        }
        return THREADS.getCurrentThreadAllocatedBytes() - before;
    }

    private static Path save(String kind, byte[] input) {
        try {
            Path dir = Path.of("target", "fuzz-crashes", kind);
            Files.createDirectories(dir);
            Path f = dir.resolve(Integer.toHexString(java.util.Arrays.hashCode(input)));
            Files.write(f, input);
            return f.toAbsolutePath();
        } catch (IOException e) {
            return null;
        }
    }

    static final Reader PICKLE =
            (in, scratch) -> new PytorchSnapshotReader().read(new ByteArrayInputStream(in), "fuzz.pickle");
    static final Reader ANY_FILE = (in, scratch) -> {
        Files.write(scratch, in);
        TraceReaders.read(scratch);
    };
    static final Reader OPS = (in, scratch) -> OpsScript.parse(new ByteArrayInputStream(in));
    static final Reader CONF = (in, scratch) -> AllocatorConfig.parse(new String(in, StandardCharsets.UTF_8));

    private static void fuzz(
            String kind,
            List<byte[]> seeds,
            int count,
            Class<? extends Throwable> expected,
            Reader reader,
            Path scratch,
            boolean text,
            String separators) {
        SplittableRandom rnd = new SplittableRandom(SEED ^ kind.hashCode());
        Mutator m = new Mutator(rnd);
        for (byte[] s : seeds) {
            check(kind, s, expected, reader, scratch); // every seed itself loads or is rejected cleanly
        }
        for (int i = 0; i < count * SCALE; i++) {
            byte[] seed = seeds.get(rnd.nextInt(seeds.size()));
            byte[] input = text
                    ? m.text(new String(seed, StandardCharsets.UTF_8), separators)
                            .getBytes(StandardCharsets.ISO_8859_1)
                    : m.bytes(seed, seeds.get(rnd.nextInt(seeds.size())));
            check(kind, input, expected, reader, scratch);
        }
    }

    @Test
    void pickles() throws Exception {
        fuzz("pickle", corpus("pickle"), 60_000, TraceFormatException.class, PICKLE, null, false, "");
    }

    @Test
    void sharedTracePickles() throws Exception {
        List<byte[]> seeds = new ArrayList<>();
        for (String s : new String[] {"tiny-forward.pickle", "opt1.3b-state-only.pickle"}) {
            Path p = sharedTrace(s);
            if (p != null) {
                seeds.add(Files.readAllBytes(p));
            }
        }
        if (seeds.isEmpty()) {
            System.out.println("fuzz: shared traces not available (gpumem.traces.dir); only our own seeds are used");
            return;
        }
        fuzz("pickle", seeds, 600, TraceFormatException.class, PICKLE, null, false, "");
    }

    @Test
    void csvLogsAndScriptFiles(@TempDir Path dir) throws Exception {
        Path scratch = dir.resolve("input");
        fuzz("rmm", corpus("rmm"), 12_000, TraceFormatException.class, ANY_FILE, scratch, true, ",");
        List<byte[]> lifetimes = new ArrayList<>(corpus("lifetime"));
        Path pangu = sharedTrace("pangu13b-lifetimes.csv");
        if (pangu != null) {
            try (Stream<String> lines = Files.lines(pangu)) {
                lifetimes.add((String.join("\n", lines.limit(40).toList()) + "\n").getBytes(StandardCharsets.UTF_8));
            }
        }
        fuzz("lifetime", lifetimes, 12_000, TraceFormatException.class, ANY_FILE, scratch, true, ",");
        fuzz("ops-file", corpus("ops"), 3_000, TraceFormatException.class, ANY_FILE, scratch, true, " =");
    }

    @Test
    void opsScripts() throws Exception {
        fuzz("ops", corpus("ops"), 20_000, ScriptException.class, OPS, null, true, " =");
    }

    @Test
    void allocatorConfStrings() throws Exception {
        fuzz("conf", corpus("conf"), 20_000, ConfigException.class, CONF, null, true, ",:[]");
    }

    /** Option values: parsed, and for the commands that check them before reading their file, executed. */
    @Test
    void cliOptions() {
        String[][] seeds = {
            {"replay", "--capacity", "80GiB", "--max-file-size", "10MiB", "--max-entries", "100", "missing.pickle"},
            {"compare", "--capacity", "24GiB", "--trace-device", "0", "-c", "expandable_segments:True", "missing.pickle"
            },
            {"analyze", "--capacity", "24GiB", "--top", "3", "--at", "5", "--trace-device", "0", "missing.pickle"},
            {"demo", "--steps", "3", "--layers", "2", "--hidden", "64", "--heads", "4", "--capacity", "1GiB"},
            {"kv-sim", "--requests", "5", "--layers", "2", "--blocks", "64", "--rate", "0.5", "--watermark", "0.1"},
            {"sim", "--device", "sim", "missing.ops"},
        };
        SplittableRandom rnd = new SplittableRandom(SEED ^ 0xc11);
        Mutator m = new Mutator(rnd);
        for (int i = 0; i < 3_000 * SCALE; i++) {
            String[] args = seeds[rnd.nextInt(seeds.length)].clone();
            int edits = 1 + rnd.nextInt(3);
            for (int k = 0; k < edits; k++) {
                int at = 1 + rnd.nextInt(args.length - 1);
                args[at] = rnd.nextInt(4) == 0 ? args[rnd.nextInt(args.length)] : m.token();
            }
            TOTAL.incrementAndGet();
            try {
                GpumemCli.commandLine().parseArgs(args);
            } catch (CommandLine.ParameterException e) {
                REJECTED.incrementAndGet();
                continue;
            } catch (RuntimeException e) {
                throw new AssertionError(
                        "options " + String.join(" ", args) + " (seed " + SEED + ") escaped as " + e, e);
            }
            if (args[args.length - 1].startsWith("missing.")) {
                // These commands check their options before the file: a bad value or the missing file, exit 2.
                CliRun r = CliRun.run(args);
                assertThat(r.exit()).as(String.join(" ", args)).isEqualTo(2);
                assertThat(r.err()).as(String.join(" ", args)).doesNotContain("\tat ", "Exception");
            }
        }
    }
}
