package io.gpumem.trace.analysis;

import io.gpumem.alloc.Pool;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class StateAnalyzerTest {
    static final long MIB = 1L << 20;
    static final long GIB = 1L << 30;

    /** A segment at {@code base} built from (size, state) pairs; requested = size for allocated blocks. */
    static StateSegment seg(long base, Pool pool, long stream, boolean expandable, Object... sizeState) {
        List<StateBlock> blocks = new ArrayList<>();
        long addr = base;
        for (int i = 0; i < sizeState.length; i += 2) {
            long size = (Long) sizeState[i];
            BlockState st = (BlockState) sizeState[i + 1];
            blocks.add(new StateBlock(addr, size, st == BlockState.ALLOCATED ? size : 0, st));
            addr += size;
        }
        return new StateSegment(base, stream, pool, expandable, blocks);
    }

    @Test
    void fragmentationWhenCachedBytesSufficeButNoBlockFits() {
        MemoryState.Builder b = MemoryState.builder().label("frag").deviceFree(2 * MIB);
        for (int i = 0; i < 4; i++) {
            b.segment(seg(GIB + i * 20 * MIB, Pool.LARGE, 0, false,
                    4 * MIB, BlockState.ALLOCATED, 16 * MIB, BlockState.INACTIVE));
        }
        b.oom(new OomEvent(30 * MIB, 2 * MIB, 0, 17));
        StateAnalysis a = new StateAnalyzer().analyze(b.build());

        assertThat(a.large().reserved()).isEqualTo(80 * MIB);
        assertThat(a.large().allocated()).isEqualTo(16 * MIB);
        assertThat(a.large().inactiveSplit()).isEqualTo(64 * MIB);
        assertThat(a.large().releasable()).isZero();
        assertThat(a.large().largestFree()).isEqualTo(16 * MIB);
        assertThat(a.all().externalFragmentation()).isCloseTo(0.75, within(1e-9));
        assertThat(a.largestFree(Pool.LARGE, 0)).isEqualTo(16 * MIB);
        assertThat(a.topWaste()).hasSize(4).allMatch(SegmentWaste::pinned);
        assertThat(a.diagnosis().kind()).isEqualTo(DiagnosisKind.FRAGMENTATION);
        assertThat(a.diagnosis().trigger()).contains("entry #17").contains("30.00 MiB");
        assertThat(a.diagnosis().shortfall()).isZero();
    }

    @Test
    void liveTensorsWhenEvenEveryCachedByteIsTooFew() {
        MemoryState state = MemoryState.builder().capacity(24 * GIB).deviceFree(1536 * MIB)
                .segment(seg(GIB, Pool.LARGE, 0, false, 22 * GIB, BlockState.ALLOCATED, 512 * MIB, BlockState.INACTIVE))
                .oom(new OomEvent(4 * GIB, 1536 * MIB, 0, -1))
                .build();
        StateAnalysis a = new StateAnalyzer().analyze(state);

        assertThat(a.diagnosis().kind()).isEqualTo(DiagnosisKind.LIVE_TENSORS);
        assertThat(a.diagnosis().outside()).isZero();
        assertThat(a.diagnosis().shortfall()).isEqualTo(2 * GIB);
    }

    @Test
    void outsideMemoryWhenOtherUsersHoldWhatIsMissing() {
        MemoryState state = MemoryState.builder().capacity(24 * GIB)
                .segment(seg(GIB, Pool.LARGE, 0, false, 9 * GIB + 512 * MIB, BlockState.ALLOCATED, 512 * MIB, BlockState.INACTIVE))
                .oom(new OomEvent(4 * GIB, GIB, 0, 3))
                .build();
        StateAnalysis a = new StateAnalyzer().analyze(state);

        assertThat(state.deviceFree()).as("device free taken from the oom entry").isEqualTo(GIB);
        assertThat(a.diagnosis().kind()).isEqualTo(DiagnosisKind.OUTSIDE_MEMORY);
        assertThat(a.diagnosis().outside()).isEqualTo(13 * GIB);
        assertThat(a.diagnosis().shortfall()).isEqualTo(4 * GIB - 512 * MIB - GIB);
    }

    @Test
    void withoutCapacityAnOomThatCacheCannotCoverBlamesLiveTensors() {
        MemoryState state = MemoryState.builder()
                .segment(seg(GIB, Pool.LARGE, 0, false, 9 * GIB, BlockState.ALLOCATED))
                .oom(new OomEvent(4 * GIB, GIB, 0, 3))
                .build();
        StateAnalysis a = new StateAnalyzer().analyze(state);
        assertThat(a.diagnosis().kind()).isEqualTo(DiagnosisKind.LIVE_TENSORS);
        assertThat(a.diagnosis().outside()).isEqualTo(-1);
        assertThat(a.diagnosis().evidence()).anyMatch(e -> e.contains("capacity unknown"));
    }

    @Test
    void nearCapacityWithoutOomIsDiagnosedByTheLargestTerm() {
        // 10 GiB capacity, 9.5 GiB reserved of which 2 GiB free in pinned holes: fragmentation.
        MemoryState frag = MemoryState.builder().capacity(10 * GIB).deviceFree(512 * MIB)
                .segment(seg(GIB, Pool.LARGE, 0, false, 3 * GIB, BlockState.ALLOCATED, GIB, BlockState.INACTIVE,
                        3 * GIB, BlockState.ALLOCATED, GIB, BlockState.INACTIVE, 1536 * MIB, BlockState.ALLOCATED))
                .build();
        assertThat(new StateAnalyzer().analyze(frag).diagnosis().kind()).isEqualTo(DiagnosisKind.FRAGMENTATION);

        MemoryState live = MemoryState.builder().capacity(10 * GIB).deviceFree(512 * MIB)
                .segment(seg(GIB, Pool.LARGE, 0, false, 9 * GIB, BlockState.ALLOCATED, 512 * MIB, BlockState.INACTIVE))
                .build();
        assertThat(new StateAnalyzer().analyze(live).diagnosis().kind()).isEqualTo(DiagnosisKind.LIVE_TENSORS);

        MemoryState outside = MemoryState.builder().capacity(10 * GIB).deviceFree(512 * MIB)
                .segment(seg(GIB, Pool.LARGE, 0, false, 6 * GIB, BlockState.ALLOCATED))
                .build();
        StateAnalysis o = new StateAnalyzer().analyze(outside);
        assertThat(o.diagnosis().kind()).isEqualTo(DiagnosisKind.OUTSIDE_MEMORY);
        assertThat(o.diagnosis().outside()).isEqualTo(3 * GIB + 512 * MIB);
    }

    @Test
    void releasableCacheDoesNotCountTowardsCapacity() {
        // 9.5 of 10 GiB reserved, but 8 GiB of it are whole free segments the OOM retry would release.
        MemoryState state = MemoryState.builder().capacity(10 * GIB).deviceFree(512 * MIB)
                .segment(seg(GIB, Pool.LARGE, 0, false, GIB + 512 * MIB, BlockState.ALLOCATED))
                .segment(seg(4 * GIB, Pool.LARGE, 0, false, 8 * GIB, BlockState.INACTIVE))
                .build();
        StateAnalysis a = new StateAnalyzer().analyze(state);
        assertThat(a.all().releasable()).isEqualTo(8 * GIB);
        assertThat(a.all().pinnedFree()).isZero();
        assertThat(a.diagnosis().kind()).isEqualTo(DiagnosisKind.NONE);
        assertThat(a.diagnosis().evidence()).anyMatch(e -> e.contains("severe waste"));
    }

    @Test
    void roomyStateIsNotDiagnosed() {
        MemoryState state = MemoryState.builder().capacity(80 * GIB).deviceFree(70 * GIB)
                .segment(seg(GIB, Pool.LARGE, 0, false, 6 * GIB, BlockState.ALLOCATED))
                .build();
        StateAnalysis a = new StateAnalyzer().analyze(state);
        assertThat(a.diagnosis().kind()).isEqualTo(DiagnosisKind.NONE);
        assertThat(a.diagnosis().trigger()).contains("below 90.0%");
    }

    @Test
    void accountsPoolsSlackPendingReleasableAndExpandablePages() {
        long small = 2 * MIB;
        StateBlock tiny = new StateBlock(GIB, 512, 100, BlockState.ALLOCATED);
        StateBlock rest = new StateBlock(GIB + 512, small - 512, 0, BlockState.INACTIVE);
        MemoryState state = MemoryState.builder()
                .segment(new StateSegment(GIB, 0, Pool.SMALL, false, List.of(tiny, rest)))
                // a wholly free 20 MiB segment: releasable
                .segment(seg(2 * GIB, Pool.LARGE, 0, false, 20 * MIB, BlockState.INACTIVE))
                // a pending-free block is active but not allocated, and pins its neighbour
                .segment(seg(3 * GIB, Pool.LARGE, 7, false, 6 * MIB, BlockState.PENDING_FREE, 14 * MIB, BlockState.INACTIVE))
                // expandable run of 3 pages: 10 MiB live, then 50 MiB free -> pages 2 and 3 (40 MiB) unmappable
                .segment(seg(4 * GIB, Pool.LARGE, 0, true, 10 * MIB, BlockState.ALLOCATED, 50 * MIB, BlockState.INACTIVE))
                .build();
        StateAnalysis a = new StateAnalyzer().analyze(state);

        assertThat(a.small().reserved()).isEqualTo(small);
        assertThat(a.small().allocated()).isEqualTo(512);
        assertThat(a.small().requested()).isEqualTo(100);
        assertThat(a.small().inactiveSplit()).isEqualTo(small - 512);
        assertThat(a.large().reserved()).isEqualTo(20 * MIB + 20 * MIB + 60 * MIB);
        assertThat(a.large().active()).isEqualTo(16 * MIB);
        assertThat(a.large().allocated()).isEqualTo(10 * MIB);
        assertThat(a.large().inactiveSplit()).as("expandable free bytes are not inactive split").isEqualTo(14 * MIB);
        assertThat(a.large().releasable()).isEqualTo(20 * MIB + 40 * MIB);
        assertThat(a.all().segments()).isEqualTo(4);
        assertThat(a.all().freeBlocks()).isEqualTo(4);
        assertThat(a.largestFree(Pool.LARGE, 7)).isEqualTo(14 * MIB);
        assertThat(a.largestFree(Pool.LARGE, 0)).isEqualTo(50 * MIB);
        assertThat(a.streamFree().get(0).largestFree()).isEqualTo(50 * MIB);
        assertThat(a.topWaste().get(0).address()).isEqualTo(4 * GIB);
        assertThat(a.topWaste()).filteredOn(w -> w.address() == 2 * GIB).singleElement()
                .satisfies(w -> assertThat(w.pinned()).isFalse());
        assertThat(a.topWaste()).filteredOn(w -> w.address() == GIB).singleElement()
                .satisfies(w -> assertThat(w.slackBytes()).isEqualTo(412));
    }

    @Test
    void rejectsInconsistentSegments() {
        assertThatThrownBy(() -> new StateSegment(GIB, 0, Pool.LARGE, false, List.of(
                new StateBlock(GIB, MIB, 0, BlockState.INACTIVE), new StateBlock(GIB + 2 * MIB, MIB, 0, BlockState.INACTIVE))))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("does not follow");
        assertThatThrownBy(() -> MemoryState.builder()
                .segment(seg(GIB, Pool.LARGE, 0, false, 20 * MIB, BlockState.INACTIVE))
                .segment(seg(GIB + MIB, Pool.LARGE, 0, false, 20 * MIB, BlockState.INACTIVE)).build())
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("overlap");
        assertThatThrownBy(() -> BlockState.ofSnapshotState("weird")).hasMessageContaining("weird");
        assertThat(BlockState.ofSnapshotState("active_awaiting_free")).isEqualTo(BlockState.PENDING_FREE);
    }
}
