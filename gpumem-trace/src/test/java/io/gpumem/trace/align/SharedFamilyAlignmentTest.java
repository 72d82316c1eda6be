package io.gpumem.trace.align;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.trace.TestTraces;
import io.gpumem.trace.io.TraceReaders;
import io.gpumem.trace.io.TraceSnapshot;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Alignment, step structure and size laws on the shared families (one program recorded at several sizes): the
 * acceptance bar of issue 19 (99% of the smaller recording matched), with and without stack frames, and the
 * opposite case (two unrelated programs match little). Skipped, saying so, without {@code ../shared/traces}.
 */
class SharedFamilyAlignmentTest {

    static TraceSnapshot read(String name) {
        return TraceReaders.read(TestTraces.file(name + ".pickle"));
    }

    /** The same snapshot with every entry's frames removed: what an older or frameless recording gives. */
    static TraceSnapshot withoutFrames(TraceSnapshot t) {
        return TestTraces.withoutFrames(t);
    }

    @ParameterizedTest(name = "{0} vs {1}")
    @CsvSource({
        "lm2.7b-sweep-ctx128, lm2.7b-sweep-ctx256",
        "lm-medium-train-ctx128, lm-medium-train-ctx256",
        "lm-medium-infer-ctx128, lm-medium-infer-ctx256",
        "lm-medium-infer-ctx256, lm-medium-infer-ctx512",
        "lm-medium-infer-ctx128, lm-medium-infer-ctx512"
    })
    void twoSizesOfOneProgramMatchAlmostEveryRequest(String first, String second) {
        TraceSnapshot ta = read(first);
        TraceSnapshot tb = read(second);
        for (boolean frames : new boolean[] {true, false}) {
            FrameSignatures sigs = new FrameSignatures();
            RequestSequence a = RequestSequence.of(frames ? ta : withoutFrames(ta), 0, sigs);
            RequestSequence b = RequestSequence.of(frames ? tb : withoutFrames(tb), 0, sigs);
            RequestAlignment al = RequestAlignment.align(a, b);
            SizeLaws laws = SizeLaws.fit(List.of(a, b), new long[] {context(first), context(second)});
            System.out.printf(
                    Locale.ROOT,
                    "%s vs %s (%s, %s): %d / %d requests, %d matched (%.2f%% of the smaller),"
                            + " %d rows fit no law%n",
                    first,
                    second,
                    frames ? "frames" : "no frames",
                    al.signal(),
                    a.size(),
                    b.size(),
                    al.matched(),
                    100 * al.matchedFractionOfSmaller(),
                    laws.unfitted());
            if (frames) {
                assertThat(al.signal()).isNotEqualTo(RequestAlignment.Signal.ORDER);
                assertThat(al.matchedFractionOfSmaller()).isGreaterThanOrEqualTo(0.99);
            }
            // one to one, order-preserving
            int last = -1;
            for (int r = 0; r < a.size(); r++) {
                int m = al.matchOfA(r);
                if (m >= 0) {
                    assertThat(m).isGreaterThan(last);
                    assertThat(al.matchOfB(m)).isEqualTo(r);
                    last = m;
                }
            }
        }
    }

    @Test
    void unrelatedProgramsMatchLittle() {
        FrameSignatures sigs = new FrameSignatures();
        RequestSequence a = RequestSequence.of(read("lm2.7b-sweep-ctx128"), 0, sigs);
        RequestSequence b = RequestSequence.of(read("nca-train-empty-cache"), 0, sigs);
        RequestAlignment al = RequestAlignment.align(a, b);
        System.out.printf(
                Locale.ROOT,
                "unrelated: %d / %d requests, %d matched (%.2f%% of the smaller)%n",
                a.size(),
                b.size(),
                al.matched(),
                100 * al.matchedFractionOfSmaller());
        assertThat(al.matchedFractionOfSmaller()).isLessThan(0.5);
    }

    @Test
    void inferenceTripleLawsPredictTheLeftOutRecording() {
        FrameSignatures sigs = new FrameSignatures();
        List<RequestSequence> recs = new ArrayList<>();
        for (String n : new String[] {"lm-medium-infer-ctx128", "lm-medium-infer-ctx256", "lm-medium-infer-ctx512"}) {
            recs.add(RequestSequence.of(read(n), 0, sigs));
        }
        SizeLaws laws = SizeLaws.fit(recs, new long[] {128, 256, 512});
        System.out.println(laws);
        for (int j = 0; j < 3; j++) {
            SizeLaws.LeaveOneOut l = laws.leaveOneOut(j);
            System.out.printf(
                    Locale.ROOT,
                    "left out %s: %d of %d rows exact (%.2f%%), %d without a law, byte error %.4f%%%n",
                    l.source(),
                    l.exact(),
                    l.rows(),
                    100 * l.exactFraction(),
                    l.noLaw(),
                    100.0 * l.absoluteError() / Math.max(1, l.recordedBytes()));
        }
        assertThat(laws.rows()).isGreaterThanOrEqualTo((int) (0.99 * recs.get(0).size()));
        // 128 and 256 share one law for every row; at 512 einsum takes another path (603 einsum requests against
        // 241), so the rows it changes cannot be predicted from the two smaller sizes: about two thirds are exact
        assertThat(laws.leaveOneOut(2).exactFraction()).isGreaterThan(0.6);
        assertThat(laws.leaveOneOut(2).exact()).isLessThan(laws.rows());
    }

    @ParameterizedTest
    @CsvSource({"lm-medium-infer-ctx128", "lm2.7b-sweep-ctx128", "lm-medium-train-ctx128"})
    void stepStructure(String name) {
        RequestSequence s = RequestSequence.of(read(name), 0, new FrameSignatures());
        StepStructure steps = StepStructure.of(s);
        System.out.printf(
                Locale.ROOT,
                "%s: %d requests, period %d (coverage %.3f), %d steps%n",
                name,
                s.size(),
                steps.period(),
                steps.coverage(),
                steps.stepCount());
        for (int r = 0; r < s.size(); r++) {
            assertThat(steps.positionInStep(r)).isBetween(0, s.size() - 1);
        }
    }

    static long context(String name) {
        return Long.parseLong(name.substring(name.lastIndexOf("ctx") + 3));
    }
}
