package io.gpumem.cli.options;

import io.gpumem.cli.trace.TerminalProgress;
import io.gpumem.engine.AllocatorWarmUp;
import io.gpumem.trace.io.TraceFormatException;
import io.gpumem.trace.session.TraceSession;
import java.io.PrintWriter;
import java.nio.file.Path;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Parameters;

/**
 * The trace-file argument, its reading limits and {@code --lenient}, the same for every command that reads a trace
 * ({@code replay}, {@code compare}, {@code analyze}, {@code report}): a mapping of the options onto
 * {@link TraceSession#open} and the snapshot consistency check ({@link SnapshotChecks}).
 */
public final class TraceFileOptions {

    @Parameters(
            index = "0",
            paramLabel = "FILE",
            description =
                    "Trace file: PyTorch snapshot pickle, RMM log CSV, tensor-lifetime CSV or gpumem sim ops script"
                            + " (detected from the content).")
    Path file;

    @Mixin
    ReadLimitOptions limits;

    @Mixin
    SnapshotChecks checks;

    /** The file as given. */
    public Path file() {
        return file;
    }

    /**
     * Reads the file into a session and checks its consistency (under {@code --lenient}, each problem is a
     * warning on {@code err} instead).
     *
     * @throws BadInputException    when {@code --max-entries} is not positive
     * @throws TraceFormatException naming the file (and the entry, or the segment and device) when it is
     *                              unreadable, malformed, over a limit or inconsistent
     */
    public TraceSession open(PrintWriter err) {
        return open(err, false);
    }

    /**
     * {@link #open(PrintWriter)} for a command that runs what-ifs on the trace ({@code compare}, {@code analyze},
     * {@code report}): a large file's read also warms the allocator's JIT profiles up ({@link AllocatorWarmUp}) on
     * the core the reading leaves idle.
     */
    public TraceSession openForWhatIfs(PrintWriter err) {
        return open(err, true);
    }

    private TraceSession open(PrintWriter err, boolean whatIfs) {
        if (whatIfs) {
            AllocatorWarmUp.startFor(file.toFile().length());
        }
        TraceSession session = TraceSession.open(
                file, limits.limits(), TerminalProgress.forTerminal("reading " + file.getFileName(), "bytes"));
        checks.check(session.trace(), err);
        return session;
    }
}
