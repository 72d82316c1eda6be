package io.gpumem.cli.trace;

import io.gpumem.trace.io.ReadLimits;
import io.gpumem.trace.io.TraceReaders;
import io.gpumem.trace.io.TraceSnapshot;
import java.nio.file.Path;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

/** The trace-file argument and its reading limits, shared by {@code replay} and {@code compare}. */
final class TraceInput {

    @Parameters(index = "0", paramLabel = "FILE",
            description = "Trace file: PyTorch snapshot pickle, RMM log CSV or tensor-lifetime CSV (detected from the content).")
    Path file;

    @Option(names = "--max-file-mib", paramLabel = "N", defaultValue = "1024",
            description = "Refuse files larger than N MiB (default: ${DEFAULT-VALUE}).")
    long maxFileMib;

    @Option(names = "--max-entries", paramLabel = "N", defaultValue = "50000000",
            description = "Refuse files with more than N trace entries or rows (default: ${DEFAULT-VALUE}).")
    long maxEntries;

    TraceSnapshot read() {
        if (maxFileMib <= 0 || maxEntries <= 0) {
            throw new IllegalArgumentException("--max-file-mib and --max-entries must be positive");
        }
        return TraceReaders.read(file, new ReadLimits(maxFileMib << 20, maxEntries));
    }
}
