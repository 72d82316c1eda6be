package io.gpumem.cli.trace;

import static io.gpumem.testing.TestSizes.MiB;
import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.alloc.Pool;
import io.gpumem.cli.CliRun;
import io.gpumem.cli.SnapshotFiles;
import io.gpumem.history.BlockInfo;
import io.gpumem.history.BlockState;
import io.gpumem.history.PoolId;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.io.PytorchSnapshotWriter;
import io.gpumem.trace.io.SourceFormat;
import io.gpumem.trace.io.TraceSnapshot;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The trace commands refuse an inconsistent snapshot with exit status 2 and a message naming the segment (or warn
 * under {@code --lenient}), and {@code replay --check} exits 1 when the end state differs from the recording. The
 * pickles are written by the project's own writer.
 */
class SnapshotConsistencyCommandsTest {

    private static final long BASE = 0x7f0000000000L;

    private static Path write(Path dir, String name, List<SegmentInfo> segments, List<TraceEntry> trace)
            throws Exception {
        return SnapshotFiles.write(dir, name, segments, trace);
    }

    private static SegmentInfo segment(long totalSize, BlockInfo block) {
        return new SegmentInfo(
                0, BASE, totalSize, 0, 0, 0, 0, Pool.LARGE, false, List.of(), List.of(block), PoolId.DEFAULT, null);
    }

    @Test
    void analyzeRefusesACapacityOneDeviceExceedsBeforePrintingAnyDevice(@TempDir Path dir) throws Exception {
        Path file = dir.resolve("two-devices.pickle");
        long small = 20L << 20;
        long large = 200L << 20;
        List<SegmentInfo> segments = List.of(
                SegmentInfo.ofBlocks(
                        0,
                        BASE,
                        0,
                        Pool.LARGE,
                        false,
                        List.of(BlockInfo.of(BASE, small, small, BlockState.ACTIVE_ALLOCATED))),
                SegmentInfo.ofBlocks(
                        1,
                        BASE + (1L << 30),
                        0,
                        Pool.LARGE,
                        false,
                        List.of(BlockInfo.of(BASE + (1L << 30), large, large, BlockState.ACTIVE_ALLOCATED))));
        new PytorchSnapshotWriter()
                .write(
                        new TraceSnapshot(
                                "two-devices",
                                SourceFormat.PYTORCH_SNAPSHOT,
                                segments,
                                List.of(List.of(), List.of()),
                                null,
                                null,
                                Map.of(),
                                true),
                        file);
        CliRun both = CliRun.run("analyze", "--no-compare", "--capacity", "1GiB", file.toString());
        assertThat(both.exit()).as(both.err()).isZero();
        assertThat(both.out()).contains("device 0").contains("device 1");
        CliRun refused = CliRun.run("analyze", "--no-compare", "--capacity", "100MiB", file.toString());
        assertThat(refused.exit()).isEqualTo(2);
        assertThat(refused.err()).contains("is less than the 200.00 MiB device 1 of " + file + " has reserved");
        assertThat(refused.out())
                .as("device 0's analysis is not printed before device 1 is refused")
                .isEmpty();
    }

    @Test
    void aSegmentDeclaringTwoToTheSixtySecondBytesOverBlocksOf512MiBExitsTwoNamingIt(@TempDir Path dir)
            throws Exception {
        Path file = write(
                dir,
                "inconsistent.pickle",
                List.of(segment(1L << 62, BlockInfo.of(BASE, 512 * MiB, 512 * MiB, BlockState.ACTIVE_ALLOCATED))),
                List.of());
        String named = file + ": segments: inconsistent snapshot: segment 0x7f0000000000 on device 0 declares"
                + " total_size 4611686018427387904 (4294967296.00 GiB) but its 1 block(s) add up to 536870912"
                + " (512.00 MiB)";
        for (String command : List.of("analyze", "replay", "compare", "report")) {
            CliRun r = CliRun.run(command, file.toString());
            assertThat(r.exit()).as(command + ": " + r.out() + r.err()).isEqualTo(2);
            assertThat(r.err().strip()).as(command).isEqualTo("gpumem " + command + ": " + named);
        }
        CliRun lenient = CliRun.run("analyze", "--lenient", "--no-compare", file.toString());
        assertThat(lenient.exit()).as(lenient.out() + lenient.err()).isZero();
        assertThat(lenient.err())
                .startsWith("warning: " + file + ": inconsistent snapshot: segment 0x7f0000000000"
                        + " on device 0 declares total_size 4611686018427387904");
    }

    /** diff reads two recordings' windows from their end states: it refuses an inconsistent one as the others do. */
    @Test
    void diffRefusesAnInconsistentRecordingUnlessLenient(@TempDir Path dir) throws Exception {
        Path file = write(
                dir,
                "inconsistent.pickle",
                List.of(segment(40 * MiB, BlockInfo.of(BASE, 20 * MiB, 20 * MiB, BlockState.ACTIVE_ALLOCATED))),
                List.of(TraceEntry.of(TraceAction.ALLOC, BASE, 20 * MiB, 0)));
        CliRun refused = CliRun.run("diff", file.toString(), file.toString());
        assertThat(refused.exit()).as(refused.out() + refused.err()).isEqualTo(2);
        assertThat(refused.err().strip())
                .isEqualTo("gpumem diff: " + file + ": segments: inconsistent snapshot: segment 0x7f0000000000 on"
                        + " device 0 declares total_size 41943040 (40.00 MiB) but its 1 block(s) add up to 20971520"
                        + " (20.00 MiB)");
        assertThat(refused.out()).isEmpty();
        CliRun lenient = CliRun.run("diff", "--lenient", file.toString(), file.toString());
        assertThat(lenient.exit()).as(lenient.out() + lenient.err()).isZero();
        assertThat(lenient.err()).startsWith("warning: " + file + ": inconsistent snapshot: segment 0x7f0000000000");
    }

    /**
     * predict rebuilds each recording's window start from its end state as diff does: it refuses an inconsistent
     * recording the same way, and goes on with a warning under --lenient.
     */
    @Test
    void predictRefusesAnInconsistentRecordingUnlessLenient(@TempDir Path dir) throws Exception {
        Path file = write(
                dir,
                "inconsistent.pickle",
                List.of(segment(40 * MiB, BlockInfo.of(BASE, 20 * MiB, 20 * MiB, BlockState.ACTIVE_ALLOCATED))),
                List.of(TraceEntry.of(TraceAction.ALLOC, BASE, 20 * MiB, 0)));
        CliRun refused = CliRun.run("predict", file + "@1", file + "@2", "--at", "3");
        assertThat(refused.exit()).as(refused.out() + refused.err()).isEqualTo(2);
        assertThat(refused.err().strip())
                .isEqualTo("gpumem predict: " + file + ": segments: inconsistent snapshot: segment 0x7f0000000000 on"
                        + " device 0 declares total_size 41943040 (40.00 MiB) but its 1 block(s) add up to 20971520"
                        + " (20.00 MiB)");
        assertThat(refused.out()).isEmpty();
        CliRun lenient = CliRun.run("predict", "--lenient", file + "@1", file + "@2", "--at", "3");
        assertThat(lenient.exit()).as(lenient.out() + lenient.err()).isZero();
        assertThat(lenient.err()).startsWith("warning: " + file + ": inconsistent snapshot: segment 0x7f0000000000");
        assertThat(lenient.out()).startsWith("predicted at 3 from 2 recordings");
    }

    @Test
    void replayCheckExitsOneWhenTheEndStateDiffersFromTheRecording(@TempDir Path dir) throws Exception {
        // One 20 MiB segment and one 20 MiB request in it, still allocated at the end...
        List<TraceEntry> trace = List.of(
                TraceEntry.of(TraceAction.SEGMENT_ALLOC, BASE, 20 * MiB, 0),
                TraceEntry.of(TraceAction.ALLOC, BASE, 20 * MiB, 0));
        Path same = write(
                dir,
                "same.pickle",
                List.of(segment(20 * MiB, BlockInfo.of(BASE, 20 * MiB, 20 * MiB, BlockState.ACTIVE_ALLOCATED))),
                trace);
        // ...but this recording's end state says the block is free: every placement matches, the end does not.
        Path differs = write(
                dir,
                "differs.pickle",
                List.of(segment(20 * MiB, BlockInfo.of(BASE, 20 * MiB, 20 * MiB, BlockState.INACTIVE))),
                trace);

        CliRun identical = CliRun.run("replay", "--check", same.toString());
        assertThat(identical.exit()).as(identical.out() + identical.err()).isZero();
        assertThat(identical.out()).contains("1/1 allocs exact", "end state 1/1 segments identical");

        CliRun check = CliRun.run("replay", "--check", differs.toString());
        assertThat(check.exit()).as(check.out() + check.err()).isEqualTo(1);
        assertThat(check.out())
                .contains("1/1 allocs exact", "1/1 segment events matched", "end state 0/1 segments identical");
        assertThat(CliRun.run("replay", differs.toString()).exit())
                .as("without --check")
                .isZero();
        assertThat(CliRun.run("replay", "--help").out()).contains("Exit status:", "1   with --check");
    }
}
