package io.gpumem.engine;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.alloc.CachingAllocator;
import io.gpumem.alloc.Pool;
import io.gpumem.alloc.SegmentRestorer;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.history.BlockInfo;
import io.gpumem.history.BlockState;
import io.gpumem.history.SegmentInfo;
import io.gpumem.policy.PolicyRegistry;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.LongUnaryOperator;
import org.junit.jupiter.api.Test;

/**
 * Loading a rebuilt start state into a fresh exact allocator where the device chooses the addresses (what a what-if
 * replay of a trace window does): each segment comes back block for block, the returned shifts say where, wholly
 * free segments yield to live ones on a device too small for both, expandable runs of one stream and pool share one
 * reservation, and a segment the allocator refuses is named.
 */
class StartStateLoaderTest {
    private static final long MIB = 1L << 20;
    private static final long A = 0x5a0000000000L;
    private static final long B = 0x5a0040000000L;

    private static SimulatedDevice device(long capacity) {
        return SimulatedDevice.builder().capacity(capacity).build();
    }

    private static SegmentRestorer restorer(CachingAllocator allocator) {
        return (SegmentRestorer) allocator.internals();
    }

    private static BlockInfo live(long address, long size, long requested) {
        return BlockInfo.of(address, size, requested, BlockState.ACTIVE_ALLOCATED);
    }

    private static BlockInfo free(long address, long size, long requested) {
        return BlockInfo.of(address, size, requested, BlockState.INACTIVE);
    }

    private static SegmentInfo segment(long address, long stream, Pool pool, boolean expandable, BlockInfo... blocks) {
        return SegmentInfo.ofBlocks(0, address, stream, pool, expandable, List.of(blocks));
    }

    /** The allocator's segment at {@code address}, or null. */
    private static SegmentInfo modelSegmentAt(CachingAllocator allocator, long address) {
        for (SegmentInfo s : allocator.snapshot().segments()) {
            if (s.address() == address) {
                return s;
            }
        }
        return null;
    }

    /** The recorded segment's blocks as (offset, size, state, requested) rows, to compare wherever it was placed. */
    private static List<String> layout(SegmentInfo s) {
        List<String> rows = new ArrayList<>();
        for (BlockInfo b : s.blocks()) {
            rows.add((b.address() - s.address()) + " " + b.size() + " " + b.state() + " " + b.requestedSize());
        }
        return rows;
    }

    @Test
    void classicSegmentsComeBackBlockForBlockWhereTheShiftsSay() {
        SimulatedDevice dev = device(1L << 30);
        CachingAllocator allocator = new CachingAllocator(dev, AllocatorConfig.defaults());
        SegmentInfo large = segment(
                A, 0, Pool.LARGE, false, live(A, 12 * MIB, 12 * MIB - 100), free(A + 12 * MIB, 28 * MIB, 7 * MIB));
        SegmentInfo small = segment(B, 0, Pool.SMALL, false, live(B, 512, 100), free(B + 512, 2 * MIB - 512, 0));

        long[] shifts = StartStateLoader.load(
                restorer(allocator), dev, List.of(large, small), null, false, LongUnaryOperator.identity());

        assertThat(shifts).hasSize(2);
        assertThat(allocator.snapshot().segments()).hasSize(2);
        for (int i = 0; i < 2; i++) {
            SegmentInfo recorded = List.of(large, small).get(i);
            SegmentInfo model = modelSegmentAt(allocator, recorded.address() + shifts[i]);
            assertThat(model).as("segment %d at its shifted address", i).isNotNull();
            assertThat(model.totalSize()).isEqualTo(recorded.totalSize());
            assertThat(model.pool()).isEqualTo(recorded.pool());
            assertThat(model.expandable()).isFalse();
            assertThat(layout(model)).isEqualTo(layout(recorded));
        }
        // the restored live blocks are the allocator's: freeing one merges it with the free remainder
        allocator.free(large.address() + shifts[0]);
        assertThat(modelSegmentAt(allocator, large.address() + shifts[0]).blocks())
                .hasSize(1);
        assertThat(allocator.stats().reservedBytes()).isEqualTo(40 * MIB + 2 * MIB);
    }

    @Test
    void whollyFreeSegmentsAreRestoredLastAndLeftOutWhenTheDeviceHasNoRoomForThem() {
        SegmentInfo cached = segment(A, 0, Pool.LARGE, false, free(A, 40 * MIB, 40 * MIB));
        SegmentInfo held =
                segment(B, 0, Pool.LARGE, false, live(B, 12 * MIB, 12 * MIB), free(B + 12 * MIB, 28 * MIB, 0));

        // room for one: the live segment is restored although it comes second, the cached one is released
        SimulatedDevice tight = device(64 * MIB);
        CachingAllocator small = new CachingAllocator(tight, AllocatorConfig.defaults());
        long[] shifts = StartStateLoader.load(
                restorer(small), tight, List.of(cached, held), null, false, LongUnaryOperator.identity());
        assertThat(small.snapshot().segments()).hasSize(1);
        SegmentInfo kept = modelSegmentAt(small, B + shifts[1]);
        assertThat(kept).isNotNull();
        assertThat(layout(kept)).isEqualTo(layout(held));
        assertThat(shifts[0]).isZero();

        // room for both: both come back
        SimulatedDevice roomy = device(1L << 30);
        CachingAllocator large = new CachingAllocator(roomy, AllocatorConfig.defaults());
        StartStateLoader.load(restorer(large), roomy, List.of(cached, held), null, false, LongUnaryOperator.identity());
        assertThat(large.snapshot().segments())
                .extracting(SegmentInfo::totalSize)
                .containsOnly(40 * MIB);
        assertThat(large.stats().reservedBytes()).isEqualTo(80 * MIB);
    }

    /**
     * A wholly free classic segment yields to a live expandable run as it does to a live classic segment: restored
     * after the runs, it is left out where the device has room for the run alone (it was restored first and took that
     * room, and the run's restore failed the whole replay).
     */
    @Test
    void whollyFreeSegmentsYieldToLiveExpandableRunsToo() {
        SegmentInfo cached = segment(A, 0, Pool.LARGE, false, free(A, 40 * MIB, 40 * MIB));
        SegmentInfo run = segment(B, 0, Pool.LARGE, true, live(B, 20 * MIB, 20 * MIB));
        SimulatedDevice tight = device(50 * MIB);
        CachingAllocator allocator = new CachingAllocator(tight, AllocatorConfig.parse("expandable_segments:True"));

        long[] shifts = StartStateLoader.load(
                restorer(allocator), tight, List.of(cached, run), null, false, LongUnaryOperator.identity());

        assertThat(shifts).hasSize(2);
        assertThat(allocator.stats().reservedBytes()).isEqualTo(20 * MIB);
        assertThat(allocator.stats().allocatedBytes()).isEqualTo(20 * MIB);
        // and a runner starts such a window on that device: its one request, the run's free, fails nothing
        RequestStream.Builder b = RequestStream.builder().startState(List.of(cached, run));
        b.free(0, 0);
        RunOutcome o = new StreamRunner(b.build())
                .run(
                        PolicyRegistry.exact(AllocatorConfig.parse("expandable_segments:True")),
                        RunOptions.builder(50 * MIB).build());
        assertThat(o.ooms()).isZero();
    }

    @Test
    void expandableRunsOfOneStreamAndPoolShareOneReservationUnlessRestoredAsClassic() {
        long page = 20 * MIB;
        long gap = 3 * page;
        SegmentInfo first =
                segment(A, 0, Pool.LARGE, true, live(A, 30 * MIB, 30 * MIB), free(A + 30 * MIB, 10 * MIB, 0));
        long second = A + 2 * page + gap;
        SegmentInfo later = segment(second, 0, Pool.LARGE, true, live(second, page, page));
        // listed out of order: runs are laid out by address
        List<SegmentInfo> start = List.of(later, first);

        SimulatedDevice dev = device(1L << 30);
        CachingAllocator allocator = new CachingAllocator(dev, AllocatorConfig.parse("expandable_segments:True"));
        long[] shifts =
                StartStateLoader.load(restorer(allocator), dev, start, null, false, LongUnaryOperator.identity());
        assertThat(shifts[0]).as("one reservation: one shift").isEqualTo(shifts[1]);
        SegmentInfo a = modelSegmentAt(allocator, A + shifts[1]);
        SegmentInfo b = modelSegmentAt(allocator, second + shifts[0]);
        assertThat(a).isNotNull();
        assertThat(b).isNotNull();
        assertThat(a.expandable()).isTrue();
        assertThat(layout(a)).isEqualTo(layout(first));
        assertThat(layout(b)).isEqualTo(layout(later));
        // only the runs are mapped: the gap between them and the rest of the reservation are not
        assertThat(allocator.stats().reservedBytes()).isEqualTo(3 * page);
        assertThat(allocator.snapshot().segments()).hasSize(2);

        SimulatedDevice dev2 = device(1L << 30);
        CachingAllocator classic = new CachingAllocator(dev2, AllocatorConfig.defaults());
        long[] classicShifts =
                StartStateLoader.load(restorer(classic), dev2, start, null, true, LongUnaryOperator.identity());
        SegmentInfo c = modelSegmentAt(classic, A + classicShifts[1]);
        assertThat(c).isNotNull();
        assertThat(c.expandable()).isFalse();
        assertThat(layout(c)).isEqualTo(layout(first));
        assertThat(modelSegmentAt(classic, second + classicShifts[0]).expandable())
                .isFalse();
    }

    /**
     * On a device without virtual memory the allocator ignores {@code expandable_segments} (as PyTorch does), says
     * so to the loader, and a start state's expandable runs load as classic segments, as the runner loads them.
     */
    @Test
    void expandableRunsLoadAsClassicWhereTheDeviceHasNoVirtualMemory() {
        long page = 20 * MIB;
        List<SegmentInfo> start = List.of(segment(A, 0, Pool.LARGE, true, live(A, page, page)));
        SimulatedDevice dev = SimulatedDevice.builder()
                .capacity(1L << 30)
                .virtualMemory(false)
                .build();
        CachingAllocator allocator = new CachingAllocator(dev, AllocatorConfig.parse("expandable_segments:True"));
        SegmentRestorer restorer = restorer(allocator);
        assertThat(restorer.expandableSegments()).isFalse();
        long[] shifts = StartStateLoader.load(
                restorer, dev, start, null, !restorer.expandableSegments(), LongUnaryOperator.identity());
        SegmentInfo loaded = modelSegmentAt(allocator, A + shifts[0]);
        assertThat(loaded).isNotNull();
        assertThat(loaded.expandable()).isFalse();
        assertThat(layout(loaded)).isEqualTo(layout(start.getFirst()));
        allocator.internals().checkInvariants();
    }

    /**
     * The reservation has PyTorch's default size, 9/8 of the device's memory in whole pages (180 MiB on a 160 MiB
     * device), starting at the lowest run: two live pages at offsets 0 and 60 MiB leave a 40 MiB unmapped gap and a
     * 100 MiB unmapped tail. A 100 MiB request maps the tail; a 120 MiB one fits neither and gets a new reservation.
     */
    @Test
    void anExpandableReservationHasPyTorchsDefaultSizeAndRequestsGrowIntoItsTail() {
        long page = 20 * MIB;
        long second = A + 3 * page;
        List<SegmentInfo> start = List.of(
                segment(A, 0, Pool.LARGE, true, live(A, page, page)),
                segment(second, 0, Pool.LARGE, true, live(second, page, page)));
        for (long request : new long[] {100 * MIB, 120 * MIB}) {
            SimulatedDevice dev = device(160 * MIB);
            CachingAllocator allocator = new CachingAllocator(dev, AllocatorConfig.parse("expandable_segments:True"));
            long base = A
                    + StartStateLoader.load(restorer(allocator), dev, start, null, false, LongUnaryOperator.identity())[
                            0];
            long got = allocator.malloc(request, 0);
            if (request == 100 * MIB) {
                assertThat(got).as("mapped at the tail, after the second run").isEqualTo(base + 4 * page);
            } else {
                assertThat(got)
                        .as("outside the reservation [base, base + 180 MiB)")
                        .satisfiesAnyOf(
                                g -> assertThat(g).isLessThan(base),
                                g -> assertThat(g).isGreaterThanOrEqualTo(base + 9 * page));
            }
        }
    }

    @Test
    void theStreamsAreMappedAsTheCallerSays() {
        SimulatedDevice dev = device(1L << 30);
        long deviceStream = dev.createStream();
        CachingAllocator allocator = new CachingAllocator(dev, AllocatorConfig.defaults());
        SegmentInfo seg = segment(A, 77, Pool.LARGE, false, live(A, 12 * MIB, 12 * MIB));
        long[] shifts = StartStateLoader.load(restorer(allocator), dev, List.of(seg), null, false, h -> {
            assertThat(h).isEqualTo(77);
            return deviceStream;
        });
        assertThat(modelSegmentAt(allocator, A + shifts[0]).stream()).isEqualTo(deviceStream);
    }

    @Test
    void aSegmentWhoseBlocksDoNotAddUpIsNamedInTheError() {
        SimulatedDevice dev = device(1L << 30);
        CachingAllocator allocator = new CachingAllocator(dev, AllocatorConfig.defaults());
        SegmentInfo good = segment(B, 0, Pool.LARGE, false, live(B, 12 * MIB, 12 * MIB));
        SegmentInfo bad = new SegmentInfo(
                0,
                A,
                40 * MIB,
                12 * MIB,
                12 * MIB,
                12 * MIB,
                0,
                Pool.LARGE,
                false,
                List.of(),
                List.of(live(A, 12 * MIB, 1)),
                null,
                null);

        assertThatThrownBy(() -> StartStateLoader.load(
                        restorer(allocator), dev, List.of(good, bad), null, false, LongUnaryOperator.identity()))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("segment at 0x5a0000000000 (41943040 bytes)");
    }

    private static final long TOTAL = 1L << 40;
    /** PyTorch's large-pool reservation on a 1 TiB device: ceil(1.125 TiB / 20 MiB) pages of 20 MiB. */
    private static final long LARGE_RESERVATION = 20 * MIB * ((TOTAL * 9 / 8 + 20 * MIB - 1) / (20 * MIB));

    private static List<SegmentInfo> run(long address, long pages) {
        long size = pages * 20 * MIB;
        return List.of(SegmentInfo.ofBlocks(
                0,
                address,
                0,
                Pool.LARGE,
                true,
                List.of(BlockInfo.of(address, size, size, BlockState.ACTIVE_ALLOCATED))));
    }

    @Test
    void aLowerReservationWhoseFirstPagesAreUnmappedEndsWhereTheNextBegins() {
        long base = 0x2000_0000_0000L;
        long[] bases = StartStateLoader.reservationBases(
                List.of(run(base + 60 * MIB, 2), run(base + LARGE_RESERVATION, 1)), TOTAL);
        assertThat(bases).containsExactly(base, base + LARGE_RESERVATION);
    }

    @Test
    void anUpperReservationWhoseFirstPagesAreUnmappedBeginsWhereTheLowerEnds() {
        long base = 0x2000_0000_0000L;
        long[] bases = StartStateLoader.reservationBases(
                List.of(run(base, 1), run(base + LARGE_RESERVATION + 3 * 20 * MIB, 2)), TOTAL);
        assertThat(bases).containsExactly(base, base + LARGE_RESERVATION);
    }

    @Test
    void aReservationMadeLaterInARangeGivenBackIsALinkOfTheChain() {
        long base = 0x2000_0000_0000L;
        // the middle reservation was given back before the start and is made again later: the lower one ends there
        long[] bases = StartStateLoader.reservationBases(
                List.of(run(base + 60 * MIB, 2), run(base + 2 * LARGE_RESERVATION, 1)),
                TOTAL,
                Map.of(base + LARGE_RESERVATION, Pool.LARGE),
                Map.of(),
                Map.of());
        assertThat(bases).containsExactly(base, base + 2 * LARGE_RESERVATION);
    }

    @Test
    void aReservationTheRecordingMapsAboveItsHighestRunDoesNotEndThere() {
        long base = 0x2000_0000_0000L;
        // Without the reach the upper group can just follow the lower one, its reservation ending at its run's end
        // (the chain of two with no room to spare). The recording maps the page above that run, so the reservation
        // reaches past it: the reservation given back between the two (which the window never shows) is a gap, and
        // the upper reservation starts at its run.
        long lower = base + 3 * 20 * MIB;
        long upper = lower + 2 * LARGE_RESERVATION - 20 * MIB; // its one-page run ends two reservations above lower
        List<List<SegmentInfo>> groups = List.of(run(lower, 2), run(upper, 1));
        assertThat(StartStateLoader.reservationBases(groups, TOTAL)).containsExactly(lower, lower + LARGE_RESERVATION);
        long[] bases = StartStateLoader.reservationBases(
                groups, TOTAL, Map.of(), Map.of(upper, upper + 2 * 20 * MIB), Map.of());
        assertThat(bases).containsExactly(lower, upper);
    }

    @Test
    void aReservationTheRecordingMapsBelowItsLowestRunDoesNotBeginThere() {
        long base = 0x2000_0000_0000L;
        // The upper run lies too far above the lower reservation to follow it (a reservation given back between the
        // two, which the window never shows), so its reservation starts a chain of its own, at its run. The recording
        // maps pages below that run in the same reservation (ring-window seed 5002691: the replay mapped at the run
        // where PyTorch mapped below it), so the reservation begins at or below them.
        long upperBase = base + 2 * LARGE_RESERVATION;
        long upper = upperBase + 9 * 20 * MIB;
        List<List<SegmentInfo>> groups = List.of(run(base, 1), run(upper, 2));
        assertThat(StartStateLoader.reservationBases(groups, TOTAL)).containsExactly(base, upper);
        long[] bases = StartStateLoader.reservationBases(groups, TOTAL, Map.of(), Map.of(), Map.of(upper, upperBase));
        assertThat(bases).containsExactly(base, upperBase);
    }

    @Test
    void aChainBaseBelowTheLowestRunIsTheHighestOnEveryGroupsPageGrid() {
        long base = 0x2000_0000_0000L;
        long smallReservation = 2 * MIB * ((TOTAL * 9 / 8 + 2 * MIB - 1) / (2 * MIB));
        // the small-pool reservation's first page (2 MiB) was unmapped: its lowest run is one small page up, while the
        // large-pool run above lies five large pages into its reservation, which only the base a page lower puts on
        // the large grid
        SegmentInfo small = SegmentInfo.ofBlocks(
                0,
                base + 2 * MIB,
                0,
                Pool.SMALL,
                true,
                List.of(BlockInfo.of(base + 2 * MIB, 2 * MIB, 4096, BlockState.ACTIVE_ALLOCATED)));
        long[] bases = StartStateLoader.reservationBases(
                List.of(List.of(small), run(base + smallReservation + 5 * 20 * MIB, 1)), TOTAL);
        assertThat(bases).containsExactly(base, base + smallReservation);
    }

    @Test
    void aReservationOffTheLowerOnesPageGridStartsAChainOfItsOwn() {
        long base = 0x2000_0000_0000L;
        long upper = base + LARGE_RESERVATION + 4 * MIB; // not a whole number of pages from where the lower ends
        long[] bases = StartStateLoader.reservationBases(List.of(run(base, 1), run(upper, 1)), TOTAL);
        assertThat(bases).containsExactly(base, upper);
    }
}
