package io.gpumem.cli.trace;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.cli.CliRun;
import io.gpumem.history.BlockInfo;
import io.gpumem.history.BlockState;
import io.gpumem.history.SegmentInfo;
import io.gpumem.trace.io.TraceReaders;
import io.gpumem.trace.io.TraceSnapshot;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code replay --policy P --snapshot OUT}: writes the policy allocator's own snapshot of the window, a pickle that
 * gpumem reads back as a consistent state holding the oracle replay's live requests (each rounded to 512 bytes).
 */
class ReplayPolicySnapshotTest {

    static final Path DEMO_SMALL = Path.of("..", "examples", "demo-small.pickle");

    @TempDir
    Path dir;

    @Test
    void stitchSnapshotLoadsAndHoldsTheOracleReplaysLiveRequests() throws Exception {
        Path stitched = dir.resolve("stitch.pickle");
        CliRun r = CliRun.run("replay", DEMO_SMALL.toString(), "--policy", "stitch", "--snapshot", stitched.toString());
        assertThat(r.exit()).as(r.err()).isZero();
        assertThat(r.out()).contains("replayed under policy stitch").contains("snapshot written to " + stitched);
        TraceSnapshot policySnapshot = TraceReaders.read(stitched);
        assertThat(policySnapshot.segments()).isNotEmpty();
        for (SegmentInfo seg : policySnapshot.segments()) {
            long at = seg.address();
            long active = 0;
            for (BlockInfo b : seg.blocks()) {
                assertThat(b.address())
                        .as("blocks tile segment %x", seg.address())
                        .isEqualTo(at);
                at += b.size();
                if (b.state() == BlockState.ACTIVE_ALLOCATED) {
                    active += b.size();
                }
            }
            assertThat(at - seg.address()).isEqualTo(seg.totalSize());
            assertThat(seg.allocatedSize()).isEqualTo(active);
        }

        Path oracle = dir.resolve("oracle.pickle");
        CliRun o = CliRun.run("replay", DEMO_SMALL.toString(), "--snapshot", oracle.toString());
        assertThat(o.exit()).as(o.err()).isZero();
        // PyTorch's blocks may keep an unsplit remainder; stitch places each request rounded to 512 bytes only
        assertThat(allocated(policySnapshot)).isPositive().isEqualTo(requestedRounded(TraceReaders.read(oracle)));
    }

    @Test
    void policyNeedsSnapshotAndIsCheckedFirst() {
        CliRun r = CliRun.run("replay", DEMO_SMALL.toString(), "--policy", "stitch");
        assertThat(r.exit()).isEqualTo(2);
        assertThat(r.err()).startsWith("gpumem replay: --policy goes with --snapshot OUT only");
        Path out = dir.resolve("bad.pickle");
        r = CliRun.run("replay", DEMO_SMALL.toString(), "--policy", "bestfit", "--snapshot", out.toString());
        assertThat(r.exit()).isEqualTo(2);
        assertThat(r.err()).startsWith("gpumem replay: bad --policy: unknown policy 'bestfit'");
        assertThat(out).doesNotExist();
    }

    private static long requestedRounded(TraceSnapshot s) {
        long sum = 0;
        for (SegmentInfo seg : s.segments()) {
            for (BlockInfo b : seg.blocks()) {
                if (b.state() == BlockState.ACTIVE_ALLOCATED) {
                    sum += Math.max(512, (b.requestedSize() + 511) / 512 * 512);
                }
            }
        }
        return sum;
    }

    private static long allocated(TraceSnapshot s) {
        long sum = 0;
        for (SegmentInfo seg : s.segments()) {
            sum += seg.allocatedSize();
        }
        return sum;
    }
}
