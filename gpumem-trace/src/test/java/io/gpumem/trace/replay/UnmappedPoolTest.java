package io.gpumem.trace.replay;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.alloc.CachingAllocator;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.history.HistoryOptions;
import io.gpumem.history.TraceAction;
import io.gpumem.trace.io.AllocatorSnapshots;
import io.gpumem.trace.io.TraceSnapshot;
import org.junit.jupiter.api.Test;

/**
 * A window of an expandable-segments recording that opens after a small-pool page was mapped and unmaps it (an
 * {@code empty_cache()}), while its stream keeps large pages mapped: the rebuilt start must hold the page in the
 * stream's small pool, whose reservation lies thousands of large pages away from the large one.
 */
class UnmappedPoolTest {

    @Test
    void aSmallPageUnmappedInTheWindowIsRebuiltInTheSmallPool() {
        SimulatedDevice device = SimulatedDevice.withCapacity(4560L * 20 * (1 << 20) * 8 / 9);
        CachingAllocator a = new CachingAllocator(device, AllocatorConfig.parse("expandable_segments:True"));
        a.recordHistory(HistoryOptions.all());
        long small = a.malloc(1000, 0);
        long kept = a.malloc(30L << 20, 0);
        a.free(small);
        a.emptyCache(); // unmaps the small page; the large pages stay mapped under the live block
        TraceSnapshot full = AllocatorSnapshots.toTraceSnapshot(a.snapshot(), "unmap");
        int cut = 0;
        while (full.traceOf(0).get(cut).action() != TraceAction.FREE_REQUESTED) {
            cut++;
        }
        TraceSnapshot window = SuffixWindowTest.suffix(full, 0, cut);
        assertThat(window.traceOf(0)).noneMatch(e -> e.action() == TraceAction.SEGMENT_MAP);

        FidelityReport r = new OracleReplay().check(window); // threw: the page was loaded into the large reservation

        assertThat(r.isExact()).as(r.toString()).isTrue();
        assertThat(window.segmentsOf(0)).anyMatch(seg -> seg.address() == kept && seg.expandable());
    }
}
