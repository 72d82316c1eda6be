package io.gpumem.engine;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.alloc.Pool;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.history.BlockInfo;
import io.gpumem.history.BlockState;
import io.gpumem.history.Frame;
import io.gpumem.history.SegmentInfo;
import io.gpumem.policy.PolicyRegistry;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The steady-state loop of a warm window ({@link RequestStream#iterated}, {@link RequestStream#loopClosure}) and the
 * runner's stop once reserved memory stops changing ({@link RunOptions.Builder#untilSteady}).
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

    /**
     * A warm window with every kind of start block: a 20 MiB one it keeps, and three it frees: a 4 MiB one it makes
     * again at its size, a 6 MiB one it makes again as a 5 MiB request (its block, rounded up with an unsplit
     * remainder, is within the rounding slack), an 8 MiB one it does not make again; besides a 3 MiB request it
     * leaves live that stands for nothing, a step boundary, an empty_cache, and a 30 MiB temporary on stream 7 with
     * a site and a time.
     */
    static RequestStream richWindow(List<Frame> site) {
        long a = 0x7f0000000000L;
        SegmentInfo seg = SegmentInfo.ofBlocks(
                0,
                a,
                0,
                Pool.LARGE,
                false,
                List.of(
                        BlockInfo.of(a, 20 * MIB, 20 * MIB, BlockState.ACTIVE_ALLOCATED),
                        BlockInfo.of(a + 20 * MIB, 4 * MIB, 4 * MIB, BlockState.ACTIVE_ALLOCATED),
                        BlockInfo.of(a + 24 * MIB, 6 * MIB, 5 * MIB, BlockState.ACTIVE_ALLOCATED),
                        BlockInfo.of(a + 30 * MIB, 8 * MIB, 8 * MIB, BlockState.ACTIVE_ALLOCATED),
                        BlockInfo.of(a + 38 * MIB, 60 * MIB, 0, BlockState.INACTIVE)));
        RequestStream.Builder b = RequestStream.builder().startState(List.of(seg));
        int temporary = b.alloc(30 * MIB, 7, 0);
        b.atSite(b.site(site));
        b.at(100);
        b.free(1, 1);
        b.step(2);
        b.alloc(4 * MIB, 0, 3);
        b.free(2, 4);
        b.alloc(5 * MIB, 0, 5);
        b.alloc(3 * MIB, 0, 6);
        b.free(3, 7);
        b.emptyCache(8);
        b.free(temporary, 9);
        return b.build();
    }

    /** The stream's ops, one line each: op, slot and size of allocs, slot of frees. */
    static List<String> ops(RequestStream s) {
        List<String> out = new ArrayList<>();
        for (int k = 0; k < s.length(); k++) {
            out.add(
                    switch (s.op(k)) {
                        case RequestStream.ALLOC ->
                            "alloc " + s.slot(k) + " " + s.size(k) / MIB + (s.stream(k) != 0 ? " on 7" : "");
                        case RequestStream.FREE -> "free " + s.slot(k);
                        case RequestStream.STEP -> "step";
                        case RequestStream.EMPTY_CACHE -> "empty_cache";
                        default -> "op " + s.op(k);
                    });
        }
        return out;
    }

    @Test
    void eachPassHandsItsLeftoversToTheNextAsTheStartBlocksTheyStandFor() {
        List<Frame> site = List.of(new Frame("train.py", 40, "forward"));
        RequestStream w = richWindow(site);
        // of the three start blocks it frees, two come back (one by its size, one within the rounding slack)
        assertThat(w.loopClosure()).isEqualTo(2.0 / 3.0);

        RequestStream loop = w.iterated(2);
        assertThat(ops(loop))
                .containsExactly(
                        // the kept block first, then those the window frees, in slot order
                        "alloc 0 20",
                        "alloc 1 4",
                        "alloc 2 6",
                        "alloc 3 8",
                        // pass 1: the window's ops (its own step dropped, its empty_cache kept)
                        "step",
                        "alloc 4 30 on 7",
                        "free 1",
                        "alloc 5 4",
                        "free 2",
                        "alloc 6 5",
                        "alloc 7 3",
                        "free 3",
                        "empty_cache",
                        "free 4",
                        // the 3 MiB leftover stands for no start block; the 8 MiB one is made afresh
                        "free 7",
                        "alloc 8 8",
                        // pass 2: the 4 MiB and 5 MiB leftovers are freed where the start blocks were
                        "step",
                        "alloc 9 30 on 7",
                        "free 5",
                        "alloc 10 4",
                        "free 6",
                        "alloc 11 5",
                        "alloc 12 3",
                        "free 8",
                        "empty_cache",
                        "free 9");
        // the temporary keeps its site in both passes; the other ops have the default (none)
        assertThat(loop.frames(5)).isEqualTo(site);
        assertThat(loop.frames(17)).isEqualTo(site);
        assertThat(loop.frames(6)).isEmpty();
        assertThat(loop.entry(5)).isZero();
        assertThat(loop.entry(0)).isEqualTo(-1);
        // one pass is the window itself on its live blocks, nothing handed over
        assertThat(ops(w.iterated(1))).hasSize(4 + 10);
    }

    /**
     * Pairing a pass's leftovers with the start blocks it freed: same size first, then within the rounding slack
     * (strictly under 2 MiB larger), each request once. The window frees all six start blocks (6, 5, 7, 6, 6 and 1
     * MiB) and leaves four 5 MiB requests live: the 5 MiB block takes the first by size; then the first 6 MiB block
     * the second, the 7 MiB one none (2 MiB larger is outside the slack), the other two 6 MiB blocks the last two; the
     * 1 MiB block none. The two without a partner are allocated afresh for the next pass.
     */
    @Test
    void leftoversPairBySizeFirstThenWithinTheRoundingSlack() {
        long a = 0x7f0000000000L;
        long[] sizes = {6 * MIB, 5 * MIB, 7 * MIB, 6 * MIB, 6 * MIB, MIB};
        List<BlockInfo> blocks = new ArrayList<>();
        long at = a;
        for (long size : sizes) {
            blocks.add(BlockInfo.of(at, size, size, BlockState.ACTIVE_ALLOCATED));
            at += size;
        }
        blocks.add(BlockInfo.of(at, 100 * MIB - (at - a), 0, BlockState.INACTIVE));
        RequestStream.Builder b =
                RequestStream.builder().startState(List.of(SegmentInfo.ofBlocks(0, a, 0, Pool.LARGE, false, blocks)));
        for (int slot = 0; slot < sizes.length; slot++) {
            b.free(slot, slot);
        }
        for (int i = 0; i < 4; i++) {
            b.alloc(5 * MIB, 0, 10 + i);
        }
        RequestStream w = b.build();
        assertThat(w.loopClosure()).isEqualTo(4.0 / 6.0);
        assertThat(ops(w.iterated(2)))
                .containsExactly(
                        "alloc 0 6",
                        "alloc 1 5",
                        "alloc 2 7",
                        "alloc 3 6",
                        "alloc 4 6",
                        "alloc 5 1",
                        "step",
                        "free 0",
                        "free 1",
                        "free 2",
                        "free 3",
                        "free 4",
                        "free 5",
                        "alloc 6 5",
                        "alloc 7 5",
                        "alloc 8 5",
                        "alloc 9 5",
                        // the 7 MiB and 1 MiB blocks, which no leftover stands for
                        "alloc 10 7",
                        "alloc 11 1",
                        "step",
                        "free 7", // the first 6 MiB block's stand-in: the second leftover
                        "free 6", // the 5 MiB block's: the first
                        "free 10",
                        "free 8",
                        "free 9",
                        "free 11",
                        "alloc 12 5",
                        "alloc 13 5",
                        "alloc 14 5",
                        "alloc 15 5");
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
                RunOptions.builder(1L << 30).build());
        RunOutcome steady = runner.run(
                PolicyRegistry.exact(AllocatorConfig.defaults()),
                RunOptions.builder(1L << 30).untilSteady(true).build());
        assertThat(full.stepsCompleted()).isEqualTo(6);
        assertThat(steady.stepsCompleted()).isBetween(2, 5);
        assertThat(steady.peakReserved()).isEqualTo(full.peakReserved());
        assertThat(steady.peakAllocated()).isEqualTo(full.peakAllocated());
    }
}
