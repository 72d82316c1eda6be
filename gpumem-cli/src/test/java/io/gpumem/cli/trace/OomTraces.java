package io.gpumem.cli.trace;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.engine.RunOutcome;
import io.gpumem.trace.io.AllocatorSnapshots;
import io.gpumem.trace.workload.TrainingWorkload;
import io.gpumem.trace.workload.WorkloadWhatIf;
import java.io.IOException;
import java.nio.file.Path;

/** A trace for command tests whose analysis replays: a small generated training job recorded until its OOM. */
public final class OomTraces {

    private OomTraces() {}

    /**
     * Records the job on a device of three quarters of its peak live bytes, with history, and writes the snapshot
     * taken at the OOM to {@code dir/oom.pickle}.
     */
    public static Path record(Path dir) throws IOException {
        TrainingWorkload w = TrainingWorkload.builder()
                .layers(3)
                .hidden(512)
                .heads(4)
                .vocab(4000)
                .batch(4)
                .seqLens(128, 1024, 128)
                .steps(4)
                .seed(7)
                .build();
        RunOutcome run = new WorkloadWhatIf(w, w.peakLiveBytes() * 3 / 4, 0, false).runWithHistory("");
        assertThat(run.completed()).as("the recorded run must hit an OOM").isFalse();
        Path file = dir.resolve("oom.pickle");
        AllocatorSnapshots.write(run.allocator().snapshot(), file);
        return file;
    }
}
