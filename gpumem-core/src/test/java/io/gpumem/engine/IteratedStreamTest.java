package io.gpumem.engine;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.alloc.Pool;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.history.BlockInfo;
import io.gpumem.history.BlockState;
import io.gpumem.history.SegmentInfo;
import io.gpumem.policy.PolicyRegistry;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The steady-state loop of a warm window ({@link RequestStream#iterated}, {@link RequestStream#loopClosure}) and the
 * runner's stop once reserved memory stops changing ({@link StreamRunner.Options.Builder#untilSteady}).
 */
class IteratedStreamTest {

    static final long MIB = 1L << 20;

    /**
     * A warm window of a training loop: a 20 MiB parameter kept, a 4 MiB gradient of the previous step (freed by
     * the window, made again and left live), an activation allocated and freed, and 60 MiB of cached free space.
     */
    static RequestStream window() {
        SegmentInfo seg = SegmentInfo.ofBlocks(
                0,
                0x7f0000000000L,
                0,
                Pool.LARGE,
                false,
                List.of(
                        BlockInfo.of(0x7f0000000000L, 20 * MIB, 20 * MIB, BlockState.ACTIVE_ALLOCATED),
                        BlockInfo.of(0x7f0001400000L, 4 * MIB, 4 * MIB, BlockState.ACTIVE_ALLOCATED),
                        BlockInfo.of(0x7f0001800000L, 60 * MIB, 0, BlockState.INACTIVE)));
        RequestStream.Builder b = RequestStream.builder().startState(List.of(seg));
        int act = b.alloc(30 * MIB, 0, 0);
        b.free(1, 1); // the previous step's gradient
        b.alloc(4 * MIB, 0, 2); // this step's, left live
        b.free(act, 3);
        return b.build();
    }

    @Test
    void passesStartFromTheLiveBlocksAndCarryTheGradientOver() {
        RequestStream w = window();
        assertThat(w.loopClosure()).isEqualTo(1.0);
        RequestStream loop = w.iterated(3);
        assertThat(loop.startState()).isEmpty();
        assertThat(loop.steps()).isEqualTo(3);
        // start blocks (kept first), then per pass: 2 allocs; the gradient each pass leaves stands for the next's
        assertThat(loop.allocs()).isEqualTo(2 + 3 * 2);
        assertThat(loop.size(0)).isEqualTo(20 * MIB);
        assertThat(loop.size(1)).isEqualTo(4 * MIB);
        long live = 0;
        long peak = 0;
        long[] bytes = new long[loop.slots()];
        for (int k = 0; k < loop.length(); k++) {
            if (loop.op(k) == RequestStream.ALLOC) {
                bytes[loop.slot(k)] = loop.size(k);
                live += loop.size(k);
                peak = Math.max(peak, live);
            } else if (loop.op(k) == RequestStream.FREE) {
                live -= bytes[loop.slot(k)];
            }
        }
        assertThat(live).as("nothing accumulates over passes").isEqualTo(24 * MIB);
        assertThat(peak).isEqualTo(w.peakLiveBytes());
    }

    @Test
    void aWindowThatOnlyFillsMemoryDoesNotCloseAsALoop() {
        RequestStream.Builder b = RequestStream.builder();
        b.alloc(MIB, 0, 0);
        assertThat(b.build().loopClosure()).isZero();
        RequestStream.Builder empty = RequestStream.builder();
        empty.free(empty.alloc(MIB, 0, 0), 1);
        assertThat(empty.build().loopClosure()).isEqualTo(1.0);
        assertThatThrownBy(() -> window().iterated(0)).hasMessageContaining("passes");
    }

    @Test
    void theRunnerStopsOnceReservedMemoryStopsChanging() {
        RequestStream loop = window().iterated(6);
        StreamRunner runner = new StreamRunner(loop);
        RunOutcome full = runner.run(
                PolicyRegistry.exact(AllocatorConfig.defaults()),
                StreamRunner.Options.builder(1L << 30).build());
        RunOutcome steady = runner.run(
                PolicyRegistry.exact(AllocatorConfig.defaults()),
                StreamRunner.Options.builder(1L << 30).untilSteady(true).build());
        assertThat(full.stepsCompleted()).isEqualTo(6);
        assertThat(steady.stepsCompleted()).isBetween(2, 5);
        assertThat(steady.peakReserved()).isEqualTo(full.peakReserved());
        assertThat(steady.peakAllocated()).isEqualTo(full.peakAllocated());
    }
}
