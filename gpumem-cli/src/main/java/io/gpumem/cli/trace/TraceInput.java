package io.gpumem.cli.trace;

import io.gpumem.cli.SizeConverter;
import io.gpumem.cli.options.SnapshotChecks;
import io.gpumem.trace.io.ReadLimits;
import io.gpumem.trace.io.TraceFormatException;
import io.gpumem.trace.io.TraceReaders;
import io.gpumem.trace.io.TraceSnapshot;
import java.io.PrintWriter;
import java.nio.file.Path;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

/**
 * The trace-file argument, its reading limits and {@code --lenient}, shared by {@code replay} and {@code compare}, and how both
 * report input they cannot read.
 */
final class TraceInput {

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

    @Mixin
    SnapshotChecks checks;

    /**
     * Reads the file, or reports why it cannot: on unreadable, malformed or inconsistent input (unless
     * {@code --lenient}, which warns on {@code err} instead), or limits that are not positive, prints {@code gpumem COMMAND: reason} (the reason names the file and the entry) to {@code err}
     * and returns {@code null}; the caller then exits with status 2.
     */
    TraceSnapshot readOrReport(String command, PrintWriter err) {
        try {
            TraceSnapshot snapshot = read();
            checks.check(snapshot, err);
            return snapshot;
        } catch (TraceFormatException | IllegalArgumentException e) {
            err.println("gpumem " + command + ": " + e.getMessage());
            return null;
        }
    }

    TraceSnapshot read() {
        if (maxEntries <= 0) {
            throw new IllegalArgumentException("--max-entries must be positive");
        }
        return TraceReaders.read(file, new ReadLimits(maxFileSize, maxEntries));
    }
}
