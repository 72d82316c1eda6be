package io.gpumem.trace.replay;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.trace.io.PytorchSnapshotReader;
import io.gpumem.trace.io.TraceSnapshot;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/**
 * The snapshot that ships in {@code examples/} (written by {@code gpumem demo}, see examples/README.md) is what
 * the README's commands run on a fresh clone, so it must stay readable and replay exactly. Unlike the shared
 * traces it is always present, so this runs on every build.
 */
class ExampleSnapshotTest {

    @Test
    void theShippedExampleReplaysExactly() {
        Path file = Path.of("").toAbsolutePath().resolveSibling("examples").resolve("demo-small.pickle");
        assertThat(file).as("examples/demo-small.pickle next to the modules").isRegularFile();

        TraceSnapshot s = new PytorchSnapshotReader().read(file);
        FidelityReport r = new OracleReplay().check(s);

        assertThat(r.allocs()).as("allocations in the example").isPositive();
        assertThat(r.firstMismatch()).isNull();
        assertThat(r.exact()).isEqualTo(r.allocs());
        assertThat(r.segmentMatched()).isEqualTo(r.segmentEvents());
        for (DeviceFidelity d : r.devices()) {
            assertThat(d.endSegmentsSame())
                    .as("device " + d.device() + " end state")
                    .isEqualTo(d.endSegments());
        }
    }
}
