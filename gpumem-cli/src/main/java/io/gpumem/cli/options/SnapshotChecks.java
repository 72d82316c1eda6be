package io.gpumem.cli.options;

import io.gpumem.trace.io.SnapshotConsistency;
import io.gpumem.trace.io.TraceSnapshot;
import java.io.PrintWriter;
import picocli.CommandLine.Option;

/**
 * The {@code --lenient} option of the commands that analyse or replay a snapshot, and the consistency check it
 * relaxes ({@link SnapshotConsistency}): by default an inconsistent snapshot is refused (the command prints
 * {@code gpumem COMMAND: FILE: segments: inconsistent snapshot: segment 0x... on device D ...} and exits 2);
 * with {@code --lenient} each problem is a warning on stderr and the command goes on.
 */
public final class SnapshotChecks {

    @Option(
            names = "--lenient",
            description = "Read a snapshot whose segments are inconsistent (total_size not the"
                    + " sum of its blocks, overlapping segments, blocks outside their segment or in an unknown state)"
                    + " with a warning on stderr for each problem, instead of refusing it with exit status 2.")
    boolean lenient;

    /**
     * Refuses {@code snapshot} when inconsistent and not lenient (throws
     * {@link io.gpumem.trace.io.TraceFormatException}, which the commands report with exit status 2), else warns
     * on {@code err}.
     */
    public void check(TraceSnapshot snapshot, PrintWriter err) {
        SnapshotConsistency.check(snapshot, lenient, err::println);
        err.flush();
    }
}
