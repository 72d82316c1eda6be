package io.gpumem.trace.category;

import io.gpumem.trace.analysis.DeviceAnalysis;
import io.gpumem.trace.analysis.Recommendation;
import io.gpumem.trace.analysis.Recommender;
import io.gpumem.trace.io.TraceSnapshot;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.EnumMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.function.Supplier;

/**
 * What {@code analyze}, {@code demo} and the report say about one device's live bytes: the six categories at peak
 * allocated, at the failing request of an OOM and at the end; how the split at the peak was reached (bytes per
 * {@link CategoryRule}); and the remedies, each with what it would save at the peak, ranked by that.
 *
 * <p>The remedies and the models behind their figures (estimates, stated as such, erring low):
 * <ul>
 *   <li><b>activations</b>, activation checkpointing: {@code checkpoint_sequential} over {@code n} blocks in
 *       {@code s = round(sqrt(n))} segments keeps the {@code s} segment inputs and, while one segment is
 *       recomputed, that segment's activations: taken as {@code 2 * sqrt(n)} of {@code n} blocks' activations, so it
 *       saves {@code activations * (1 - 2 / sqrt(n))} (a segment input is smaller than a block's saved tensors).
 *       {@code n} is the workload's layer count where known (the demo), else {@link #DEFAULT_CHECKPOINT_BLOCKS}.
 *       A smaller batch: activations and temporaries grow linearly with batch times length, the rest does not, so
 *       half the batch saves half of both; two recordings at two batch sizes make it exact ({@code gpumem predict
 *       --fit}).</li>
 *   <li><b>optimizer state</b>: 8-bit states (bitsandbytes {@code AdamW8bit}) store fp32's 4 bytes per value in 1,
 *       saving 75%; offloading to the CPU saves all of it.</li>
 *   <li><b>gradients</b>: those at the peak that an earlier step allocated are freed by
 *       {@code zero_grad(set_to_none=True)}; an optimizer step in backward frees each gradient once its parameter is
 *       updated, leaving at most the largest one live.</li>
 *   <li><b>fragmentation</b>: the recommender's best compare-run configuration or policy, its own figure.</li>
 * </ul>
 *
 * <p>Invariants: the three splits each sum to the allocated bytes at their moment ({@link #atPeak()} to
 * {@link #peakAllocated()}); remedies save more than zero and come best first. Immutable.
 */
public final class PeakCategories {
    /** Blocks assumed for activation checkpointing when the recording does not say how many (a trace does not). */
    public static final int DEFAULT_CHECKPOINT_BLOCKS = 16;

    private final ByteCategories categories;
    private final long peakAllocated;
    private final int peakEntry;
    private final CategoryBytes atPeak;
    private final CategoryBytes atEnd;
    private final CategoryBytes atFailure;
    private final Map<CategoryRule, Long> rulesAtPeak;
    private final List<String> notes;
    private final List<CategoryRemedy> remedies;

    private PeakCategories(
            ByteCategories categories,
            long peakAllocated,
            int peakEntry,
            CategoryBytes atPeak,
            CategoryBytes atEnd,
            CategoryBytes atFailure,
            Map<CategoryRule, Long> rulesAtPeak,
            List<String> notes,
            List<CategoryRemedy> remedies) {
        this.categories = categories;
        this.peakAllocated = peakAllocated;
        this.peakEntry = peakEntry;
        this.atPeak = atPeak;
        this.atEnd = atEnd;
        this.atFailure = atFailure;
        this.rulesAtPeak = rulesAtPeak;
        this.notes = List.copyOf(notes);
        this.remedies = List.copyOf(remedies);
    }

    /**
     * The categories of {@code device} as {@code analysis} saw it: the split at its failing request when the analysed
     * state is an OOM, remedies ranked with the recommender's best configuration or policy among them. A device with
     * no request to classify (a state-only snapshot), or whose window cannot be classified, gets every live byte of
     * the analysed state as {@code other}, with a note saying why.
     *
     * @param checkpointBlocks the {@code n} of the checkpointing model, or ≤ 0 for {@link #DEFAULT_CHECKPOINT_BLOCKS}
     */
    public static PeakCategories of(TraceSnapshot trace, int device, DeviceAnalysis analysis, int checkpointBlocks) {
        return of(trace, device, analysis, checkpointBlocks, () -> ByteCategories.of(trace, device));
    }

    /**
     * As {@link #of(TraceSnapshot, int, DeviceAnalysis, int)}, the blocks classified by {@code classify} (a
     * session's classification over its own window), asked for only when the device has requests; what it throws
     * makes the split unclassified, as a window that cannot be classified does.
     */
    public static PeakCategories of(
            TraceSnapshot trace,
            int device,
            DeviceAnalysis analysis,
            int checkpointBlocks,
            Supplier<ByteCategories> classify) {
        boolean failed = analysis.analysis().state().oom().isPresent();
        if (!DeviceAnalysis.hasRequests(trace.traceOf(device))) {
            return unclassified(
                    analysis,
                    "no alloc entry to classify (a state-only snapshot): every live byte is other, allocated before"
                            + " recording began (rule before the window)");
        }
        ByteCategories c;
        try {
            c = classify.get();
        } catch (RuntimeException e) {
            return unclassified(
                    analysis, "the window could not be classified (" + e.getMessage() + "): every live byte is other");
        }
        return of(c, failed ? analysis.end() - 1 : -1, analysis.recommendations(), checkpointBlocks);
    }

    /**
     * The split of classified blocks at the peak, the end and (when {@code failureEntry ≥ 0}) just before the
     * request that failed at trace entry {@code failureEntry}, with the remedies.
     *
     * @param recommendations the recommender's result (its best configuration or policy is the fragmentation remedy)
     */
    public static PeakCategories of(
            ByteCategories c, int failureEntry, Recommender.Result recommendations, int checkpointBlocks) {
        CategoryBytes peak = c.atPeak();
        List<String> notes = new ArrayList<>();
        if (!c.framed()) {
            notes.add("no request carries stack frames, so no phase is known: only scratch freed before the next"
                    + " request is told apart (temporaries); parameters, gradients, optimizer state and activations"
                    + " all fall to other");
        } else if (peak.other() > 0) {
            notes.add("other at the peak: " + otherRules(c.rulesAt(c.peakEntry())));
        }
        return new PeakCategories(
                c,
                c.peakAllocated(),
                c.peakEntry(),
                peak,
                c.atEnd(),
                failureEntry >= 0 ? c.at(failureEntry) : null,
                c.rulesAt(c.peakEntry()),
                notes,
                remedies(c, peak, recommendations, checkpointBlocks));
    }

    private static PeakCategories unclassified(DeviceAnalysis analysis, String why) {
        long allocated = analysis.analysis().all().allocated();
        CategoryBytes all = new CategoryBytes(-1, 0, 0, 0, 0, 0, allocated);
        Map<CategoryRule, Long> rules = new EnumMap<>(CategoryRule.class);
        if (allocated > 0) {
            rules.put(CategoryRule.BEFORE_THE_WINDOW, allocated);
        }
        return new PeakCategories(
                null,
                allocated,
                -1,
                all,
                all,
                analysis.analysis().state().oom().isPresent() ? all : null,
                rules,
                List.of(why),
                fragmentation(analysis.recommendations()).stream().toList());
    }

    private static String otherRules(Map<CategoryRule, Long> rules) {
        List<String> parts = new ArrayList<>();
        rules.entrySet().stream()
                .filter(e -> e.getKey().category() == ByteCategory.OTHER)
                .sorted(Map.Entry.<CategoryRule, Long>comparingByValue().reversed())
                .forEach(e -> parts.add(describe(e.getKey())));
        return String.join("; ", parts);
    }

    /** A rule as the printed split names it, e.g. "saved for backward". */
    public static String ruleName(CategoryRule rule) {
        return rule.name().toLowerCase(Locale.ROOT).replace('_', ' ');
    }

    private static String describe(CategoryRule rule) {
        return switch (rule) {
            case BEFORE_THE_WINDOW -> "blocks live before recording began (no frames, no allocation time)";
            case NO_FRAMES -> "requests recorded without stack frames";
            case NO_PHASE -> "requests whose frames name no forward, backward or optimizer step (data, setup, loss)";
            case NO_LIFETIME_RULE -> "requests whose lifetime fits no rule (e.g. outputs kept past the step)";
            default -> ruleName(rule);
        };
    }

    private static List<CategoryRemedy> remedies(
            ByteCategories c, CategoryBytes peak, Recommender.Result recommendations, int checkpointBlocks) {
        List<CategoryRemedy> out = new ArrayList<>();
        long activations = peak.activations();
        if (activations > 0) {
            boolean assumed = checkpointBlocks <= 0;
            int n = assumed ? DEFAULT_CHECKPOINT_BLOCKS : checkpointBlocks;
            long segments = Math.max(1, Math.round(Math.sqrt(n)));
            long saves = (long) (activations * Math.max(0.0, 1.0 - 2.0 / Math.sqrt(n)));
            if (saves > 0) {
                out.add(new CategoryRemedy(
                        ByteCategory.ACTIVATIONS.key(),
                        "activation checkpointing in " + segments + " segments of " + n + " blocks",
                        saves,
                        "checkpoint_sequential keeps each segment's input and recomputes one segment at a time:"
                                + " taken as 2*sqrt(n) of n blocks' activations, n = " + n
                                + (assumed
                                        ? " assumed (a recording does not say how many blocks the model has)"
                                        : " (the workload's layers)"),
                        true,
                        "torch.utils.checkpoint.checkpoint_sequential(blocks, " + segments
                                + ", x, use_reentrant=False) in forward, or model.gradient_checkpointing_enable()"
                                + " in Hugging Face transformers"));
            }
            out.add(new CategoryRemedy(
                    ByteCategory.ACTIVATIONS.key(),
                    "half the batch (or the sequence length)",
                    (activations + peak.temporaries()) / 2,
                    "activations and temporaries taken as linear in batch x length, the rest as fixed; exact with"
                            + " two recordings at two batch sizes: gpumem predict A.pickle@BATCH_A B.pickle@BATCH_B"
                            + " --fit CAPACITY",
                    true,
                    "halve the DataLoader's batch_size and accumulate gradients over 2 micro-batches"
                            + " (loss / 2; optimizer.step() every second batch) to keep the effective batch"));
        }
        long optimizer = peak.optimizerState();
        if (optimizer > 0) {
            out.add(new CategoryRemedy(
                    ByteCategory.OPTIMIZER_STATE.key(),
                    "8-bit optimizer states (bitsandbytes AdamW8bit)",
                    optimizer - optimizer / 4,
                    "fp32 states, 4 bytes per value, stored in 1 (block-wise quantised; its per-block scales"
                            + " ignored): 75% of the optimizer state",
                    true,
                    "optimizer = bitsandbytes.optim.AdamW8bit(model.parameters(), lr=lr)"));
            out.add(new CategoryRemedy(
                    ByteCategory.OPTIMIZER_STATE.key(),
                    "offload the optimizer state to CPU memory",
                    optimizer,
                    "every optimizer-state byte at the peak leaves the device; the optimizer step runs on the CPU",
                    false,
                    "needs DeepSpeed ZeRO-Offload, \"zero_optimization\": {\"stage\": 2,"
                            + " \"offload_optimizer\": {\"device\": \"cpu\"}}"));
        }
        if (peak.gradients() > 0) {
            gradientRemedies(c, out);
        }
        fragmentation(recommendations).ifPresent(out::add);
        out.sort(Comparator.comparingLong(CategoryRemedy::saves).reversed());
        out.removeIf(r -> r.saves() <= 0);
        return out;
    }

    private static void gradientRemedies(ByteCategories c, List<CategoryRemedy> out) {
        int peakEntry = c.peakEntry();
        int peakStep = -1;
        for (CategorizedBlock b : c.blocks()) {
            if (b.request() >= 0 && b.allocEntry() <= peakEntry) {
                peakStep = b.step();
            }
        }
        long earlier = 0;
        long total = 0;
        long largest = 0;
        for (CategorizedBlock b : c.blocks()) {
            if (b.category() == ByteCategory.GRADIENTS && b.liveAt(peakEntry)) {
                total += b.bytes();
                largest = Math.max(largest, b.bytes());
                if (b.step() < peakStep) {
                    earlier += b.bytes();
                }
            }
        }
        out.add(new CategoryRemedy(
                ByteCategory.GRADIENTS.key(),
                "free gradients after each optimizer step",
                earlier,
                "the gradients live at the peak that an earlier step's backward allocated (an upper bound when the"
                        + " peak lies in backward, which allocates them again)",
                true,
                "optimizer.zero_grad(set_to_none=True) (the default since PyTorch 2.0; zeroing in place keeps them)"));
        out.add(new CategoryRemedy(
                ByteCategory.GRADIENTS.key(),
                "optimizer step in backward",
                total - largest,
                "each gradient freed once its parameter is updated, so at most the largest one is live (an upper"
                        + " bound; not with gradient accumulation or clipping by the global norm)",
                true,
                "p.register_post_accumulate_grad_hook(step_and_free) for each parameter, one optimizer per"
                        + " parameter (PyTorch 2.1+)"));
    }

    /** The recommender's best configuration or policy that a compare run measured, as the fragmentation remedy. */
    private static Optional<CategoryRemedy> fragmentation(Recommender.Result result) {
        for (Recommendation r : result.recommendations()) {
            boolean conf = r.action().startsWith("PYTORCH_CUDA_ALLOC_CONF=");
            boolean policy = r.action().startsWith("use allocation policy ");
            if (r.outcome() != null && r.bytesSaved() > 0 && (conf || policy)) {
                return Optional.of(new CategoryRemedy(
                        "fragmentation",
                        conf ? "the best allocator configuration" : "the best allocation policy",
                        r.bytesSaved(),
                        r.basis(),
                        conf,
                        conf
                                ? "export " + r.action() + " before the process starts"
                                : r.action().substring("use ".length()) + " exists in gpumem only"));
            }
        }
        return Optional.empty();
    }

    /** The classification behind the split, or {@code null} when the device had nothing to classify. */
    public ByteCategories categories() {
        return categories;
    }

    /** Peak allocated bytes of the window (requests at their rounded size); {@link #atPeak()} sums to it. */
    public long peakAllocated() {
        return peakAllocated;
    }

    /** The entry after which allocated bytes first peak; −1 at the window's start or without entries. */
    public int peakEntry() {
        return peakEntry;
    }

    public CategoryBytes atPeak() {
        return atPeak;
    }

    public CategoryBytes atEnd() {
        return atEnd;
    }

    /** The split just before the failing request of an OOM, or {@code null} when the analysed state is no OOM. */
    public CategoryBytes atFailure() {
        return atFailure;
    }

    /** Bytes per rule at the peak. */
    public Map<CategoryRule, Long> rulesAtPeak() {
        return rulesAtPeak;
    }

    /** What the split cannot tell, and what falls to other and why. */
    public List<String> notes() {
        return notes;
    }

    /** The remedies, best first. */
    public List<CategoryRemedy> remedies() {
        return remedies;
    }
}
