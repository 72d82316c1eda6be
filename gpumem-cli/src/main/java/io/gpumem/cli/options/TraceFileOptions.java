package io.gpumem.cli.options;

import io.gpumem.cli.SizeConverter;
import io.gpumem.trace.io.ReadLimits;
import io.gpumem.trace.session.TraceSession;
import java.nio.file.Path;
import picocli.CommandLine.Option;
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

    @Option(names = "--max-file-size", paramLabel = "SIZE", defaultValue = "1GiB", converter = SizeConverter.class,
            description = "Refuse files larger than SIZE (default: ${DEFAULT-VALUE}).")
    long maxFileSize;

    @Option(names = "--max-entries", paramLabel = "N", defaultValue = "50000000",
            description = "Refuse files with more than N trace entries or rows (default: ${DEFAULT-VALUE}).")
    long maxEntries;

    /** The file as given. */
    public Path file() {
        return file;
    }

    /**
     * Reads the file into a session.
     *
     * @throws BadInputException when {@code --max-entries} is not positive
     * @throws io.gpumem.trace.io.TraceFormatException naming the file when it is unreadable, malformed or over a limit
     */
    public TraceSession open() {
        if (maxEntries <= 0) {
            throw new BadInputException("--max-entries must be positive");
        }
        return TraceSession.open(file, new ReadLimits(maxFileSize, maxEntries));
    }
}
