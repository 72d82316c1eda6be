package io.gpumem.trace.analysis;

import static io.gpumem.testing.TestSizes.GiB;
import static io.gpumem.testing.TestSizes.MiB;
import static io.gpumem.trace.analysis.StateAnalyzerTest.seg;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.alloc.CachingAllocator;
import io.gpumem.alloc.Pool;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.history.BlockState;
import io.gpumem.history.HistoryOptions;
import io.gpumem.oom.OutOfMemoryException;
import io.gpumem.trace.io.AllocatorSnapshots;
import io.gpumem.trace.io.TraceSnapshot;
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

    /** The end state of a device of {@code capacity} with {@code live} bytes allocated after a request failed. */
    private static StateAnalysis afterFailedRequest(long capacity, long live, long request) {
        SimulatedDevice device = SimulatedDevice.withCapacity(capacity);
        CachingAllocator allocator = new CachingAllocator(device, AllocatorConfig.parse(""));
        allocator.recordHistory(HistoryOptions.all());
        allocator.malloc(live, 0);
        assertThatThrownBy(() -> allocator.malloc(request, 0)).isInstanceOf(OutOfMemoryException.class);
        TraceSnapshot trace = AllocatorSnapshots.toTraceSnapshot(allocator.snapshot(), "failed request");
        return new StateAnalyzer().analyze(SnapshotStates.endState(trace, 0, capacity));
    }

    @Test
    void anOomWhoseNewSegmentExceedsDriverFreeIsNotFragmentationWithNothingCached() {
        // 24 MiB live on 32 MiB: the 2 MiB request needs a 20 MiB segment and the driver has 8 MiB. Nothing is cached,
        // so no block can be too small: live tensors must shrink by the 12 MiB the segment lacks.
        StateAnalysis a = afterFailedRequest(32 * MiB, 24 * MiB, 2 * MiB);
        assertThat(a.all().unallocated()).isZero();
        assertThat(a.diagnosis().kind()).isEqualTo(DiagnosisKind.LIVE_TENSORS);
        assertThat(a.diagnosis().shortfall()).isEqualTo(12 * MiB);
    }

    @Test
    void anOomIsFragmentationOnlyWhenSomethingIsCached() {
        // driver free alone covers the request (2 MiB free, a 512-byte small request): bytes exist, but none cached
        assertThat(kind(oneSegment(4 * GiB, 0)
                        .oom(new OomEvent(BLOCK, 2 * MiB, 0, 1))
                        .build()))
                .isEqualTo(DiagnosisKind.LIVE_TENSORS);
        assertThat(kind(oneSegment(4 * GiB - BLOCK, BLOCK)
                        .oom(new OomEvent(BLOCK, 2 * MiB, 0, 1))
                        .build()))
                .isEqualTo(DiagnosisKind.FRAGMENTATION);
    }

    @Test
    void aRequestLargerThanTheDeviceIsTooLargeAndNoShrinkingOfLiveTensorsIsRecommended() {
        // 4 MiB live on a 1 GiB device, a 2 GiB request: it would fail with nothing live.
        StateAnalysis a = afterFailedRequest(GiB, 4 * MiB, 2 * GiB);
        assertThat(a.diagnosis().kind()).isEqualTo(DiagnosisKind.REQUEST_TOO_LARGE);
        assertThat(a.diagnosis().shortfall()).isEqualTo(GiB); // 2 GiB less reserved + driver free (the 1 GiB device)
        assertThat(a.diagnosis().evidence()).anyMatch(e -> e.contains("it would fail with no tensor live"));
        Recommender.Result r = new Recommender().recommend(a, null);
        assertThat(r.recommendations()).noneMatch(rec -> rec.action().contains("live tensors"));
        assertThat(r.recommendations())
                .anyMatch(rec -> rec.action().startsWith("make the failed request smaller by at least 1024.00 MiB"));
    }

    @Test
    void aRequestPastCapacityLessOutsideMemoryIsTooLargeAndFreeingTheOutsideIsRecommended() {
        // 20 GiB device, 10 GiB held outside, 1 GiB reserved and live, 9 GiB driver free: a 12 GiB request fits
        // only once the outside memory is freed, whatever the live tensors.
        StateAnalysis a = new StateAnalyzer()
                .analyze(oneSegment(GiB, 0)
                        .capacity(20 * GiB)
                        .oom(new OomEvent(12 * GiB, 9 * GiB, 0, 1))
                        .build());
        assertThat(a.diagnosis().kind()).isEqualTo(DiagnosisKind.REQUEST_TOO_LARGE);
        assertThat(a.diagnosis().shortfall()).isEqualTo(2 * GiB);
        assertThat(new Recommender().recommend(a, null).recommendations())
                .extracting(Recommendation::action)
                .noneMatch(action -> action.contains("live tensors"))
                .anyMatch(action -> action.startsWith("free memory held outside the allocator"));
    }
}
