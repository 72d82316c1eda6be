package io.gpumem.cli.fuzz;

import com.code_intelligence.jazzer.junit.FuzzTest;
import io.gpumem.config.ConfigException;
import io.gpumem.script.ScriptException;
import io.gpumem.trace.io.TraceFormatException;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Tag;

/**
 * Coverage-guided fuzzing (Jazzer) of the readers a user's input reaches, each held to {@link ReaderFuzzTest}'s
 * contract ({@link ReaderFuzzTest#check}): the input loads, or fails with that reader's own error type, and allocates
 * within a bound proportional to its size; any other exception, a {@code StackOverflowError} or an
 * {@code OutOfMemoryError} is a finding. Where {@link ReaderFuzzTest}'s random mutations reach only what a few byte
 * flips of a seed reach, Jazzer keeps the inputs that cover new branches and mutates those further.
 *
 * <p>In an ordinary test run (tag {@code fuzz}, gpumem-cli's {@code fuzz} execution) each method only replays its
 * corpus, {@code src/test/resources/io/gpumem/cli/fuzz/ReaderCoverageFuzzTestInputs/METHOD/}: our seeds and every
 * input a campaign found. With {@code JAZZER_FUZZ=1} the one method selected fuzzes for {@code JAZZER_MAX_DURATION}
 * and writes what it finds into that directory (docs/testing.md, "Coverage-guided fuzzing").
 */
@Tag("fuzz")
class ReaderCoverageFuzzTest {

    /** The file the two CSV targets write each input to: TraceReaders reads files, as the CLI does. */
    private static final Path SCRATCH = scratchFile();

    private static Path scratchFile() {
        try {
            Path f = Files.createTempFile("gpumem-jazzer", ".input");
            f.toFile().deleteOnExit();
            return f;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** A PyTorch memory snapshot pickle, as {@code gpumem replay} reads it. */
    @FuzzTest
    void pickle(byte[] input) {
        ReaderFuzzTest.check("pickle", input, TraceFormatException.class, ReaderFuzzTest.PICKLE, SCRATCH);
    }

    /** A {@code PYTORCH_CUDA_ALLOC_CONF} string, as {@code -c} and the environment variable give it. */
    @FuzzTest
    void conf(byte[] input) {
        ReaderFuzzTest.check("conf", input, ConfigException.class, ReaderFuzzTest.CONF, SCRATCH);
    }

    /** A {@code gpumem sim} ops script. */
    @FuzzTest
    void ops(byte[] input) {
        ReaderFuzzTest.check("ops", input, ScriptException.class, ReaderFuzzTest.OPS, SCRATCH);
    }

    /** An RMM allocation log, through TraceReaders' format detection. */
    @FuzzTest
    void rmm(byte[] input) {
        ReaderFuzzTest.check("rmm", input, TraceFormatException.class, ReaderFuzzTest.ANY_FILE, SCRATCH);
    }

    /** A lifetime CSV, through TraceReaders' format detection. */
    @FuzzTest
    void lifetime(byte[] input) {
        ReaderFuzzTest.check("lifetime", input, TraceFormatException.class, ReaderFuzzTest.ANY_FILE, SCRATCH);
    }
}
