package io.gpumem.trace.analysis;

import static io.gpumem.testing.TestSizes.GiB;
import static io.gpumem.testing.TestSizes.MiB;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import io.gpumem.alloc.Pool;
import io.gpumem.history.BlockInfo;
import io.gpumem.history.BlockState;
import io.gpumem.history.SegmentInfo;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class StateAnalyzerTest {

    /** A segment at {@code base} built from (size, state) pairs; requested = size for allocated blocks. */
    static SegmentInfo seg(long base, Pool pool, long stream, boolean expandable, Object... sizeState) {
        List<BlockInfo> blocks = new ArrayList<>();
        long addr = base;
        for (int i = 0; i < sizeState.length; i += 2) {
            long size = (Long) sizeState[i];
            BlockState st = (BlockState) sizeState[i + 1];
            blocks.add(BlockInfo.of(addr, size, st == BlockState.ACTIVE_ALLOCATED ? size : 0, st));
            addr += size;
        }
        return SegmentInfo.ofBlocks(0, base, stream, pool, expandable, blocks);
    }

    @Test
    void fragmentationWhenCachedBytesSufficeButNoBlockFits() {
        MemoryState.Builder b = MemoryState.builder().label("frag").deviceFree(2 * MiB);
        for (int i = 0; i < 4; i++) {
            b.segment(seg(
                    GiB + 20L * i * MiB,
                    Pool.LARGE,
                    0,
                    false,
                    4 * MiB,
                    BlockState.ACTIVE_ALLOCATED,
                    16 * MiB,
                    BlockState.INACTIVE));
        }
        b.oom(new OomEvent(30 * MiB, 2 * MiB, 0, 17));
        StateAnalysis a = new StateAnalyzer().analyze(b.build());

        assertThat(a.large().reserved()).isEqualTo(80 * MiB);
        assertThat(a.large().allocated()).isEqualTo(16 * MiB);
        assertThat(a.large().inactiveSplit()).isEqualTo(64 * MiB);
        assertThat(a.large().releasable()).isZero();
        assertThat(a.large().largestFree()).isEqualTo(16 * MiB);
        assertThat(a.all().externalFragmentation()).isCloseTo(0.75, within(1e-9));
        assertThat(a.largestFree(Pool.LARGE, 0)).isEqualTo(16 * MiB);
        assertThat(a.topWaste()).hasSize(4).allMatch(SegmentWaste::pinned);
        assertThat(a.diagnosis().kind()).isEqualTo(DiagnosisKind.FRAGMENTATION);
        assertThat(a.diagnosis().trigger()).contains("entry #17").contains("30.00 MiB");
        assertThat(a.diagnosis().shortfall()).isZero();
    }

    @Test
    void liveTensorsWhenEvenEveryCachedByteIsTooFew() {
        MemoryState state = MemoryState.builder()
                .capacity(24 * GiB)
                .deviceFree(1536 * MiB)
                .segment(seg(
                        GiB,
                        Pool.LARGE,
                        0,
                        false,
                        22 * GiB,
                        BlockState.ACTIVE_ALLOCATED,
                        512 * MiB,
                        BlockState.INACTIVE))
                .oom(new OomEvent(4 * GiB, 1536 * MiB, 0, -1))
                .build();
        StateAnalysis a = new StateAnalyzer().analyze(state);

        assertThat(a.diagnosis().kind()).isEqualTo(DiagnosisKind.LIVE_TENSORS);
        assertThat(a.diagnosis().outside()).isZero();
        assertThat(a.diagnosis().shortfall()).isEqualTo(2 * GiB);
    }

    @Test
    void outsideMemoryWhenOtherUsersHoldWhatIsMissing() {
        MemoryState state = MemoryState.builder()
                .capacity(24 * GiB)
                .segment(seg(
                        GiB,
                        Pool.LARGE,
                        0,
                        false,
                        9 * GiB + 512 * MiB,
                        BlockState.ACTIVE_ALLOCATED,
                        512 * MiB,
                        BlockState.INACTIVE))
                .oom(new OomEvent(4 * GiB, GiB, 0, 3))
                .build();
        StateAnalysis a = new StateAnalyzer().analyze(state);

        assertThat(state.deviceFree())
                .as("device free taken from the oom entry")
                .isEqualTo(GiB);
        assertThat(a.diagnosis().kind()).isEqualTo(DiagnosisKind.OUTSIDE_MEMORY);
        assertThat(a.diagnosis().outside()).isEqualTo(13 * GiB);
        assertThat(a.diagnosis().shortfall()).isEqualTo(4 * GiB - 512 * MiB - GiB);
    }

    @Test
    void withoutCapacityAnOomThatCacheCannotCoverBlamesLiveTensors() {
        MemoryState state = MemoryState.builder()
                .segment(seg(GiB, Pool.LARGE, 0, false, 9 * GiB, BlockState.ACTIVE_ALLOCATED))
                .oom(new OomEvent(4 * GiB, GiB, 0, 3))
                .build();
        StateAnalysis a = new StateAnalyzer().analyze(state);
        assertThat(a.diagnosis().kind()).isEqualTo(DiagnosisKind.LIVE_TENSORS);
        assertThat(a.diagnosis().outside()).isEqualTo(-1);
        assertThat(a.diagnosis().evidence()).anyMatch(e -> e.contains("capacity unknown"));
    }

    @Test
    void nearCapacityWithoutOomIsDiagnosedByTheLargestTerm() {
        // 10 GiB capacity, 9.5 GiB reserved of which 2 GiB free in pinned holes: fragmentation.
        MemoryState frag = MemoryState.builder()
                .capacity(10 * GiB)
                .deviceFree(512 * MiB)
                .segment(seg(
                        GiB,
                        Pool.LARGE,
                        0,
                        false,
                        3 * GiB,
                        BlockState.ACTIVE_ALLOCATED,
                        GiB,
                        BlockState.INACTIVE,
                        3 * GiB,
                        BlockState.ACTIVE_ALLOCATED,
                        GiB,
                        BlockState.INACTIVE,
                        1536 * MiB,
                        BlockState.ACTIVE_ALLOCATED))
                .build();
        assertThat(new StateAnalyzer().analyze(frag).diagnosis().kind()).isEqualTo(DiagnosisKind.FRAGMENTATION);

        MemoryState live = MemoryState.builder()
                .capacity(10 * GiB)
                .deviceFree(512 * MiB)
                .segment(seg(
                        GiB,
                        Pool.LARGE,
                        0,
                        false,
                        9 * GiB,
                        BlockState.ACTIVE_ALLOCATED,
                        512 * MiB,
                        BlockState.INACTIVE))
                .build();
        assertThat(new StateAnalyzer().analyze(live).diagnosis().kind()).isEqualTo(DiagnosisKind.LIVE_TENSORS);

        MemoryState outside = MemoryState.builder()
                .capacity(10 * GiB)
                .deviceFree(512 * MiB)
                .segment(seg(GiB, Pool.LARGE, 0, false, 6 * GiB, BlockState.ACTIVE_ALLOCATED))
                .build();
        StateAnalysis o = new StateAnalyzer().analyze(outside);
        assertThat(o.diagnosis().kind()).isEqualTo(DiagnosisKind.OUTSIDE_MEMORY);
        assertThat(o.diagnosis().outside()).isEqualTo(3 * GiB + 512 * MiB);
    }

    @Test
    void releasableCacheDoesNotCountTowardsCapacity() {
        // 9.5 of 10 GiB reserved, but 8 GiB of it are whole free segments the OOM retry would release.
        MemoryState state = MemoryState.builder()
                .capacity(10 * GiB)
                .deviceFree(512 * MiB)
                .segment(seg(GiB, Pool.LARGE, 0, false, GiB + 512 * MiB, BlockState.ACTIVE_ALLOCATED))
                .segment(seg(4 * GiB, Pool.LARGE, 0, false, 8 * GiB, BlockState.INACTIVE))
                .build();
        StateAnalysis a = new StateAnalyzer().analyze(state);
        assertThat(a.all().releasable()).isEqualTo(8 * GiB);
        assertThat(a.all().pinnedFree()).isZero();
        assertThat(a.diagnosis().kind()).isEqualTo(DiagnosisKind.NONE);
        assertThat(a.diagnosis().evidence()).anyMatch(e -> e.contains("severe waste"));
    }

    @Test
    void roomyStateIsNotDiagnosed() {
        MemoryState state = MemoryState.builder()
                .capacity(80 * GiB)
                .deviceFree(70 * GiB)
                .segment(seg(GiB, Pool.LARGE, 0, false, 6 * GiB, BlockState.ACTIVE_ALLOCATED))
                .build();
        StateAnalysis a = new StateAnalyzer().analyze(state);
        assertThat(a.diagnosis().kind()).isEqualTo(DiagnosisKind.NONE);
        assertThat(a.diagnosis().trigger()).contains("below 90.0%");
    }

    @Test
    void accountsPoolsSlackPendingReleasableAndExpandablePages() {
        long small = 2 * MiB;
        BlockInfo tiny = BlockInfo.of(GiB, 512, 100, BlockState.ACTIVE_ALLOCATED);
        BlockInfo rest = BlockInfo.of(GiB + 512, small - 512, 0, BlockState.INACTIVE);
        MemoryState state = MemoryState.builder()
                .segment(SegmentInfo.ofBlocks(0, GiB, 0, Pool.SMALL, false, List.of(tiny, rest)))
                // a wholly free 20 MiB segment: releasable
                .segment(seg(2 * GiB, Pool.LARGE, 0, false, 20 * MiB, BlockState.INACTIVE))
                // a pending-free block is active but not allocated, and pins its neighbour
                .segment(seg(
                        3 * GiB,
                        Pool.LARGE,
                        7,
                        false,
                        6 * MiB,
                        BlockState.ACTIVE_PENDING_FREE,
                        14 * MiB,
                        BlockState.INACTIVE))
                // expandable run of 3 pages: 10 MiB live, then 50 MiB free -> pages 2 and 3 (40 MiB) unmappable
                .segment(seg(
                        4 * GiB,
                        Pool.LARGE,
                        0,
                        true,
                        10 * MiB,
                        BlockState.ACTIVE_ALLOCATED,
                        50 * MiB,
                        BlockState.INACTIVE))
                .build();
        StateAnalysis a = new StateAnalyzer().analyze(state);

        assertThat(a.small().reserved()).isEqualTo(small);
        assertThat(a.small().allocated()).isEqualTo(512);
        assertThat(a.small().requested()).isEqualTo(100);
        assertThat(a.small().inactiveSplit()).isEqualTo(small - 512);
        assertThat(a.large().reserved()).isEqualTo(20 * MiB + 20 * MiB + 60 * MiB);
        assertThat(a.large().active()).isEqualTo(16 * MiB);
        assertThat(a.large().allocated()).isEqualTo(10 * MiB);
        assertThat(a.large().inactiveSplit())
                .as("expandable free bytes are not inactive split")
                .isEqualTo(14 * MiB);
        assertThat(a.large().releasable()).isEqualTo(20 * MiB + 40 * MiB);
        assertThat(a.all().segments()).isEqualTo(4);
        assertThat(a.all().freeBlocks()).isEqualTo(4);
        assertThat(a.largestFree(Pool.LARGE, 7)).isEqualTo(14 * MiB);
        assertThat(a.largestFree(Pool.LARGE, 0)).isEqualTo(50 * MiB);
        assertThat(a.streamFree().get(0).largestFree()).isEqualTo(50 * MiB);
        assertThat(a.topWaste().get(0).address()).isEqualTo(4 * GiB);
        assertThat(a.topWaste())
                .filteredOn(w -> w.address() == 2 * GiB)
                .singleElement()
                .satisfies(w -> assertThat(w.pinned()).isFalse());
        assertThat(a.topWaste())
                .filteredOn(w -> w.address() == GiB)
                .singleElement()
                .satisfies(w -> assertThat(w.slackBytes()).isEqualTo(412));
    }

    @Test
    void rejectsInconsistentSegments() {
        assertThatThrownBy(() -> MemoryState.builder()
                        .segment(SegmentInfo.ofBlocks(
                                0,
                                GiB,
                                0,
                                Pool.LARGE,
                                false,
                                List.of(
                                        BlockInfo.of(GiB, MiB, 0, BlockState.INACTIVE),
                                        BlockInfo.of(GiB + 2 * MiB, MiB, 0, BlockState.INACTIVE))))
                        .build())
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("does not follow");
        assertThatThrownBy(() -> MemoryState.builder()
                        .segment(seg(GiB, Pool.LARGE, 0, false, 20 * MiB, BlockState.INACTIVE))
                        .segment(seg(GiB + MiB, Pool.LARGE, 0, false, 20 * MiB, BlockState.INACTIVE))
                        .build())
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("overlap");
        assertThatThrownBy(() -> MemoryState.builder()
                        .segment(SegmentInfo.ofBlocks(
                                0,
                                GiB,
                                0,
                                Pool.LARGE,
                                false,
                                List.of(BlockInfo.of(GiB, MiB, 0, BlockState.ofWireName("weird")))))
                        .build())
                .hasMessageContaining("no known state");
        assertThat(BlockState.ofWireName("active_awaiting_free")).isEqualTo(BlockState.ACTIVE_PENDING_FREE);
    }
}
