package io.gpumem.cli;

import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.io.PytorchSnapshotWriter;
import io.gpumem.trace.io.SourceFormat;
import io.gpumem.trace.io.TraceSnapshot;
import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

/** Small PyTorch snapshots the command tests write with the project's own writer: a state and one device's trace. */
public final class SnapshotFiles {
    private SnapshotFiles() {}

    /** {@code segments} and device 0's {@code trace} written as {@code dir/name}, with addresses recorded. */
    public static Path write(Path dir, String name, List<SegmentInfo> segments, List<TraceEntry> trace)
            throws IOException {
        Path file = dir.resolve(name);
        new PytorchSnapshotWriter()
                .write(
                        new TraceSnapshot(
                                name,
                                SourceFormat.PYTORCH_SNAPSHOT,
                                segments,
                                List.of(trace),
                                null,
                                null,
                                Map.of(),
                                true),
                        file);
        return file;
    }
}
