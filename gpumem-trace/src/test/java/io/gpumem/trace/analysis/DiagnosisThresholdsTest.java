package io.gpumem.trace.analysis;

import static io.gpumem.testing.TestSizes.GiB;
import static io.gpumem.trace.analysis.StateAnalyzerTest.seg;
import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.alloc.Pool;
import io.gpumem.history.BlockState;
import org.junit.jupiter.api.Test;

/**
 * The diagnosis rules at their thresholds ({@link DiagnosisRules}; README-analysis.md documents each): every rule
 * holds exactly at its bound and gives way to the next one a block (512 bytes) past it.
 */
class DiagnosisThresholdsTest {

    private static final long BLOCK = 512;

    private static DiagnosisKind kind(MemoryState state) {
        return new StateAnalyzer().analyze(state).diagnosis().kind();
    }

    /** One segment: {@code allocated} bytes live, then {@code free} bytes free at its end (not pinned). */
    private static MemoryState.Builder oneSegment(long allocated, long free) {
        return MemoryState.builder()
                .segment(
                        free > 0
                                ? seg(
                                        GiB,
                                        Pool.LARGE,
                                        0,
                                        false,
                                        allocated,
                                        BlockState.ACTIVE_ALLOCATED,
                                        free,
                                        BlockState.INACTIVE)
                                : seg(GiB, Pool.LARGE, 0, false, allocated, BlockState.ACTIVE_ALLOCATED));
    }

    @Test
    void anOomIsFragmentationWhileCachedAndDriverFreeBytesCoverTheRequest() {
        // 1 GiB cached in the segment's free tail, 1 GiB free in the driver: a request of exactly 2 GiB could fit
        // in bytes, so no block fitting it is fragmentation; one block more is not.
        long request = 2 * GiB;
        assertThat(kind(oneSegment(4 * GiB, GiB)
                        .oom(new OomEvent(request, GiB, 0, 1))
                        .build()))
                .isEqualTo(DiagnosisKind.FRAGMENTATION);
        assertThat(kind(oneSegment(4 * GiB, GiB)
                        .oom(new OomEvent(request + BLOCK, GiB, 0, 1))
                        .build()))
                .isEqualTo(DiagnosisKind.LIVE_TENSORS);
    }

    @Test
    void anOomBlamesOutsideMemoryFromFivePercentOfCapacityWhenItCoversWhatIsMissing() {
        // Capacity 20 GiB, 18 GiB reserved and allocated, 1 GiB driver free: 1 GiB (5%) is held outside.
        long capacity = 20 * GiB;
        MemoryState.Builder atBound = oneSegment(18 * GiB, 0).capacity(capacity);
        // Missing exactly the outside 1 GiB: outside memory; a block more than it covers: live tensors.
        assertThat(kind(atBound.oom(new OomEvent(2 * GiB, GiB, 0, 1)).build())).isEqualTo(DiagnosisKind.OUTSIDE_MEMORY);
        assertThat(kind(oneSegment(18 * GiB, 0)
                        .capacity(capacity)
                        .oom(new OomEvent(2 * GiB + BLOCK, GiB, 0, 1))
                        .build()))
                .isEqualTo(DiagnosisKind.LIVE_TENSORS);
        // A block less than 5% held outside: live tensors, though it would cover what is missing.
        assertThat(kind(oneSegment(18 * GiB + BLOCK, 0)
                        .capacity(capacity)
                        .oom(new OomEvent(2 * GiB - BLOCK, GiB, 0, 1))
                        .build()))
                .isEqualTo(DiagnosisKind.LIVE_TENSORS);
    }

    @Test
    void withoutAnOomAStateIsDiagnosedFromNinetyPercentOfCapacityInUse() {
        // 9 GiB allocated of 10 GiB with 1 GiB driver free: exactly 90% used; a block more driver free: below.
        assertThat(kind(oneSegment(9 * GiB, 0)
                        .capacity(10 * GiB)
                        .deviceFree(GiB)
                        .build()))
                .isNotEqualTo(DiagnosisKind.NONE);
        assertThat(kind(oneSegment(9 * GiB - BLOCK, 0)
                        .capacity(10 * GiB)
                        .deviceFree(GiB + BLOCK)
                        .build()))
                .isEqualTo(DiagnosisKind.NONE);
    }

    /** 10 GiB reserved in one segment: live, {@code pinned} bytes free, live; 11 GiB capacity, none of it free. */
    private static MemoryState pinnedBetweenLiveBlocks(long pinned) {
        long live = 4 * GiB + GiB / 2;
        return MemoryState.builder()
                .capacity(11 * GiB)
                .deviceFree(0)
                .segment(seg(
                        GiB,
                        Pool.LARGE,
                        0,
                        false,
                        live,
                        BlockState.ACTIVE_ALLOCATED,
                        pinned,
                        BlockState.INACTIVE,
                        live + (GiB - pinned),
                        BlockState.ACTIVE_ALLOCATED))
                .build();
    }

    @Test
    void nearCapacityPinnedFreeBytesFromTenPercentOfReservedAreFragmentation() {
        // 10 GiB reserved: live, 1 GiB free pinned between live blocks, live; 11 GiB capacity, none free.
        assertThat(kind(pinnedBetweenLiveBlocks(GiB))).isEqualTo(DiagnosisKind.FRAGMENTATION);
        // A block less pinned (the same reserved): not fragmentation; the 1 GiB outside (9% of capacity) decides.
        assertThat(kind(pinnedBetweenLiveBlocks(GiB - BLOCK))).isEqualTo(DiagnosisKind.OUTSIDE_MEMORY);
    }

    @Test
    void nearCapacityOutsideMemoryFromFivePercentOfCapacity() {
        // 20 GiB capacity, none free: 19 GiB reserved leaves exactly 1 GiB (5%) outside; a block more reserved: less.
        assertThat(kind(oneSegment(19 * GiB, 0).capacity(20 * GiB).deviceFree(0).build()))
                .isEqualTo(DiagnosisKind.OUTSIDE_MEMORY);
        assertThat(kind(oneSegment(19 * GiB + BLOCK, 0)
                        .capacity(20 * GiB)
                        .deviceFree(0)
                        .build()))
                .isEqualTo(DiagnosisKind.LIVE_TENSORS);
    }
}
