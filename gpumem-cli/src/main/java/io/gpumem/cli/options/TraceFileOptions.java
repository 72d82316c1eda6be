package io.gpumem.cli.options;

import io.gpumem.trace.io.TraceFormatException;
import io.gpumem.trace.session.TraceSession;
import java.nio.file.Path;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Parameters;

/**
 * The trace-file argument and its reading limits, the same for every command that reads a trace ({@code replay},
 * {@code compare}, {@code analyze}, {@code report}): a mapping of the options onto {@link TraceSession#open}.
 */
public final class TraceFileOptions {

    @Parameters(index = "0", paramLabel = "FILE",
            description = "Trace file: PyTorch snapshot pickle, RMM log CSV, tensor-lifetime CSV or gpumem sim ops script"
                    + " (detected from the content).")
    Path file;

    @Mixin
    ReadLimitOptions limits;

    /** The file as given. */
    public Path file() {
        return file;
    }

    /**
     * Reads the file into a session.
     *
     * @throws BadInputException    when {@code --max-entries} is not positive
     * @throws TraceFormatException naming the file when it is unreadable, malformed or over a limit
     */
    public TraceSession open() {
        return TraceSession.open(file, limits.limits());
    }
}
