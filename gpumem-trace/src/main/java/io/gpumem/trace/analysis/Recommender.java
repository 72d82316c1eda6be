package io.gpumem.trace.analysis;

import io.gpumem.engine.RunOutcome;
import io.gpumem.policy.PolicySpec;
import io.gpumem.size.ByteSize;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Optional;

/**
 * Turns a diagnosis into recommendations, each backed by a compare run of the same request stream under
 * the changed configuration when a {@link WhatIf} is available, and by the state's own arithmetic
 * otherwise.
 *
 * <p>Candidates: for fragmentation, waste or an OOM, the configuration changes in
 * {@link #CONFIG_CANDIDATES} (each merged into the configuration in force) and the allocation policies the caller
 * asks it to try (registered policies, judged by the same rule: a recommendation may be a policy); for live
 * tensors also a
 * smaller batch when the source can run one (also for an OOM that no configuration removes: a smaller batch
 * changes the job, so it is the last resort against fragmentation); {@code empty_cache()} whenever whole free segments or
 * pages are cached; freeing outside memory when the diagnosis blames it, or when a request too large for what the
 * allocator can get would fit once it is freed; shrinking the request itself when it alone is too large (never
 * shrinking live tensors then: the request fails with none live). A configuration is recommended
 * only when its run has fewer OOMs than the baseline, or as many and a positive saving. For an OOM or a
 * state near capacity, savings are the drop in minimum capacity where both runs computed it (the figure
 * that matters on a fixed-size device); for waste alone they are the drop in peak reserved (what the job
 * holds). Runs that stopped at an OOM are compared only by OOM count and minimum capacity, since their
 * peaks cover different amounts of work.
 *
 * <p>Order: the runs that do best first (fewest OOMs, then most saved), then {@code empty_cache()}, then the remedies
 * the state itself calls for (freeing outside memory, shrinking live tensors); but when the baseline fails a request
 * and no run tried removes every failure, those remedies come first, as nothing else makes the job fit.
 */
public final class Recommender {
    /** Configuration changes tried against fragmentation and waste, in this order. */
    public static final List<String> CONFIG_CANDIDATES = List.of(
            "expandable_segments:True", "max_split_size_mb:128", "max_split_size_mb:256", "max_split_size_mb:512");

    /**
     * What the recommender ran and concluded.
     *
     * @param baseline      the run under the configuration in force, or {@code null} without a what-if
     * @param alternatives  the runs under each candidate configuration (and the smaller batch)
     * @param recommendations the useful actions, best first
     * @param notes         caveats (e.g. no request stream to replay)
     */
    public record Result(
            RunOutcome baseline,
            List<RunOutcome> alternatives,
            List<Recommendation> recommendations,
            List<String> notes) {
        public Result {
            alternatives = List.copyOf(alternatives);
            recommendations = List.copyOf(recommendations);
            notes = List.copyOf(notes);
        }
    }

    /** Whether {@link #recommend} will run the what-if for this analysis: a diagnosis, or severe waste. */
    public static boolean wantsCompareRuns(StateAnalysis analysis) {
        return analysis.diagnosis().kind() != DiagnosisKind.NONE
                || analysis.all().reservedPerAllocated() > DiagnosisRules.SEVERE_WASTE_RATIO;
    }

    /** The configurations {@link #recommend} runs for a state recorded under {@code baseConf}, baseline first. */
    public static List<String> configurationsTried(String baseConf) {
        List<String> confs = new ArrayList<>();
        confs.add(baseConf);
        for (String candidate : CONFIG_CANDIDATES) {
            String conf = merge(baseConf, candidate);
            if (!confs.contains(conf)) {
                confs.add(conf);
            }
        }
        return confs;
    }

    /**
     * Recommends for the analysed state, trying configurations only.
     *
     * @param whatIf the request stream to replay, or {@code null} for a state-only snapshot
     */
    public Result recommend(StateAnalysis analysis, WhatIf whatIf) {
        return recommend(analysis, whatIf, List.of());
    }

    /**
     * Recommends for the analysed state, trying {@code policies} as well as the configurations.
     *
     * @param whatIf   the request stream to replay, or {@code null} for a state-only snapshot
     * @param policies allocation policies to try beside the configurations (in this order)
     */
    public Result recommend(StateAnalysis analysis, WhatIf whatIf, List<PolicySpec> policies) {
        Diagnosis diagnosis = analysis.diagnosis();
        PoolUsage all = analysis.all();
        String baseConf = analysis.state().allocatorConf().orElse("");
        List<String> notes = new ArrayList<>();
        List<Recommendation> recs = new ArrayList<>();
        List<RunOutcome> alternatives = new ArrayList<>();
        RunOutcome baseline = null;
        // An OOM no run removes: the remedies the state calls for (less live memory, less outside) come first.
        boolean noRunFixesOom = false;

        boolean troubled = wantsCompareRuns(analysis);
        // An OOM or a state near capacity is about fitting the device: judge by minimum capacity. Waste alone is
        // about what the job holds: judge by peak reserved.
        boolean byCapacity = diagnosis.kind() != DiagnosisKind.NONE;
        if (troubled && whatIf != null) {
            // every run below at once, one per core; the loops then read them in order
            whatIf.prefetch(configurationsTried(baseConf), policies);
            baseline = whatIf.run(baseConf);
            List<Recommendation> configRecs = new ArrayList<>();
            for (String candidate : CONFIG_CANDIDATES) {
                String conf = merge(baseConf, candidate);
                if (conf.equals(baseConf)) {
                    continue;
                }
                RunOutcome outcome = whatIf.run(conf);
                alternatives.add(outcome);
                compare(baseline, outcome, "PYTORCH_CUDA_ALLOC_CONF=" + conf, byCapacity)
                        .ifPresent(configRecs::add);
            }
            for (PolicySpec policy : policies) {
                RunOutcome outcome = whatIf.run(policy);
                alternatives.add(outcome);
                compare(
                                baseline,
                                outcome,
                                "use allocation policy " + policy.label() + " (gpumem compare --policy "
                                        + policy.label() + ")",
                                byCapacity)
                        .ifPresent(configRecs::add);
            }
            boolean configFixesOom = baseline.ooms() > 0
                    && configRecs.stream().anyMatch(r -> r.outcome().ooms() == 0);
            if (diagnosis.kind() == DiagnosisKind.LIVE_TENSORS || (baseline.ooms() > 0 && !configFixesOom)) {
                Optional<RunOutcome> smaller = whatIf.runSmallerBatch();
                smaller.ifPresent(alternatives::add);
                RunOutcome base = baseline;
                smaller.flatMap(o -> compare(base, o, "use a smaller batch (" + o.label() + ")", byCapacity))
                        .ifPresent(configRecs::add);
            }
            configRecs.sort(
                    Comparator.comparingLong((Recommendation r) -> r.outcome().ooms())
                            .thenComparing(Comparator.comparingLong(Recommendation::bytesSaved)
                                    .reversed()));
            recs.addAll(configRecs);
            noRunFixesOom = baseline.ooms() > 0
                    && configRecs.stream().noneMatch(r -> r.outcome().ooms() == 0);
            if (noRunFixesOom) {
                alternatives.stream()
                        .filter(o -> o.minCapacity() >= 0)
                        .min(Comparator.comparingLong(RunOutcome::minCapacity))
                        .ifPresent(best -> notes.add("no run tried fits this device: the least demanding ("
                                + (best.label().isEmpty() ? "defaults" : best.label()) + ") needs "
                                + ByteSize.formatSigned(best.minCapacity()) + " of device memory"));
            }
            if (configRecs.isEmpty()) {
                List<String> tried = new ArrayList<>(CONFIG_CANDIDATES);
                policies.forEach(p -> tried.add(WhatIf.policyLabel(p)));
                notes.add("no " + (policies.isEmpty() ? "configuration" : "configuration or policy") + " tried ("
                        + String.join(", ", tried) + ") did better than the baseline on " + whatIf.description());
            }
        } else if (troubled) {
            notes.add("no request stream to replay (state-only snapshot or no trace entries): configuration effects are"
                    + " not measured; figures below come from the state alone");
            if (diagnosis.kind() == DiagnosisKind.FRAGMENTATION) {
                recs.add(new Recommendation(
                        "PYTORCH_CUDA_ALLOC_CONF=" + merge(baseConf, "expandable_segments:True") + " (not measured)",
                        0,
                        "state: up to " + ByteSize.formatSigned(all.unallocated())
                                + " reserved but unallocated could become reusable; free space pinned between live blocks stays",
                        null));
            }
        }
        if (all.releasable() > 0) {
            recs.add(new Recommendation(
                    "torch.cuda.empty_cache() at this point",
                    all.releasable(),
                    "state: whole free segments (or whole free pages of expandable segments) that the cache holds",
                    null));
        }
        List<Recommendation> stateRemedies = new ArrayList<>();
        if (diagnosis.kind() == DiagnosisKind.REQUEST_TOO_LARGE) {
            // no tensor to shrink: only the request itself, or (when it fits the device) the memory held outside
            stateRemedies.add(new Recommendation(
                    "make the failed request smaller by at least " + ByteSize.formatSigned(diagnosis.shortfall())
                            + " (split the tensor, or a smaller batch or sequence length for it)",
                    diagnosis.shortfall(),
                    "state: the request's new segment minus reserved and driver-free bytes",
                    null));
        }
        boolean outsideBlocks = diagnosis.kind() == DiagnosisKind.OUTSIDE_MEMORY
                || (diagnosis.kind() == DiagnosisKind.REQUEST_TOO_LARGE
                        && diagnosis.outside() >= diagnosis.shortfall());
        if (outsideBlocks && diagnosis.outside() > 0) {
            stateRemedies.add(new Recommendation(
                    "free memory held outside the allocator (other processes, other allocators,"
                            + " a second CUDA context)",
                    diagnosis.outside(),
                    "state: capacity - reserved - driver free",
                    null));
        }
        if (diagnosis.kind() == DiagnosisKind.LIVE_TENSORS && diagnosis.shortfall() > 0) {
            stateRemedies.add(new Recommendation(
                    "shrink live tensors by at least " + ByteSize.formatSigned(diagnosis.shortfall())
                            + " (smaller batch or sequence length, activation checkpointing, lower-precision optimizer state)",
                    diagnosis.shortfall(),
                    "state: the failed request minus every cached and driver-free byte",
                    null));
        }
        recs.addAll(noRunFixesOom ? 0 : recs.size(), stateRemedies);
        if (!troubled) {
            notes.add("nothing to fix: no OOM, not near capacity, reserved/allocated within "
                    + DiagnosisRules.SEVERE_WASTE_RATIO);
        }
        return new Result(baseline, alternatives, recs, notes);
    }

    /**
     * A recommendation when {@code outcome} beats {@code baseline}; empty otherwise. The saving is the drop in
     * minimum capacity when {@code byCapacity} and both runs computed it, else the drop in peak reserved when
     * neither run stopped at an OOM (runs that stopped early did different amounts of work), else 0.
     */
    static Optional<Recommendation> compare(
            RunOutcome baseline, RunOutcome outcome, String action, boolean byCapacity) {
        boolean capacityKnown = baseline.minCapacity() >= 0 && outcome.minCapacity() >= 0;
        boolean bothCompleted = baseline.ooms() == 0 && outcome.ooms() == 0;
        boolean measureCapacity = capacityKnown && (byCapacity || !bothCompleted);
        String capacityPart = "minimum capacity " + ByteSize.formatSigned(baseline.minCapacity()) + " -> "
                + ByteSize.formatSigned(outcome.minCapacity());
        String reservedPart = "peak reserved " + ByteSize.formatSigned(baseline.peakReserved()) + " -> "
                + ByteSize.formatSigned(outcome.peakReserved());
        long saved = 0;
        List<String> parts = new ArrayList<>();
        if (measureCapacity) {
            saved = baseline.minCapacity() - outcome.minCapacity();
            parts.add(capacityPart);
            if (bothCompleted) {
                parts.add(reservedPart);
            }
        } else if (bothCompleted) {
            saved = baseline.peakReserved() - outcome.peakReserved();
            parts.add(reservedPart);
            if (capacityKnown) {
                parts.add(capacityPart);
            }
        }
        if (baseline.ooms() != outcome.ooms()) {
            parts.add("OOMs " + baseline.ooms() + " -> " + outcome.ooms());
        }
        StringBuilder basis = new StringBuilder("compare run: ");
        basis.append(String.join(", ", parts));
        boolean better = outcome.ooms() < baseline.ooms() || (outcome.ooms() == baseline.ooms() && saved > 0);
        return better
                ? Optional.of(new Recommendation(action, Math.max(0, saved), basis.toString(), outcome))
                : Optional.empty();
    }

    /**
     * Merges one {@code key:value} option into a configuration string, replacing the same key if present.
     */
    public static String merge(String baseConf, String option) {
        String key = option.substring(0, option.indexOf(':'));
        List<String> parts = new ArrayList<>();
        boolean replaced = false;
        for (String part : baseConf.split(",", -1)) { // empty parts are skipped below
            String p = part.trim();
            if (p.isEmpty()) {
                continue;
            }
            int colon = p.indexOf(':');
            String k = colon < 0 ? p : p.substring(0, colon).trim();
            if (k.equals(key)) {
                if (!replaced) {
                    parts.add(option);
                    replaced = true;
                }
            } else {
                parts.add(p);
            }
        }
        if (!replaced) {
            parts.add(option);
        }
        return String.join(",", parts);
    }
}
