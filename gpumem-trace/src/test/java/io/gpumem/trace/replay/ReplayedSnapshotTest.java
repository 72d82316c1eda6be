package io.gpumem.trace.replay;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.history.BlockInfo;
import io.gpumem.history.Frame;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.TestTraces;
import io.gpumem.trace.io.PytorchSnapshotReader;
import io.gpumem.trace.io.PytorchSnapshotWriter;
import io.gpumem.trace.io.TraceReaders;
import io.gpumem.trace.io.TraceSnapshot;
import java.io.ByteArrayInputStream;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The snapshot {@code replay --snapshot} writes loses nothing the recording had: replayed under the recorded
 * configuration, every shared snapshot comes back as the same pickle (frames on segments, blocks and entries,
 * {@code time_us}, {@code oom} entries, {@code compile_context}, {@code user_metadata}, annotations, absent keys
 * absent). Under a what-if, what the model does differently carries the frames of the request that caused it.
 */
class ReplayedSnapshotTest {

    private static TraceSnapshot replayed(TraceSnapshot recording, AllocatorConfig whatIf) {
        OracleReplay replay = new OracleReplay().writeSnapshot(true);
        FidelityReport report = whatIf == null ? replay.check(recording) : replay.check(recording, whatIf);
        if (whatIf == null) {
            assertThat(report.isExact())
                    .as(recording.source() + ": " + report.firstMismatch())
                    .isTrue();
        }
        return replay.replayedSnapshot();
    }

    @Test
    void everySharedSnapshotReplaysToTheSamePickle() throws Exception {
        List<Path> pickles = TestTraces.pickles();
        PytorchSnapshotWriter writer = new PytorchSnapshotWriter();
        for (Path file : pickles) {
            TraceSnapshot recording = TraceReaders.read(file);
            byte[] written = writer.toBytes(replayed(recording, null));
            TraceSnapshot back = new PytorchSnapshotReader().read(new ByteArrayInputStream(written), "replayed");
            String name = file.getFileName().toString();
            assertThat(back.segments()).as(name + " segments").isEqualTo(recording.segments());
            for (int d = 0; d < recording.deviceTraces().size(); d++) {
                assertThat(back.traceOf(d)).as(name + " device " + d).isEqualTo(recording.traceOf(d));
            }
            assertThat(back.deviceTraces()).as(name).hasSameSizeAs(recording.deviceTraces());
            assertThat(back.allocatorSettings()).as(name + " settings").isEqualTo(recording.allocatorSettings());
            assertThat(back.externalAnnotations()).as(name).isEqualTo(recording.externalAnnotations());
            assertThat(back.extra()).as(name).isEqualTo(recording.extra());
            assertThat(written).as(name + ": the whole pickle").isEqualTo(writer.toBytes(recording));
        }
    }

    @Test
    void entriesAWhatIfCreatesCarryTheFramesOfTheRequestThatCausedThem() {
        TraceSnapshot recording = TraceReaders.read(TestTraces.file("tiny-forward.pickle"));
        TraceSnapshot whatIf = replayed(recording, AllocatorConfig.parse("expandable_segments:True"));
        List<TraceEntry> trace = whatIf.traceOf(0);
        assertThat(trace).anyMatch(e -> e.action() == TraceAction.SEGMENT_MAP);
        assertThat(trace).noneMatch(e -> e.action() == TraceAction.SEGMENT_ALLOC);
        // Each driver call was made for the alloc that follows it: it has that request's stack and time.
        for (int i = 0; i < trace.size(); i++) {
            if (trace.get(i).action() == TraceAction.SEGMENT_MAP) {
                int j = i;
                while (trace.get(j).action() != TraceAction.ALLOC) {
                    j++;
                }
                assertThat(trace.get(i).frames())
                        .as("entry " + i)
                        .isNotEmpty()
                        .isSameAs(trace.get(j).frames());
                assertThat(trace.get(i).timeUs())
                        .as("entry " + i)
                        .isEqualTo(trace.get(j).timeUs());
            }
        }
        // The requests are the recording's, with their stacks, in order.
        assertThat(allocs(trace))
                .extracting(TraceEntry::frames)
                .isEqualTo(allocs(recording.traceOf(0)).stream()
                        .map(TraceEntry::frames)
                        .toList());
        assertThat(whatIf.recordedConfString()).isEqualTo("expandable_segments:True");
        assertThat(whatIf.segments()).allMatch(s -> s.expandable());
    }

    /**
     * The blocks and segments the model makes under a what-if carry the stack of the request that made them, as the
     * written trace's allocs do (the model's context supplier is the entry being replayed). PIT: the replay's
     * history, context supplier and clock could be dropped with no test failing, because the writer attaches the
     * recorded frames to trace entries by itself; only the end state shows the model's own.
     */
    @Test
    void blocksAndSegmentsAWhatIfMakesCarryTheStackOfTheRequestThatMadeThem() {
        TraceSnapshot recording = TraceReaders.read(TestTraces.file("tiny-forward.pickle"));
        TraceSnapshot whatIf = replayed(recording, AllocatorConfig.parse("expandable_segments:True"));
        Map<Long, List<Frame>> lastAllocFrames = new HashMap<>();
        for (TraceEntry e : whatIf.traceOf(0)) {
            if (e.action() == TraceAction.ALLOC) {
                lastAllocFrames.put(e.addr(), e.frames());
            }
        }
        int active = 0;
        for (SegmentInfo seg : whatIf.segments()) {
            assertThat(seg.frames()).as("segment 0x%x", seg.address()).isNotEmpty();
            for (BlockInfo b : seg.blocks()) {
                if (b.isAllocated()) {
                    active++;
                    assertThat(b.frames())
                            .as("block 0x%x", b.address())
                            .isNotEmpty()
                            .isSameAs(lastAllocFrames.get(b.address()));
                }
            }
        }
        assertThat(active).isPositive();
    }

    @Test
    void aWhatIfOfAFileWithoutTimesWritesNoTimes() {
        TraceSnapshot recording = TraceReaders.read(TestTraces.file("llama-offload-10-streams.pickle"));
        assertThat(recording.traceOf(0)).noneMatch(e -> e.has(TraceEntry.TIME_US));
        TraceSnapshot whatIf = replayed(recording, AllocatorConfig.parse("max_split_size_mb:64"));
        assertThat(whatIf.traceOf(0)).isNotEmpty().noneMatch(e -> e.has(TraceEntry.TIME_US));
        assertThat(allocs(whatIf.traceOf(0))).hasSameSizeAs(allocs(recording.traceOf(0)));
    }

    private static List<TraceEntry> allocs(List<TraceEntry> trace) {
        return trace.stream().filter(e -> e.action() == TraceAction.ALLOC).toList();
    }
}
