package io.gpumem.trace.category;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.alloc.Pool;
import io.gpumem.alloc.SizeRules;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.engine.RunOutcome;
import io.gpumem.history.BlockInfo;
import io.gpumem.history.BlockState;
import io.gpumem.history.Frame;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.analysis.DeviceAnalysis;
import io.gpumem.trace.analysis.MemoryState;
import io.gpumem.trace.analysis.Recommendation;
import io.gpumem.trace.analysis.Recommender;
import io.gpumem.trace.io.SourceFormat;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.workload.TrainingWorkload;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.Test;

/**
 * The parts of {@link PeakCategories} that the generated-workload figures in {@link PeakCategoriesTest} leave open:
 * the checkpointing model at each block count (and the assumed count), which recommendation becomes the
 * fragmentation remedy, the notes on what falls to other and why, and the fallbacks that call every live byte other.
 */
class PeakCategoriesRemediesTest {

    private static final Recommender.Result NO_RECOMMENDATIONS =
            new Recommender.Result(null, List.of(), List.of(), List.of());
    private static final long MIB = 1L << 20;

    private static ByteCategories framedTraining() {
        return ByteCategories.of(ByteCategoriesTest.recordingOf(PeakCategoriesTest.workload(false), true), 0);
    }

    @Test
    void checkpointingSavesOneMinusTwoOverRootNOfTheActivationsAndNothingUpToFourBlocks() {
        ByteCategories c = framedTraining();
        long activations = c.atPeak().activations();
        assertThat(activations).isPositive();
        for (int n : new int[] {1, 4, 5, 9, 100}) {
            List<CategoryRemedy> listed = checkpointing(PeakCategories.of(c, -1, NO_RECOMMENDATIONS, n));
            if (n <= 4) {
                assertThat(listed)
                        .as("n = %d keeps 2*sqrt(n) >= n blocks: saves nothing", n)
                        .isEmpty();
                continue;
            }
            long segments = Math.round(Math.sqrt(n));
            assertThat(listed).as("n = %d", n).singleElement().satisfies(r -> {
                assertThat(r.saves()).isEqualTo((long) (activations * (1 - 2 / Math.sqrt(n))));
                assertThat(r.remedy())
                        .isEqualTo("activation checkpointing in " + segments + " segments of " + n + " blocks");
                assertThat(r.model()).endsWith("n = " + n + " (the workload's layers)");
                assertThat(r.how())
                        .startsWith("torch.utils.checkpoint.checkpoint_sequential(blocks, " + segments + ",");
            });
        }
        assertThat(checkpointing(PeakCategories.of(c, -1, NO_RECOMMENDATIONS, 9))
                        .get(0)
                        .saves())
                .as("9 blocks keep 6: a third saved")
                .isBetween(activations / 3 - 1, activations / 3);
        for (int unknown : new int[] {0, -1}) {
            CategoryRemedy r = checkpointing(PeakCategories.of(c, -1, NO_RECOMMENDATIONS, unknown))
                    .get(0);
            assertThat(r.remedy()).isEqualTo("activation checkpointing in 4 segments of 16 blocks");
            assertThat(r.saves()).isEqualTo(activations / 2);
            assertThat(r.model()).contains("n = 16 assumed");
        }
    }

    @Test
    void theFragmentationRemedyIsTheFirstMeasuredSavingConfigurationOrPolicy() {
        RunOutcome measured = RunOutcome.builder().label("measured").build();
        String conf = "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True";
        Recommendation unmeasured = new Recommendation("PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:64", 900, "a", null);
        Recommendation notAnAllocatorChange = new Recommendation("reduce the batch", 800, "b", measured);
        Recommendation savesNothing = new Recommendation(conf, 0, "c", measured);
        Recommendation policy = new Recommendation("use allocation policy stitch", 300 * MIB, "stitch basis", measured);
        Recommendation laterConf = new Recommendation(conf, 700 * MIB, "conf basis", measured);

        CategoryRemedy byPolicy = fragmentation(PeakCategories.of(
                framedTraining(), -1, result(unmeasured, notAnAllocatorChange, savesNothing, policy, laterConf), 16));
        assertThat(byPolicy)
                .isEqualTo(new CategoryRemedy(
                        "fragmentation",
                        "the best allocation policy",
                        300 * MIB,
                        "stitch basis",
                        false,
                        "allocation policy stitch exists in gpumem only"));

        CategoryRemedy byConf =
                fragmentation(PeakCategories.of(framedTraining(), -1, result(savesNothing, laterConf, policy), 16));
        assertThat(byConf)
                .isEqualTo(new CategoryRemedy(
                        "fragmentation",
                        "the best allocator configuration",
                        700 * MIB,
                        "conf basis",
                        true,
                        "export " + conf + " before the process starts"));

        PeakCategories none =
                PeakCategories.of(framedTraining(), -1, result(unmeasured, notAnAllocatorChange, savesNothing), 16);
        assertThat(none.remedies()).noneMatch(r -> r.target().equals("fragmentation"));
    }

    @Test
    void otherAtThePeakIsExplainedRuleByRuleLargestFirst() {
        TrainingWorkload w = PeakCategoriesTest.workload(false);
        List<TraceEntry> trace =
                new ArrayList<>(ByteCategoriesTest.recordingOf(w, true).traceOf(0));
        // two requests never freed, ahead of the workload: one without frames, one whose frames name no phase; sizes
        // no parameter has, so that no gradient matches them
        long noFrames = 7 * MIB + 512;
        long noPhase = 3 * MIB + 1536;
        List<Frame> loader = List.of(new Frame("data.py", 12, "load_batch"));
        trace.add(0, new TraceEntry(TraceAction.ALLOC, 1L << 20, noFrames, 0, 0, null, -1, null));
        trace.add(1, new TraceEntry(TraceAction.ALLOC, 1L << 24, noPhase, 0, 0, loader, -1, null));
        ByteCategories c = ByteCategories.of(snapshot(trace), 0);
        PeakCategories p = PeakCategories.of(c, -1, NO_RECOMMENDATIONS, 16);

        Map<CategoryRule, Long> rules = p.rulesAtPeak();
        assertThat(rules).isEqualTo(c.rulesAt(c.peakEntry()));
        assertThat(p.peakEntry()).isEqualTo(c.peakEntry()).isPositive();
        assertThat(rules.get(CategoryRule.NO_FRAMES)).isEqualTo(noFrames);
        assertThat(rules.get(CategoryRule.NO_PHASE)).isGreaterThanOrEqualTo(noPhase);
        assertThat(p.atPeak().other()).isPositive();
        List<CategoryRule> otherRules = rules.entrySet().stream()
                .filter(e -> e.getKey().category() == ByteCategory.OTHER)
                .sorted(Map.Entry.<CategoryRule, Long>comparingByValue().reversed())
                .map(Map.Entry::getKey)
                .toList();
        assertThat(p.notes()).singleElement().asString().startsWith("other at the peak: ");
        String note = p.notes().get(0).substring("other at the peak: ".length());
        List<String> parts = List.of(note.split("; "));
        assertThat(parts).hasSize(otherRules.size());
        for (int i = 0; i < parts.size(); i++) {
            CategoryRule rule = otherRules.get(i);
            String expected = switch (rule) {
                case NO_FRAMES -> "requests recorded without stack frames";
                case NO_PHASE ->
                    "requests whose frames name no forward, backward or optimizer step (data, setup, loss)";
                case NO_LIFETIME_RULE -> "requests whose lifetime fits no rule (e.g. outputs kept past the step)";
                case BEFORE_THE_WINDOW -> "blocks live before recording began (no frames, no allocation time)";
                default -> PeakCategories.ruleName(rule);
            };
            assertThat(parts.get(i)).as("part %d (%s)", i, rule).isEqualTo(expected);
        }
        assertThat(parts.indexOf("requests recorded without stack frames"))
                .as("7 MiB without frames before 3 MiB without a phase")
                .isLessThan(parts.indexOf(
                        "requests whose frames name no forward, backward or optimizer step (data, setup, loss)"));
    }

    @Test
    void aRecordingWithoutFramesSaysNoPhaseIsKnownAndNothingAboutOtherRules() {
        ByteCategories c =
                ByteCategories.of(ByteCategoriesTest.recordingOf(PeakCategoriesTest.workload(false), false), 0);
        PeakCategories p = PeakCategories.of(c, -1, NO_RECOMMENDATIONS, 16);
        assertThat(p.atPeak().other()).isPositive();
        assertThat(p.notes())
                .singleElement()
                .asString()
                .startsWith("no request carries stack frames, so no phase is known");
        assertThat(PeakCategories.ruleName(CategoryRule.FREED_BEFORE_NEXT_REQUEST))
                .isEqualTo("freed before next request");
        assertThat(p.atPeak().activations()).isZero();
        assertThat(p.remedies())
                .as("no activations known: no activation remedy")
                .noneMatch(r -> r.target().equals(ByteCategory.ACTIVATIONS.key()));
    }

    /**
     * The generator's gradients are kept across steps ({@code keepGradients}: zeroed in place) or set to none after
     * each optimizer step. Six steps, the longest sequence in the fourth, where the peak lies: kept, every gradient
     * live there was allocated by an earlier step's backward, which is what {@code set_to_none} frees; set to none, no
     * gradient of an earlier step is live at the peak (it lies in the forward), and the remedy saves nothing, so it is
     * not listed.
     */
    @Test
    void freeingGradientsAfterTheStepSavesTheGradientsAnEarlierStepLeftLive() {
        for (boolean kept : new boolean[] {true, false}) {
            TrainingWorkload w = TrainingWorkload.builder()
                    .layers(4)
                    .hidden(256)
                    .heads(4)
                    .vocab(1000)
                    .batch(2)
                    .seqSchedule(64, 96, 64, 128, 64, 96)
                    .steps(6)
                    .keepGradients(kept)
                    .build();
            ByteCategories c = ByteCategories.of(ByteCategoriesTest.recordingOf(w, true), 0);
            assertThat(c.steps().warmUp())
                    .as("kept %s: the steps are found after the first", kept)
                    .isPositive();
            PeakCategories p = PeakCategories.of(c, -1, NO_RECOMMENDATIONS, 16);
            long gradients = p.atPeak().gradients();
            List<CategoryRemedy> setToNone = p.remedies().stream()
                    .filter(r -> r.remedy().equals("free gradients after each optimizer step"))
                    .toList();
            if (kept) {
                assertThat(gradients).isPositive();
                assertThat(setToNone).singleElement().satisfies(r -> {
                    assertThat(r.saves()).isEqualTo(gradients);
                    assertThat(r.target()).isEqualTo(ByteCategory.GRADIENTS.key());
                    assertThat(r.pytorchToday()).isTrue();
                });
            } else {
                assertThat(setToNone).as("the step's own gradients").isEmpty();
            }
        }
    }

    @Test
    void aStateOnlySnapshotHasEveryLiveByteAsOtherBeforeTheWindow() {
        long live = 6 * MIB;
        SegmentInfo segment = SegmentInfo.ofBlocks(
                0,
                1L << 32,
                0,
                Pool.LARGE,
                false,
                List.of(
                        BlockInfo.of(1L << 32, live, live, BlockState.ACTIVE_ALLOCATED),
                        BlockInfo.of((1L << 32) + live, 2 * MIB, 0, BlockState.INACTIVE)));
        TraceSnapshot stateOnly = new TraceSnapshot(
                "state-only",
                SourceFormat.PYTORCH_SNAPSHOT,
                List.of(segment),
                List.of(List.of()),
                null,
                null,
                null,
                true);
        DeviceAnalysis analysis = analyze(stateOnly, null);
        PeakCategories p = PeakCategories.of(stateOnly, 0, analysis, 16, () -> {
            throw new AssertionError("a device without requests is not classified");
        });
        assertAllOther(p, live);
        assertThat(p.notes())
                .singleElement()
                .asString()
                .startsWith("no alloc entry to classify (a state-only snapshot)");
    }

    @Test
    void aWindowThatCannotBeClassifiedHasEveryLiveByteAsOtherAndSaysWhy() {
        TraceSnapshot recording =
                withEndState(ByteCategoriesTest.recordingOf(PeakCategoriesTest.workload(false), true));
        DeviceAnalysis analysis = analyze(recording, null);
        long allocated = analysis.analysis().all().allocated();
        assertThat(allocated).isPositive();
        PeakCategories p = PeakCategories.of(recording, 0, analysis, 16, () -> {
            throw new IllegalStateException("window start unknown");
        });
        assertAllOther(p, allocated);
        assertThat(p.notes())
                .containsExactly("the window could not be classified (window start unknown): every live byte is other");

        PeakCategories classified = PeakCategories.of(recording, 0, analysis, 16);
        assertThat(classified.categories()).isNotNull();
        assertThat(classified.atEnd().total())
                .as("the classified end holds what the end state holds, requests at their rounded size")
                .isEqualTo(allocated);
        assertThat(classified.atFailure()).as("the analysed state is no OOM").isNull();
    }

    /** The recording with the end state its trace leaves: one segment per block still live, of its rounded size. */
    private static TraceSnapshot withEndState(TraceSnapshot recording) {
        Map<Long, Long> live = new LinkedHashMap<>();
        for (TraceEntry e : recording.traceOf(0)) {
            if (e.action() == TraceAction.ALLOC) {
                live.put(e.addr(), e.size());
            } else if (e.action() == TraceAction.FREE_REQUESTED) {
                live.remove(e.addr());
            }
        }
        List<SegmentInfo> segments = new ArrayList<>();
        live.forEach((addr, requested) -> {
            long size = SizeRules.roundSize(requested, AllocatorConfig.defaults());
            segments.add(SegmentInfo.ofBlocks(
                    0,
                    addr,
                    0,
                    Pool.LARGE,
                    false,
                    List.of(BlockInfo.of(addr, size, requested, BlockState.ACTIVE_ALLOCATED))));
        });
        return new TraceSnapshot(
                "generated", SourceFormat.PYTORCH_SNAPSHOT, segments, recording.deviceTraces(), null, null, null, true);
    }

    private static void assertAllOther(PeakCategories p, long allocated) {
        CategoryBytes all = new CategoryBytes(-1, 0, 0, 0, 0, 0, allocated);
        assertThat(p.categories()).isNull();
        assertThat(p.peakAllocated()).isEqualTo(allocated);
        assertThat(p.peakEntry()).isEqualTo(-1);
        assertThat(p.atPeak()).isEqualTo(all);
        assertThat(p.atEnd()).isEqualTo(all);
        assertThat(p.atFailure()).isNull();
        assertThat(p.rulesAtPeak()).containsExactly(Map.entry(CategoryRule.BEFORE_THE_WINDOW, allocated));
        assertThat(p.remedies()).isEmpty();
    }

    private static DeviceAnalysis analyze(TraceSnapshot snapshot, @Nullable Integer at) {
        return DeviceAnalysis.of(
                snapshot,
                0,
                at,
                MemoryState.UNKNOWN,
                5,
                false,
                () -> {
                    throw new AssertionError("no window replay asked for");
                },
                capacity -> {
                    throw new AssertionError("no compare runs asked for");
                },
                List.of());
    }

    private static TraceSnapshot snapshot(List<TraceEntry> trace) {
        return new TraceSnapshot(
                "generated", SourceFormat.PYTORCH_SNAPSHOT, List.of(), List.of(trace), null, null, null, true);
    }

    private static Recommender.Result result(Recommendation... recommendations) {
        return new Recommender.Result(null, List.of(), List.of(recommendations), List.of());
    }

    private static List<CategoryRemedy> checkpointing(PeakCategories p) {
        return p.remedies().stream()
                .filter(r -> r.remedy().startsWith("activation checkpointing"))
                .peek(r -> assertThat(r.target()).isEqualTo(ByteCategory.ACTIVATIONS.key()))
                .toList();
    }

    private static CategoryRemedy fragmentation(PeakCategories p) {
        return p.remedies().stream()
                .filter(r -> r.target().equals("fragmentation"))
                .findFirst()
                .orElseThrow(() -> new AssertionError("no fragmentation remedy in " + p.remedies()));
    }
}
