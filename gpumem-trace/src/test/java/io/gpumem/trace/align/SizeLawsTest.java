package io.gpumem.trace.align;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.trace.align.SyntheticAlignmentTest.Op;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Size laws over a family of recordings, and the leave-one-out check {@code predict} prints with three or more: a
 * program of four ops (a constant, {@code 1024·x}, {@code 4·x²} and {@code 512 + 8·x + 2·x²}) recorded for two steps
 * at 100, 200 and 300. The first three are exact from any two recordings; the last needs all three, and from two it
 * is taken as affine, off by what the figures below work out.
 */
class SizeLawsTest {

    private static final List<Op> PROGRAM =
            List.of(new Op(0, 4096, 0, 0, 1), new Op(1, 0, 1024, 0, 1), new Op(2, 0, 0, 4, 1), new Op(3, 512, 8, 2, 1));
    private static final long[] LABELS = {100, 200, 300};

    private static SizeLaws laws() {
        FrameSignatures sigs = new FrameSignatures();
        List<RequestSequence> recordings = new ArrayList<>();
        for (long x : LABELS) {
            recordings.add(RequestSequence.of(SyntheticAlignmentTest.run(PROGRAM, x, 2, true, false), 0, sigs));
        }
        return SizeLaws.fit(recordings, LABELS);
    }

    @Test
    void everyRowGetsTheSimplestExactLawOfItsOp() {
        SizeLaws laws = laws();
        assertThat(laws.rows()).isEqualTo(8);
        assertThat(laws.unaligned()).isZero();
        assertThat(laws.unfitted()).isZero();
        assertThat(laws.kindCounts())
                .containsEntry(SizeLaw.Form.CONSTANT, 2)
                .containsEntry(SizeLaw.Form.LINEAR, 2)
                .containsEntry(SizeLaw.Form.QUADRATIC, 2)
                .containsEntry(SizeLaw.Form.POLYNOMIAL, 2)
                .containsEntry(SizeLaw.Form.AFFINE, 0);
        long[] at400 = laws.predictAt(400);
        for (int row = 0; row < laws.rows(); row++) {
            Op op = PROGRAM.get(laws.referenceRequest(row) % PROGRAM.size());
            assertThat(at400[row]).as("row %d", row).isEqualTo(op.size(400));
            assertThat(laws.requestOf(2, row)).isEqualTo(laws.referenceRequest(row));
        }
        assertThat(laws.label(2)).isEqualTo(300);
        assertThat(laws.toString())
                .isEqualTo("SizeLaws[100, 200, 300] rows=8 unaligned=0 unfitted=0 " + laws.kindCounts());
    }

    /**
     * Leaving 200 out: {@code 512 + 8·x + 2·x²} is 21,312 at 100 and 182,912 at 300, whose line gives 102,112 at 200
     * where 82,112 was recorded: 20,000 off, twice (two steps). Leaving 100 out, the line through 200 and 300 gives
     * -18,688 at 100 against 21,312: 40,000 off, twice.
     */
    @Test
    void leavingARecordingOutMeasuresTheOthersLawsAgainstIt() {
        SizeLaws laws = laws();
        SizeLaws.LeaveOneOut middle = laws.leaveOneOut(1);
        assertThat(middle.label()).isEqualTo(200);
        assertThat(middle.rows()).isEqualTo(8);
        assertThat(middle.exact()).isEqualTo(6);
        assertThat(middle.noLaw()).isZero();
        assertThat(middle.absoluteError()).isEqualTo(2 * 20_000);
        assertThat(middle.recordedBytes()).isEqualTo(2 * (4096 + 1024 * 200 + 4 * 200 * 200 + 82_112));
        assertThat(middle.exactFraction()).isEqualTo(0.75);

        SizeLaws.LeaveOneOut first = laws.leaveOneOut(0);
        assertThat(first.label()).isEqualTo(100);
        assertThat(first.exact()).isEqualTo(6);
        assertThat(first.absoluteError()).isEqualTo(2 * 40_000);
        assertThat(first.recordedBytes()).isEqualTo(2 * (4096 + 1024 * 100 + 4 * 100 * 100 + 21_312));
        assertThat(new SizeLaws.LeaveOneOut("x", 1, 0, 0, 0, 0, 0).exactFraction())
                .isZero();
    }

    @Test
    void leaveOneOutNeedsThreeRecordings() {
        FrameSignatures sigs = new FrameSignatures();
        SizeLaws two = SizeLaws.fit(
                List.of(
                        RequestSequence.of(SyntheticAlignmentTest.run(PROGRAM, 100, 2, true, false), 0, sigs),
                        RequestSequence.of(SyntheticAlignmentTest.run(PROGRAM, 200, 2, true, false), 0, sigs)),
                new long[] {100, 200});
        assertThatThrownBy(() -> two.leaveOneOut(0))
                .isInstanceOf(IllegalStateException.class)
                .hasMessage("leave-one-out needs three or more recordings, got 2");
        assertThat(two.kindCounts()).containsEntry(SizeLaw.Form.AFFINE, 2).containsEntry(SizeLaw.Form.POLYNOMIAL, 0);
    }
}
