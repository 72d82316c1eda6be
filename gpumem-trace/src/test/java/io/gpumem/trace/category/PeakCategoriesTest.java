package io.gpumem.trace.category;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.analysis.Recommender;
import io.gpumem.trace.io.SourceFormat;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.workload.TrainingWorkload;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * What analyze and demo print about categories, on a generated training workload whose categories are known: the
 * split at the peak byte for byte, the timeline sweep agreeing with the split at every moment, and the remedies'
 * figures following their stated models, best first.
 */
class PeakCategoriesTest {

    private static final Recommender.Result NO_RECOMMENDATIONS =
            new Recommender.Result(null, List.of(), List.of(), List.of());

    static TrainingWorkload workload(boolean keepGradients) {
        return TrainingWorkload.builder()
                .layers(4)
                .hidden(256)
                .heads(4)
                .vocab(1000)
                .batch(2)
                .seqSchedule(64, 128, 96)
                .steps(3)
                .keepGradients(keepGradients)
                .build();
    }

    @Test
    void theSplitAtThePeakIsTheGeneratorsAndTheRemediesFollowTheirModels() {
        TrainingWorkload w = workload(false);
        TraceSnapshot recording = ByteCategoriesTest.recordingOf(w, true);
        PeakCategories p = PeakCategories.of(ByteCategories.of(recording, 0), -1, NO_RECOMMENDATIONS, 16);
        Map<ByteCategory, Long> expected = ByteCategoriesTest.expectedAtPeak(w);
        for (ByteCategory c : ByteCategory.values()) {
            assertThat(p.atPeak().get(c)).as(c.key()).isEqualTo(expected.get(c));
        }
        assertThat(p.atPeak().total()).isEqualTo(p.peakAllocated());
        assertThat(p.atFailure()).isNull();

        long activations = p.atPeak().activations();
        assertThat(activations).isPositive();
        assertThat(remedy(p, "activation checkpointing").saves())
                .as("16 blocks keep 2*sqrt(16) = 8 blocks' activations: half saved")
                .isEqualTo(activations / 2);
        assertThat(remedy(p, "half the batch").saves())
                .isEqualTo((activations + p.atPeak().temporaries()) / 2);
        if (p.atPeak().optimizerState() > 0) {
            long optimizer = p.atPeak().optimizerState();
            assertThat(remedy(p, "8-bit").saves()).isEqualTo(optimizer - optimizer / 4);
            assertThat(remedy(p, "offload").saves()).isEqualTo(optimizer);
        }
        assertThat(p.remedies()).isSortedAccordingTo((a, b) -> Long.compare(b.saves(), a.saves()));
        assertThat(p.remedies()).allSatisfy(r -> assertThat(r.saves()).isPositive());

        StringWriter text = new StringWriter();
        CategoryPrinter.print(p, new PrintWriter(text));
        System.out.println(text);
        assertThat(text.toString())
                .contains("activations")
                .contains("remedies at the peak (best first):")
                .contains("PyTorch today: yes: torch.utils.checkpoint.checkpoint_sequential(blocks, 4, x");
    }

    @Test
    void keptGradientsFromAnEarlierStepAreWhatSetToNoneFrees() {
        TrainingWorkload w = workload(true);
        ByteCategories c = ByteCategories.of(ByteCategoriesTest.recordingOf(w, true), 0);
        PeakCategories p = PeakCategories.of(c, -1, NO_RECOMMENDATIONS, 4);
        assertThat(p.atPeak().gradients()).isPositive();
        assertThat(p.remedies())
                .as("n = 4 blocks: sqrt checkpointing keeps 2*sqrt(4) = 4 of 4, saving nothing, so it is not listed")
                .noneMatch(r -> r.remedy().startsWith("activation checkpointing"));
        long largest = 0;
        long total = 0;
        for (CategorizedBlock b : c.blocks()) {
            if (b.category() == ByteCategory.GRADIENTS && b.liveAt(c.peakEntry())) {
                largest = Math.max(largest, b.bytes());
                total += b.bytes();
            }
        }
        assertThat(remedy(p, "optimizer step in backward").saves()).isEqualTo(total - largest);
    }

    @Test
    void theTimelineSweepAgreesWithTheSplitAtEveryMoment() {
        TrainingWorkload w = workload(false);
        TraceSnapshot recording = ByteCategoriesTest.recordingOf(w, false);
        ByteCategories c = ByteCategories.of(recording, 0);
        int entries = recording.traceOf(0).size();
        int[] at = {-1, 0, 3, 3, entries / 3, c.peakEntry(), entries - 1};
        Arrays.sort(at);
        long[][] rows = c.atEach(at);
        for (int i = 0; i < at.length; i++) {
            CategoryBytes split = c.at(at[i]);
            for (ByteCategory k : ByteCategory.values()) {
                assertThat(rows[i][k.ordinal()]).as(k.key() + " at " + at[i]).isEqualTo(split.get(k));
            }
        }
    }

    @Test
    void forwardTensorsLiveWhenAnOomCutsTheStepShortAreActivationsAndOtherWithoutTheOom() {
        TrainingWorkload w = workload(false);
        TraceSnapshot full = ByteCategoriesTest.recordingOf(w, true);
        int peak = ByteCategories.of(full, 0).peakEntry();
        List<TraceEntry> cut = new ArrayList<>(full.traceOf(0).subList(0, peak + 1));
        TraceSnapshot stopped = new TraceSnapshot(
                "cut", SourceFormat.PYTORCH_SNAPSHOT, List.of(), List.of(List.copyOf(cut)), null, null, null, true);
        cut.add(new TraceEntry(TraceAction.OOM, 0, 1L << 30, 0, 0, null, -1, null));
        TraceSnapshot failed = new TraceSnapshot(
                "oom", SourceFormat.PYTORCH_SNAPSHOT, List.of(), List.of(cut), null, null, null, true);
        ByteCategories withOom = ByteCategories.of(failed, 0);
        PeakCategories p = PeakCategories.of(withOom, cut.size() - 1, NO_RECOMMENDATIONS, 16);
        System.out.println("cut at the peak, then an OOM: " + p.atFailure());
        assertThat(p.atFailure().activations())
                .isEqualTo(p.atPeak().activations())
                .isPositive();
        assertThat(p.atFailure().total()).isEqualTo(p.peakAllocated());
        assertThat(withOom.blocks())
                .filteredOn(b -> b.rule() == CategoryRule.CUT_SHORT_BY_OOM)
                .isNotEmpty()
                .allSatisfy(b -> assertThat(b.freeEntry()).isNegative());
        ByteCategories withoutOom = ByteCategories.of(stopped, 0);
        assertThat(withoutOom.blocks()).noneMatch(b -> b.rule() == CategoryRule.CUT_SHORT_BY_OOM);
        for (int i = 0; i < withoutOom.blocks().size(); i++) {
            if (withOom.blocks().get(i).rule() == CategoryRule.CUT_SHORT_BY_OOM) {
                assertThat(withoutOom.blocks().get(i).category()).isEqualTo(ByteCategory.OTHER);
            }
        }
    }

    private static CategoryRemedy remedy(PeakCategories p, String start) {
        return p.remedies().stream()
                .filter(r -> r.remedy().startsWith(start))
                .findFirst()
                .orElseThrow(() -> new AssertionError("no remedy starting '" + start + "' in " + p.remedies()));
    }
}
