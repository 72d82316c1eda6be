package io.gpumem.trace.replay;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.alloc.CachingAllocator;
import io.gpumem.alloc.Pool;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.history.HistoryOptions;
import io.gpumem.history.MemorySnapshot;
import io.gpumem.history.SegmentInfo;
import io.gpumem.trace.io.AllocatorSnapshots;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.window.WindowRebuilder;
import io.gpumem.trace.window.WindowStart;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * Expandable segments on two streams, with the first pages of the lower reservation unmapped before the window
 * opens: its lowest mapped run at the start is above its base. The start state used to be restored with the
 * reservation starting at that run, which then reached into the next reservation, and the replay stopped with
 * "device reserved ... instead of the restored segment address". Reservations are handed out one after another, so
 * the lower one ends where the next begins. And a reservation wholly unmapped in the window is given back, and the
 * range handed to another stream's next reservation: the rebuild must give the unmapped run its own stream and the
 * pool of the reservation that reused the range (the same size, so the same pool), not the pool of the stream's
 * nearest run.
 */
class ExpandableReservationBaseTest {

    private static final long MiB = 1L << 20;
    private static final long DEVICE_MEMORY = 1L << 40;
    private static final AllocatorConfig CONFIG = AllocatorConfig.parse("expandable_segments:True");

    /** A fresh device and allocator per test (JUnit makes an instance per test), recording its history. */
    private final SimulatedDevice device = SimulatedDevice.withCapacity(DEVICE_MEMORY);

    private final CachingAllocator a = new CachingAllocator(device, CONFIG);

    ExpandableReservationBaseTest() {
        a.recordHistory(HistoryOptions.all(1 << 12));
    }

    @Test
    void aReservationWhoseFirstPagesWereUnmappedBeforeTheWindowIsRestoredAtItsBase() {
        long s1 = device.createStream();
        long front = a.malloc(60 * MiB, 0); // stream 0's reservation, pages 0-2
        long kept = a.malloc(30 * MiB, 0); // pages 3-4
        long other = a.malloc(50 * MiB, s1); // stream 1's reservation, above stream 0's
        a.free(front);
        a.emptyCache(); // unmaps pages 0-2 of stream 0's reservation
        int windowFrom = a.snapshot().deviceTraces().get(0).size();
        long more = a.malloc(10 * MiB, s1);
        long again = a.malloc(50 * MiB, 0); // maps pages of stream 0's reservation again
        a.free(kept);
        a.free(more);
        MemorySnapshot end = a.snapshot();
        assertThat(again).isLessThan(kept);
        assertReplaysExactly(windowFrom(end, windowFrom));
        assertThat(other).isGreaterThan(kept);
    }

    @Test
    void aRangeUnmappedInTheWindowAndThenReservedByAnotherStreamKeepsItsPool() {
        long s1 = device.createStream();
        long s2 = device.createStream();
        long small = a.malloc(4096, s1); // stream 1's small-pool reservation, kept live
        a.free(a.malloc(40 * MiB, s1)); // stream 1's large-pool reservation: two pages, cached free
        int windowFrom = a.snapshot().deviceTraces().get(0).size();
        a.emptyCache(); // unmaps them: the reservation, wholly unmapped, is given back
        long other = a.malloc(30 * MiB, s2); // stream 2's new reservation gets the same range
        MemorySnapshot end = a.snapshot();
        TraceSnapshot s = windowFrom(end, windowFrom);

        WindowStart start = new WindowRebuilder(CONFIG).rebuild(s, 0);
        assertThat(start.segments())
                .filteredOn(seg -> seg.address() == other)
                .singleElement()
                .satisfies(seg -> {
                    assertThat(seg.stream()).isEqualTo(s1);
                    assertThat(seg.pool()).isEqualTo(Pool.LARGE);
                    assertThat(seg.totalSize()).isEqualTo(40 * MiB);
                });
        assertReplaysExactly(s);
        assertThat(small).isNotZero();
    }

    @Test
    void aReservationMadeAndGivenBackInTheWindowLeavesNothingAtTheStart() {
        long s1 = device.createStream();
        long small = a.malloc(4096, s1); // stream 1's small-pool reservation, kept live
        int windowFrom = a.snapshot().deviceTraces().get(0).size();
        long large = a.malloc(40 * MiB, s1); // stream 1's large-pool reservation, made in the window
        a.free(large);
        a.emptyCache(); // unmaps its two pages: the reservation is given back, and nothing maps the range again
        MemorySnapshot end = a.snapshot();
        TraceSnapshot s = windowFrom(end, windowFrom);

        // The unmap is undone into the pool that mapped the range (large), where the map is undone too: the stream's
        // small run nearby is no reason to put the range in the small pool, where it outlived its map.
        WindowStart start = new WindowRebuilder(CONFIG).rebuild(s, 0);
        assertThat(start.segments()).extracting(SegmentInfo::address).containsExactly(small);
        assertReplaysExactly(s);
    }

    @Test
    void aReservationGivenBackBeforeTheWindowAndReusedInItBoundsTheOneBelow() {
        long s1 = device.createStream();
        long s2 = device.createStream();
        long front = a.malloc(60 * MiB, 0); // stream 0's reservation, pages 0-2
        long kept = a.malloc(30 * MiB, 0); // pages 3-4
        long given = a.malloc(20 * MiB, s1); // stream 1's reservation, the next one up
        long top = a.malloc(20 * MiB, s2); // stream 2's, above it
        a.free(front);
        a.free(given);
        a.emptyCache(); // unmaps stream 0's first pages, and all of stream 1's: that reservation is given back
        int windowFrom = a.snapshot().deviceTraces().get(0).size();
        long reused = a.malloc(20 * MiB, s1); // a new reservation for stream 1, in the range given back
        MemorySnapshot end = a.snapshot();
        assertThat(reused).isEqualTo(given);
        TraceSnapshot s = windowFrom(end, windowFrom);

        // Stream 0's reservation starts below its lowest run at the start and ends where the reused range begins:
        // placed at that run, it reached into the range, and the window's new reservation could not be made there.
        WindowStart start = new WindowRebuilder(CONFIG).rebuild(s, 0);
        assertThat(start.reservationsMadeInWindow()).containsExactly(Map.entry(given, Pool.LARGE));
        assertReplaysExactly(s);
        assertThat(top).isGreaterThan(kept);
    }

    @Test
    void aReservationGivenBackInTheWindowAndMadeAgainInItsRangeKeepsItsBase() {
        long s1 = device.createStream();
        long front = a.malloc(20 * MiB, s1); // stream 1's reservation (the highest), page 0
        long kept = a.malloc(20 * MiB, s1); // page 1
        a.free(front);
        a.emptyCache(); // unmaps page 0: at the start, the reservation's lowest run is page 1
        int windowFrom = a.snapshot().deviceTraces().get(0).size();
        long low = a.malloc(20 * MiB, s1); // maps page 0 again, in front of the run
        a.free(low);
        a.free(kept);
        a.emptyCache(); // unmaps pages 0 and 1: the reservation is given back
        long again = a.malloc(20 * MiB, s1); // a new reservation for stream 1, in the range given back
        MemorySnapshot end = a.snapshot();
        assertThat(low).isEqualTo(front);
        assertThat(again).isEqualTo(front);
        TraceSnapshot s = windowFrom(end, windowFrom);

        // The reservation the window makes is no free range between the start's: it is the start reservation's own
        // range, made again whole, and so its base, below its lowest run.
        WindowStart start = new WindowRebuilder(CONFIG).rebuild(s, 0);
        assertThat(start.reservationsMadeInWindow()).containsExactly(Map.entry(front, Pool.LARGE));
        assertReplaysExactly(s);
    }

    @Test
    void aFreeRunOfAReservationGivenBackInTheWindowTakesThePoolItsPagesSay() {
        long small =
                a.malloc(4096, 0); // stream 0's small-pool reservation, kept live: the stream's only run at the end
        long low = a.malloc(40 * MiB, 0); // stream 0's large-pool reservation, pages 0-1
        long gap = a.malloc(20 * MiB, 0); // page 2
        long high = a.malloc(60 * MiB, 0); // pages 3-5
        a.free(gap);
        a.emptyCache(); // unmaps page 2
        a.free(high); // pages 3-5 cached: a wholly free run at the start, apart from the run of pages 0-1
        int windowFrom = a.snapshot().deviceTraces().get(0).size();
        a.free(low);
        a.emptyCache(); // unmaps pages 0-1 and 3-5: the reservation is given back, and nothing maps them again
        MemorySnapshot end = a.snapshot();
        TraceSnapshot s = windowFrom(end, windowFrom);

        // Nothing in the window maps the free run, and no block shows its pool: the stream's small run, far off in
        // another reservation, is no reason to put it in the small pool; whole 20 MiB pages say the large one.
        WindowStart start = new WindowRebuilder(CONFIG).rebuild(s, 0);
        assertThat(start.segments())
                .filteredOn(seg -> seg.address() == high)
                .singleElement()
                .satisfies(seg -> assertThat(seg.pool()).isEqualTo(Pool.LARGE));
        assertReplaysExactly(s);
        assertThat(small).isLessThan(low);
    }

    /** The recording {@code end} as a history ring would have kept it from entry {@code from} on. */
    @Test
    void aReservationTheWindowGrowsIsNotPlacedToEndAtItsRun() {
        long s1 = device.createStream();
        long s2 = device.createStream();
        long front = a.malloc(20 * MiB, 0); // stream 0's reservation, page 0
        long kept = a.malloc(20 * MiB, 0); // page 1
        long between = a.malloc(20 * MiB, s2); // stream 2's reservation, the next one up
        long grown = a.malloc(20 * MiB, s1); // stream 1's, above it: page 0
        a.free(front);
        a.free(between);
        a.emptyCache(); // unmaps stream 0's page 0, and all of stream 2's: that reservation is given back
        int windowFrom = a.snapshot().deviceTraces().get(0).size();
        long above = a.malloc(20 * MiB, s1); // maps stream 1's page 1, above its run
        MemorySnapshot end = a.snapshot();
        assertThat(above).isEqualTo(grown + 20 * MiB);
        TraceSnapshot s = windowFrom(end, windowFrom);

        // The window never shows stream 2's reservation. Without it, stream 1's could follow stream 0's, based a
        // page above stream 0's base and ending at its own run: the window's map would then be made at that
        // reservation's front. The map above the run says it reaches further, so it starts at its run.
        WindowStart start = new WindowRebuilder(CONFIG).rebuild(s, 0);
        assertThat(start.reservationReach()).containsExactly(Map.entry(grown, above + 20 * MiB));
        assertReplaysExactly(s);
        assertThat(kept).isLessThan(between);
    }

    @Test
    void aReservationTheWindowMapsBelowItsRunIsNotPlacedToBeginAtItsRun() {
        long s1 = device.createStream();
        long s2 = device.createStream();
        long front = a.malloc(20 * MiB, 0); // stream 0's reservation, page 0
        long between = a.malloc(20 * MiB, s2); // stream 2's reservation, the next one up
        long low = a.malloc(20 * MiB, s1); // stream 1's, above it: page 0
        long run = a.malloc(20 * MiB, s1); // page 1
        a.free(low);
        a.free(between);
        a.emptyCache(); // unmaps stream 1's page 0, and all of stream 2's: that reservation is given back
        int windowFrom = a.snapshot().deviceTraces().get(0).size();
        long below = a.malloc(20 * MiB, s1); // maps stream 1's page 0 again, below its run
        MemorySnapshot end = a.snapshot();
        assertThat(below).isEqualTo(low);
        TraceSnapshot s = windowFrom(end, windowFrom);

        // The window never shows stream 2's reservation, so stream 1's cannot follow stream 0's in one chain and
        // would begin at its run: the window's map would then be made above the run (ring-window seed 5002691). The
        // map below the run says the reservation begins lower.
        WindowStart start = new WindowRebuilder(CONFIG).rebuild(s, 0);
        assertThat(start.reservationFloor()).containsExactly(Map.entry(run, below));
        assertReplaysExactly(s);
        assertThat(front).isLessThan(between);
    }

    private static TraceSnapshot windowFrom(MemorySnapshot end, int from) {
        return AllocatorSnapshots.toTraceSnapshot(RingCut.from(end, from), "ring window");
    }

    private static void assertReplaysExactly(TraceSnapshot s) {
        DeviceFidelity f = new OracleReplay(DEVICE_MEMORY).check(s).devices().get(0);
        assertThat(f.notes()).as(f.toString()).noneMatch(n -> n.contains("stopped"));
        assertThat(f.firstMismatch()).as(f.toString()).isNull();
        assertThat(f.exact()).isEqualTo(f.allocs());
        assertThat(f.segmentMatched()).isEqualTo(f.segmentEvents());
        assertThat(f.endSegmentsSame()).isEqualTo(f.endSegments());
    }
}
