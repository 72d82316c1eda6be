package io.gpumem.trace.category;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.TestTraces;
import io.gpumem.trace.align.FrameSignatures;
import io.gpumem.trace.align.RequestSequence;
import io.gpumem.trace.analysis.DeviceAnalysis;
import io.gpumem.trace.analysis.MemoryState;
import io.gpumem.trace.io.TraceReaders;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.session.TraceSession;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The acceptance checks of issue 17 on the shared traces: AdamW's two states per parameter against the gradients
 * at the end, the split summing to peak allocated, no gradients or optimizer state in inference, and recordings
 * without frames. Prints the figures per trace. Skipped, saying so, without {@code ../shared/traces}.
 */
class SharedTraceCategoriesTest {

    static TraceSnapshot read(String name) {
        return TraceReaders.read(TestTraces.file(name + ".pickle"));
    }

    static String gib(long bytes) {
        return String.format(Locale.ROOT, "%.3f GiB", bytes / (double) (1L << 30));
    }

    static String describe(CategoryBytes c) {
        StringBuilder sb = new StringBuilder();
        for (ByteCategory k : ByteCategory.values()) {
            sb.append(k.key()).append(' ').append(gib(c.get(k))).append(", ");
        }
        return sb.append("total ").append(gib(c.total())).toString();
    }

    static ByteCategories classify(String name, TraceSnapshot t) {
        ByteCategories c = ByteCategories.of(t, 0);
        RequestSequence seq = RequestSequence.of(t, 0, new FrameSignatures());
        System.out.println(
                name + ": " + c.steps().stepCount() + " step(s) of " + c.steps().period() + " requests; peak allocated "
                        + gib(c.peakAllocated()) + " at entry " + c.peakEntry());
        System.out.println("  at peak: " + describe(c.atPeak()));
        System.out.println("  at end:  " + describe(c.atEnd()));
        System.out.println("  rules at peak: " + c.rulesAt(c.peakEntry()));
        assertThat(c.atPeak().total()).as("six categories at the peak").isEqualTo(c.peakAllocated());
        assertThat(c.peakAllocated()).as("the request sequence's peak").isEqualTo(seq.peakAllocated());
        return c;
    }

    /**
     * A session classifies over the window it shares with its what-if runs, begun ahead on a thread of its own (as
     * analyze and report do): the split is the one classified from the file alone, and no window is rebuilt for it.
     */
    @ParameterizedTest
    @ValueSource(strings = {"lm2.7b-train-step", "gnn-train-expandable-oom", "opt1.3b-state-only"})
    void aSessionsClassificationIsTheOneFromTheFileAlone(String name) {
        TraceSession session = TraceSession.of(read(name));
        int d = session.busiestDevice();
        session.classifyAhead(d);
        DeviceAnalysis analysis = session.analyze(d, null, MemoryState.UNKNOWN, 5, false);
        PeakCategories shared = session.peakCategories(analysis, 0);
        PeakCategories alone = PeakCategories.of(session.trace(), d, analysis, 0);
        assertThat(shared.peakEntry()).isEqualTo(alone.peakEntry());
        assertThat(shared.atPeak()).isEqualTo(alone.atPeak());
        assertThat(shared.atEnd()).isEqualTo(alone.atEnd());
        assertThat(shared.atFailure()).isEqualTo(alone.atFailure());
        assertThat(shared.rulesAtPeak()).isEqualTo(alone.rulesAtPeak());
        assertThat(shared.notes()).isEqualTo(alone.notes());
        assertThat(shared.remedies()).isEqualTo(alone.remedies());
        assertThat(session.windowRebuilds()).isLessThanOrEqualTo(1);
    }

    @ParameterizedTest
    @ValueSource(
            strings = {
                "lm2.7b-train-step",
                "lm2.7b-sweep-ctx128",
                "lm2.7b-sweep-ctx256",
                "lm-medium-train-ctx128",
                "lm-medium-train-ctx256"
            })
    void adamwTrainingEndsWithTwoStatesPerGradientAndNoMoreGradientsThanParameters(String name) {
        ByteCategories c = classify(name, read(name));
        CategoryBytes end = c.atEnd();
        assertThat(end.gradients()).isPositive();
        assertThat((double) end.optimizerState())
                .as("optimizer_state vs twice gradients")
                .isBetween(2 * end.gradients() * 0.98, 2 * end.gradients() * 1.02);
        assertThat(end.gradients()).isLessThanOrEqualTo(end.parameters());
    }

    @ParameterizedTest
    @ValueSource(
            strings = {
                "lm-medium-infer-ctx128",
                "lm-medium-infer-ctx256",
                "lm-medium-infer-ctx512",
                "llama-offload-10-streams"
            })
    void inferenceHasNoGradientsAndNoOptimizerState(String name) {
        ByteCategories c = classify(name, read(name));
        for (CategorizedBlock b : c.blocks()) {
            assertThat(b.category()).isNotIn(ByteCategory.GRADIENTS, ByteCategory.OPTIMIZER_STATE);
        }
        assertThat(c.atPeak().gradients()).isZero();
        assertThat(c.atPeak().optimizerState()).isZero();
        assertThat(c.atEnd().gradients()).isZero();
        assertThat(c.atEnd().optimizerState()).isZero();
    }

    @ParameterizedTest
    @ValueSource(strings = {"lm2.7b-train-step", "lm-medium-train-ctx128", "llama-offload-10-streams"})
    void withoutFramesEverythingButShortLivedScratchIsOther(String name) {
        ByteCategories c = classify(name + " (frames removed)", withoutFrames(read(name)));
        assertThat(c.framed()).isFalse();
        Map<CategoryRule, Long> rules = c.rulesAt(c.peakEntry());
        assertThat(rules.keySet())
                .isSubsetOf(
                        CategoryRule.NO_FRAMES, CategoryRule.BEFORE_THE_WINDOW, CategoryRule.FREED_BEFORE_NEXT_REQUEST);
        CategoryBytes peak = c.atPeak();
        assertThat(peak.other() + peak.temporaries()).isEqualTo(peak.total());
    }

    @Test
    void theFailingRequestOfAnOomSplitsToTheBytesLiveThen() {
        TraceSnapshot t = read("gnn-train-expandable-oom");
        int oom = -1;
        int device = -1;
        for (int d = 0; d < t.deviceTraces().size(); d++) {
            List<TraceEntry> trace = t.traceOf(d);
            for (int i = 0; i < trace.size(); i++) {
                if (trace.get(i).action() == TraceAction.OOM) {
                    oom = i;
                    device = d;
                }
            }
        }
        assertThat(oom).isNotNegative();
        ByteCategories c = ByteCategories.of(t, device);
        System.out.println("gnn-train-expandable-oom device " + device + ": peak " + describe(c.atPeak()));
        CategoryBytes atOom = c.at(oom);
        System.out.println("  at the OOM (entry " + oom + "): " + describe(atOom));
        long live = 0;
        for (CategorizedBlock b : c.blocks()) {
            live += b.liveAt(oom) ? b.bytes() : 0;
        }
        assertThat(atOom.total()).isEqualTo(live).isPositive();
        assertThat(atOom.optimizerState())
                .as("no optimizer step before the OOM")
                .isZero();
    }

    /** The same snapshot with every entry's frames removed: what an older or frameless recording gives. */
    static TraceSnapshot withoutFrames(TraceSnapshot t) {
        return TestTraces.withoutFrames(t);
    }
}
