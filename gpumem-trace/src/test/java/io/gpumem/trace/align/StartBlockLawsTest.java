package io.gpumem.trace.align;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.alloc.Pool;
import io.gpumem.alloc.SizeRules;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.history.BlockInfo;
import io.gpumem.history.BlockState;
import io.gpumem.history.Frame;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.align.SyntheticAlignmentTest.Op;
import io.gpumem.trace.io.SourceFormat;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.replay.OracleReplay;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.function.LongUnaryOperator;
import org.junit.jupiter.api.Test;

/**
 * The blocks live at a window's start (weights, optimizer state, inputs), predicted at a value never recorded: a
 * seeded generated program ({@link SyntheticAlignmentTest}) recorded at several values, with blocks live before its
 * window whose sizes are constant or grow with the value. What stays stays, what scales follows its law (paired by
 * rank of size, whatever the slot order), and what cannot be paired or gives no positive size keeps the reference's
 * size and is counted. (Pairing by rank assumes no start block shrinks as the value grows: one that did would be
 * paired with another's size.)
 */
class StartBlockLawsTest {

    private static final long MIB = 1L << 20;
    private static final List<Op> PROGRAM = SyntheticAlignmentTest.program(new Random(17), 20);

    /** The program run at {@code x}, with blocks live from before the window at the given sizes, in slot order. */
    private static TraceSnapshot recording(long x, List<LongUnaryOperator> startSizes) {
        TraceSnapshot run = SyntheticAlignmentTest.run(PROGRAM, x, 4, true, false);
        List<SegmentInfo> segments = new ArrayList<>();
        for (int i = 0; i < startSizes.size(); i++) {
            long addr = (1L << 44) + ((long) i << 36);
            long size = startSizes.get(i).applyAsLong(x);
            segments.add(SegmentInfo.ofBlocks(
                    0,
                    addr,
                    0,
                    Pool.LARGE,
                    false,
                    List.of(BlockInfo.of(addr, size, size, BlockState.ACTIVE_ALLOCATED))));
        }
        return new TraceSnapshot(
                "x=" + x, SourceFormat.PYTORCH_SNAPSHOT, segments, run.deviceTraces(), null, null, Map.of(), true);
    }

    private static RequestSequence sequence(long x, List<LongUnaryOperator> startSizes, FrameSignatures sigs) {
        return RequestSequence.of(recording(x, startSizes), 0, sigs);
    }

    private static StartBlockLaws predict(List<LongUnaryOperator> reference, List<LongUnaryOperator> other, long x) {
        FrameSignatures sigs = new FrameSignatures();
        return StartBlockLaws.predict(
                List.of(sequence(256, reference, sigs), sequence(128, other, sigs)), new long[] {256, 128}, x);
    }

    private static long[] sizes(StartBlockLaws laws, int n) {
        long[] out = new long[n];
        for (int i = 0; i < n; i++) {
            out[i] = laws.size(i);
        }
        return out;
    }

    @Test
    void constantBlocksStayAndScalingOnesFollowTheirLawsPairedByRankOfSize() {
        List<LongUnaryOperator> start = List.of(x -> 4 * MIB, x -> 4096 * x, x -> 4 * MIB, x -> 1024 * x, x -> 3 * MIB);
        StartBlockLaws laws = predict(start, start, 512);
        assertThat(sizes(laws, 5)).containsExactly(4 * MIB, 4096 * 512, 4 * MIB, 1024 * 512, 3 * MIB);
        assertThat(laws.scaled()).isEqualTo(2);
        assertThat(laws.kept()).isZero();

        PredictedRecording p = RecordingFamily.of(
                        List.of(recording(128, start), recording(256, start)), new long[] {128, 256})
                .predict(512);
        assertThat(p.startBlocks()).isEqualTo(5);
        assertThat(p.startBlocksScaled()).isEqualTo(2);
        assertThat(p.startBlocksKept()).isZero();
        assertThat(p.warmUpPasses())
                .as("a window that starts with live blocks is warmed up")
                .isEqualTo(2);
    }

    @Test
    void whenTheRecordingsLeaveDifferentCountsOverEveryScalingBlockKeepsItsSize() {
        List<LongUnaryOperator> reference = List.of(x -> 4 * MIB, x -> 4096 * x, x -> 1024 * x);
        List<LongUnaryOperator> oneMore = List.of(x -> 4 * MIB, x -> 4096 * x, x -> 1024 * x, x -> 512 * x);
        StartBlockLaws laws = predict(reference, oneMore, 512);
        assertThat(sizes(laws, 3)).containsExactly(4 * MIB, 4096 * 256, 1024 * 256);
        assertThat(laws.scaled()).isZero();
        assertThat(laws.kept()).isEqualTo(2);
    }

    @Test
    void aLawThatGivesNoPositiveSizeKeepsTheReferenceSize() {
        // 4 KiB per unit less 256 KiB: 256 KiB at 128, 768 KiB at 256, nothing at 64
        List<LongUnaryOperator> start = List.of(x -> 4096 * x - 256 * 1024, x -> 8192 * x);
        StartBlockLaws laws = predict(start, start, 64);
        assertThat(sizes(laws, 2)).containsExactly(768 * 1024, 8192 * 64);
        assertThat(laws.scaled()).isEqualTo(1);
        assertThat(laws.kept()).isEqualTo(1);

        StartBlockLaws none = predict(List.of(x -> 4 * MIB), List.of(x -> 4 * MIB), 1024);
        assertThat(none.scaled()).isZero();
        assertThat(none.kept())
                .as("a constant block is neither scaled nor kept")
                .isZero();
        assertThat(none.size(0)).isEqualTo(4 * MIB);
    }

    /**
     * A training step's shape: weights live throughout, the previous step's output (live at the window's start) freed
     * as the step begins, and this step's output allocated at its end and left live. Predicted at a value never run,
     * the recorded (last) pass makes exactly the requests and frees of the program run at that value, and ends holding
     * what such a run holds: the warm-up passes leave nothing behind (without the blocks a pass leaves live being
     * freed or handed on, they pile up). Whether a pass's output is handed on or a fresh block of its size stands in
     * for it places the same here, so this test does not tell the two apart.
     */
    @Test
    void warmUpPassesLeaveNothingBehindAndTheRecordedPassIsTheProgramAtThatValue() {
        long x = 512;
        PredictedRecording p = RecordingFamily.of(List.of(step(128), step(256)), new long[] {128, 256})
                .predict(x);
        assertThat(p.startBlocks()).isEqualTo(2);
        assertThat(p.startBlocksScaled())
                .as("the output scales, the weights do not")
                .isEqualTo(1);
        assertThat(p.warmUpPasses()).isEqualTo(2);

        List<long[]> predicted = requestsAndFrees(p.trace().traceOf(0));
        List<long[]> actual = requestsAndFrees(step(x).traceOf(0));
        assertThat(predicted).as("the recorded pass").hasSameSizeAs(actual);
        for (int i = 0; i < actual.size(); i++) {
            assertThat(predicted.get(i)).as("entry %d", i).containsExactly(actual.get(i));
        }

        AllocatorConfig config = AllocatorConfig.defaults();
        Map<Long, Long> live = new HashMap<>();
        for (TraceEntry e : step(x).traceOf(0)) {
            if (e.action() == TraceAction.ALLOC) {
                live.put(e.addr(), SizeRules.roundSize(e.size(), config));
            } else if (e.action() == TraceAction.FREE_REQUESTED) {
                live.remove(e.addr());
            }
        }
        long expectedLive = SizeRules.roundSize(WEIGHTS, config)
                + live.values().stream().mapToLong(Long::longValue).sum();
        long endLive = 0;
        for (SegmentInfo seg : p.trace().segments()) {
            for (BlockInfo b : seg.blocks()) {
                endLive += b.state() == BlockState.ACTIVE_ALLOCATED ? b.size() : 0;
            }
        }
        assertThat(endLive).isEqualTo(expectedLive);
        assertThat(new OracleReplay().check(p.trace()).devices().getFirst().isExact())
                .isTrue();
    }

    private static final long WEIGHTS = 4 * MIB;
    private static final long OUTPUT_AT = 1L << 45;
    private static final long NEXT_OUTPUT_AT = (1L << 45) + (1L << 36);

    /** One step at {@code x}: frees the previous output, runs the program, allocates its output (1 KiB a unit). */
    private static TraceSnapshot step(long x) {
        TraceSnapshot run = SyntheticAlignmentTest.run(PROGRAM, x, 4, true, false);
        long output = 1024 * x;
        List<TraceEntry> t = new ArrayList<>();
        t.add(TraceEntry.of(TraceAction.FREE_REQUESTED, OUTPUT_AT, output, 0));
        t.addAll(run.traceOf(0));
        t.add(SyntheticAlignmentTest.entry(NEXT_OUTPUT_AT, output, List.of(new Frame("train.py", 7, "forward"))));
        long weightsAt = 1L << 44;
        List<SegmentInfo> segments = List.of(
                SegmentInfo.ofBlocks(
                        0,
                        weightsAt,
                        0,
                        Pool.LARGE,
                        false,
                        List.of(BlockInfo.of(weightsAt, WEIGHTS, WEIGHTS, BlockState.ACTIVE_ALLOCATED))),
                SegmentInfo.ofBlocks(
                        0,
                        OUTPUT_AT,
                        0,
                        Pool.LARGE,
                        false,
                        List.of(BlockInfo.of(
                                OUTPUT_AT,
                                SizeRules.roundSize(output, AllocatorConfig.defaults()),
                                0,
                                BlockState.INACTIVE))));
        return new TraceSnapshot(
                "x=" + x, SourceFormat.PYTORCH_SNAPSHOT, segments, List.of(t), null, null, Map.of(), true);
    }

    /** Each alloc and free request as {action ordinal, size}. */
    private static List<long[]> requestsAndFrees(List<TraceEntry> trace) {
        List<long[]> out = new ArrayList<>();
        for (TraceEntry e : trace) {
            if (e.action() == TraceAction.ALLOC || e.action() == TraceAction.FREE_REQUESTED) {
                out.add(new long[] {e.action().ordinal(), e.size()});
            }
        }
        return out;
    }
}
