package io.gpumem.trace.replay;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.alloc.Pool;
import io.gpumem.history.FileKeys;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.TestTraces;
import io.gpumem.trace.io.PytorchSnapshotReader;
import io.gpumem.trace.io.TraceSnapshot;
import java.util.ArrayList;
import java.util.List;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.Test;

/** The fidelity report finds and explains departures: a trace whose recording was tampered with. */
class OracleMismatchTest {

    @Test
    void aMovedAllocationIsTheFirstMismatchWithItsContext() {
        TraceSnapshot s = new PytorchSnapshotReader().read(TestTraces.file("tiny-forward.pickle"));
        List<TraceEntry> trace = new ArrayList<>(s.traceOf(0));
        int victim = -1;
        for (int i = 0; i < trace.size() && victim < 0; i++) {
            if (trace.get(i).action() == TraceAction.ALLOC && i > 10) {
                victim = i;
            }
        }
        TraceEntry e = trace.get(victim);
        trace.set(
                victim,
                new TraceEntry(
                        e.action(),
                        e.addr() + 512,
                        e.size(),
                        e.stream(),
                        e.timeUs(),
                        e.frames(),
                        e.deviceFree(),
                        FileKeys.of(e.fields(), e.actionName(), null, e.extra())));
        FidelityReport r = new OracleReplay().check(Recordings.withTrace(s, 0, trace));
        assertThat(r.isExact()).isFalse();
        assertThat(r.exact()).isEqualTo(r.allocs() - 1);
        Mismatch m = r.firstMismatch();
        assertThat(m.entry()).isEqualTo(victim);
        assertThat(m.kind()).isEqualTo("alloc");
        assertThat(m.expected()).isEqualTo("0x" + Long.toHexString(e.addr() + 512));
        assertThat(m.got()).isEqualTo("0x" + Long.toHexString(e.addr()));
        assertThat(m.context()).contains("#" + victim + " alloc");
    }

    @Test
    void aDriverCallOfAnotherSizeIsASegmentMismatch() {
        TraceSnapshot s = new PytorchSnapshotReader().read(TestTraces.file("tiny-forward.pickle"));
        List<TraceEntry> trace = new ArrayList<>(s.traceOf(0));
        int segment = -1;
        for (int i = trace.size() - 1; i >= 0 && segment < 0; i--) {
            if (trace.get(i).action() == TraceAction.SEGMENT_ALLOC) {
                segment = i;
            }
        }
        TraceEntry e = trace.get(segment);
        trace.set(
                segment,
                new TraceEntry(
                        e.action(),
                        e.addr(),
                        e.size() + (2L << 20),
                        e.stream(),
                        e.timeUs(),
                        e.frames(),
                        e.deviceFree(),
                        FileKeys.of(e.fields(), e.actionName(), null, e.extra())));
        FidelityReport r = new OracleReplay().check(Recordings.withTrace(s, 0, trace));
        // The model asks for the size PyTorch really asked for; the address still comes from the recording.
        assertThat(r.exact()).isEqualTo(r.allocs());
        assertThat(r.segmentMatched()).isEqualTo(r.segmentEvents() - 1);
        Mismatch m = r.firstMismatch();
        assertThat(m.kind()).isEqualTo("segment");
        assertThat(m.entry()).isEqualTo(segment);
        assertThat(m.expected()).endsWith("size " + (e.size() + (2L << 20)));
        assertThat(m.got()).isEqualTo("segment_alloc 0x" + Long.toHexString(e.addr()) + " size " + e.size());
    }

    @Test
    void anEndStateSegmentOnAnotherStreamOrPoolIsNotIdentical() {
        TraceSnapshot s = new PytorchSnapshotReader().read(TestTraces.file("tiny-forward.pickle"));
        DeviceFidelity untouched = new OracleReplay().check(s).devices().getFirst();
        assertThat(untouched.isExact()).isTrue();
        // a segment the window itself allocated: the rebuilt start state does not read it
        long address = -1;
        for (TraceEntry e : s.traceOf(0)) {
            if (e.action() == TraceAction.SEGMENT_ALLOC) {
                address = e.addr();
            }
        }
        List<UnaryOperator<SegmentInfo>> tamperings = List.of(
                seg -> SegmentInfo.ofBlocks(
                        seg.device(), seg.address(), seg.stream() + 7, seg.pool(), seg.expandable(), seg.blocks()),
                seg -> SegmentInfo.ofBlocks(
                        seg.device(),
                        seg.address(),
                        seg.stream(),
                        seg.pool() == Pool.LARGE ? Pool.SMALL : Pool.LARGE,
                        seg.expandable(),
                        seg.blocks()));
        for (UnaryOperator<SegmentInfo> tamper : tamperings) {
            long at = address;
            List<SegmentInfo> segments = s.segments().stream()
                    .map(seg -> seg.address() == at ? tamper.apply(seg) : seg)
                    .toList();
            assertThat(segments).isNotEqualTo(s.segments());
            TraceSnapshot tampered = new TraceSnapshot(
                    s.source(),
                    s.format(),
                    segments,
                    s.deviceTraces(),
                    s.allocatorSettings(),
                    s.externalAnnotations(),
                    s.extra(),
                    s.addressesRecorded());
            DeviceFidelity d = new OracleReplay().check(tampered).devices().getFirst();
            assertThat(d.exact()).isEqualTo(untouched.exact());
            assertThat(d.endSegments()).isEqualTo(untouched.endSegments());
            assertThat(d.endSegmentsSame()).isEqualTo(untouched.endSegmentsSame() - 1);
            assertThat(d.isExact()).isFalse();
        }
    }
}
