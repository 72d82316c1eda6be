package io.gpumem.trace.replay;

import static io.gpumem.testing.TestSizes.MiB;
import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.alloc.CachingAllocator;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.history.BlockInfo;
import io.gpumem.history.BlockState;
import io.gpumem.history.HistoryOptions;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.io.AllocatorSnapshots;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.window.RecordedConfig;
import java.util.List;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.Test;

/**
 * A written replay gives a start free block the stale requested size the recording shows for it after the window
 * unmapped its pages and mapped them again ({@link FreeBlockMarks#withRecordedStaleSizes}), which the rebuild's own
 * rule does not reach.
 *
 * <p>The window, recorded on gpumem's allocator with expandable segments (20 MiB pages): before it, a 20 MiB block
 * X and an 80 MiB block F are mapped at the base of a reservation and F is freed, so the start holds F's object free
 * at [20, 100) MiB with F's request, 80 MiB, as its stale value. The window's {@code empty_cache()} unmaps F's four
 * pages (F's object becomes the unmapped block), and a 30 MiB request maps two of them again: the mapped block, F's
 * object, serves the request from its low end and stays as the free remainder [50, 60) MiB, still showing 80 MiB.
 * No free block of the end state ends where F ended (100 MiB), so the rebuild gives F 0.
 */
class FreeBlockMarksTest {

    private static final long DEVICE_MEMORY = 1L << 36;
    private static final AllocatorConfig EXPANDABLE = AllocatorConfig.parse("expandable_segments:True");

    /** The recording described in the class comment; {@code base} is X's address, the reservation's base. */
    private record Recording(TraceSnapshot snapshot, long base) {}

    private static Recording unmappedAndMappedAgain() {
        SimulatedDevice device = SimulatedDevice.withCapacity(DEVICE_MEMORY);
        CachingAllocator a = new CachingAllocator(device, EXPANDABLE);
        long x = a.malloc(20 * MiB, 0);
        long f = a.malloc(80 * MiB, 0);
        assertThat(f).as("F right after X").isEqualTo(x + 20 * MiB);
        a.free(f);
        a.recordHistory(HistoryOptions.all(1 << 10)); // the window begins here
        a.emptyCache();
        long y = a.malloc(30 * MiB, 0);
        assertThat(y).as("the request served where F began").isEqualTo(f);
        return new Recording(AllocatorSnapshots.toTraceSnapshot(a.snapshot(), "unmapped and mapped again"), x);
    }

    private static @Nullable BlockInfo block(List<SegmentInfo> segments, long address) {
        for (SegmentInfo s : segments) {
            for (BlockInfo b : s.blocks()) {
                if (b.address() == address) {
                    return b;
                }
            }
        }
        return null;
    }

    @Test
    void theRecordingShowsTheStaleValueWhereTheRebuildCannotFindIt() {
        Recording r = unmappedAndMappedAgain();
        List<TraceAction> actions =
                r.snapshot().traceOf(0).stream().map(TraceEntry::action).toList();
        assertThat(actions).containsSubsequence(TraceAction.SEGMENT_UNMAP, TraceAction.SEGMENT_MAP, TraceAction.ALLOC);
        BlockInfo remainder = block(r.snapshot().segmentsOf(0), r.base() + 50 * MiB);
        assertThat(remainder).isNotNull();
        assertThat(remainder.size()).isEqualTo(10 * MiB);
        assertThat(remainder.state()).isEqualTo(BlockState.INACTIVE);
        assertThat(remainder.requestedSize()).as("F's stale value").isEqualTo(80 * MiB);

        OracleWindow window = OracleWindow.prepare(r.snapshot(), 0, RecordedConfig.of(r.snapshot()));
        BlockInfo rebuiltF = block(window.start().segments(), r.base() + 20 * MiB);
        assertThat(rebuiltF).isNotNull();
        assertThat(rebuiltF.size()).isEqualTo(80 * MiB);
        assertThat(rebuiltF.requestedSize())
                .as("the rebuild's rule: no end block ends where F ended")
                .isZero();

        OracleWindow refined = FreeBlockMarks.withRecordedStaleSizes(r.snapshot(), window, EXPANDABLE, DEVICE_MEMORY);
        BlockInfo refinedF = block(refined.start().segments(), r.base() + 20 * MiB);
        assertThat(refinedF).isNotNull();
        assertThat(refinedF.size()).isEqualTo(80 * MiB);
        assertThat(refinedF.requestedSize()).as("the value the marks found").isEqualTo(80 * MiB);
        assertThat(refined.start().segments().getFirst().blocks())
                .as("the live block untouched")
                .first()
                .isEqualTo(window.start().segments().getFirst().blocks().getFirst());
    }

    @Test
    void theWrittenSnapshotHasTheRecordedStaleValue() {
        Recording r = unmappedAndMappedAgain();
        OracleReplay replay = new OracleReplay(DEVICE_MEMORY).writeSnapshot(true);
        FidelityReport report = replay.check(r.snapshot());
        assertThat(report.isExact()).as(String.valueOf(report.firstMismatch())).isTrue();
        TraceSnapshot written = replay.replayedSnapshot();
        BlockInfo remainder = block(written.segmentsOf(0), r.base() + 50 * MiB);
        assertThat(remainder).isNotNull();
        assertThat(remainder.requestedSize()).isEqualTo(80 * MiB);
        assertThat(written.segments()).isEqualTo(r.snapshot().segments());
    }

    @Test
    void aWindowWithoutUnmapsIsLeftAsTheRebuildMadeIt() {
        SimulatedDevice device = SimulatedDevice.withCapacity(DEVICE_MEMORY);
        CachingAllocator a = new CachingAllocator(device, EXPANDABLE);
        a.malloc(20 * MiB, 0);
        a.free(a.malloc(80 * MiB, 0));
        a.recordHistory(HistoryOptions.all(1 << 10));
        a.malloc(30 * MiB, 0);
        TraceSnapshot s = AllocatorSnapshots.toTraceSnapshot(a.snapshot(), "no unmaps");
        OracleWindow window = OracleWindow.prepare(s, 0, EXPANDABLE);
        assertThat(FreeBlockMarks.withRecordedStaleSizes(s, window, EXPANDABLE, DEVICE_MEMORY))
                .isSameAs(window);
        Recording r = unmappedAndMappedAgain();
        AllocatorConfig classic = AllocatorConfig.parse("");
        OracleWindow classicWindow = OracleWindow.prepare(r.snapshot(), 0, classic);
        assertThat(FreeBlockMarks.withRecordedStaleSizes(r.snapshot(), classicWindow, classic, DEVICE_MEMORY))
                .as("a model without expandable segments unmaps nothing")
                .isSameAs(classicWindow);
    }

    @Test
    void marksStandForTheirStartBlocks() {
        Recording r = unmappedAndMappedAgain();
        OracleWindow window = OracleWindow.prepare(r.snapshot(), 0, EXPANDABLE);
        FreeBlockMarks marks = FreeBlockMarks.of(window.start());
        BlockInfo markedF = block(marks.start().segments(), r.base() + 20 * MiB);
        assertThat(markedF).isNotNull();
        assertThat(markedF.requestedSize()).isGreaterThanOrEqualTo(FreeBlockMarks.FIRST_MARK);
        assertThat(marks.startBlock(markedF.requestedSize()))
                .isEqualTo(block(window.start().segments(), r.base() + 20 * MiB));
        assertThat(marks.unmark(markedF.requestedSize())).isZero();
        assertThat(marks.startBlock(30 * MiB)).as("a request is no mark").isNull();
        assertThat(marks.unmark(30 * MiB)).isEqualTo(30 * MiB);
    }
}
