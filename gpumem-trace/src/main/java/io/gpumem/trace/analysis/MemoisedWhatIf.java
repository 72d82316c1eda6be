package io.gpumem.trace.analysis;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.engine.ParallelRuns;
import io.gpumem.engine.RunOutcome;
import io.gpumem.policy.PolicySpec;
import io.gpumem.trace.replay.ProgressListener;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;

/**
 * A {@link WhatIf} whose run methods are memoised: a subclass says how to run the stream once under a configuration
 * string or a policy ({@link #evaluate(String)}, {@link #evaluate(PolicySpec)}); each is run once here, and its
 * outcome, or the exception it threw, is what every later call gets. {@link #prefetch} runs many at once, one per
 * core ({@link ParallelRuns}), so that a caller asking for them one by one (the recommender, a report's rows) finds
 * them done; since a run's outcome does not depend on what ran beside it, the figures are the sequential ones.
 *
 * <p>Invariants: the maps are touched only by the thread that owns the what-if (the runs themselves may go to
 * other threads, and only compute); a key is run at most once, a failure included.
 */
public abstract class MemoisedWhatIf implements WhatIf {
    private final ProgressListener progress;
    private final Map<String, ParallelRuns.Attempt<RunOutcome>> confs = new HashMap<>();
    private final Map<PolicySpec, ParallelRuns.Attempt<RunOutcome>> policies = new HashMap<>();

    /** @param progress told how many runs of a {@link #prefetch} are done */
    protected MemoisedWhatIf(ProgressListener progress) {
        this.progress = progress;
    }

    /** Runs the stream once under a configuration string, unmemoised (safe to call from several threads at once). */
    protected abstract RunOutcome evaluate(String conf);

    /** Runs the stream once under a policy, unmemoised (likewise). */
    protected abstract RunOutcome evaluate(PolicySpec policy);

    /** The outcome under {@code conf}, run now unless it already was; a failed run's exception is rethrown. */
    @Override
    public final RunOutcome run(String conf) {
        return confs.computeIfAbsent(conf, c -> attempt(() -> evaluate(c))).get();
    }

    /** The outcome under {@code policy}, run now unless it already was; a failed run's exception is rethrown. */
    @Override
    public final RunOutcome run(PolicySpec policy) {
        return policies.computeIfAbsent(policy, p -> attempt(() -> evaluate(p))).get();
    }

    /**
     * Runs every configuration and policy not run yet, in parallel; failures are kept for the {@code run} call that
     * asks for them, so nothing is thrown here.
     */
    @Override
    public final void prefetch(List<String> confList, List<PolicySpec> policyList) {
        List<String> newConfs = new ArrayList<>();
        for (String c : confList) {
            if (!confs.containsKey(c) && !newConfs.contains(c)) {
                newConfs.add(c);
            }
        }
        List<PolicySpec> newPolicies = new ArrayList<>();
        for (PolicySpec p : policyList) {
            if (!policies.containsKey(p) && !newPolicies.contains(p)) {
                newPolicies.add(p);
            }
        }
        int total = newConfs.size() + newPolicies.size();
        if (total == 0) {
            return;
        }
        List<Supplier<RunOutcome>> runs = new ArrayList<>(total);
        newConfs.forEach(c -> runs.add(() -> evaluate(c)));
        newPolicies.forEach(p -> runs.add(() -> evaluate(p)));
        // started longest first, so that the short runs fill the cores at the end; each result goes back to its key
        int[] order = longestFirst(newConfs, newPolicies.size());
        List<Supplier<RunOutcome>> started = new ArrayList<>(total);
        for (int i : order) {
            started.add(runs.get(i));
        }
        progress.progress(0, total);
        List<ParallelRuns.Attempt<RunOutcome>> finished =
                ParallelRuns.all(started, ParallelRuns.threads(), done -> progress.progress(done, total));
        List<ParallelRuns.Attempt<RunOutcome>> results = new ArrayList<>(finished);
        for (int k = 0; k < total; k++) {
            results.set(order[k], finished.get(k));
        }
        for (int i = 0; i < newConfs.size(); i++) {
            confs.put(newConfs.get(i), results.get(i));
        }
        for (int i = 0; i < newPolicies.size(); i++) {
            policies.put(newPolicies.get(i), results.get(newConfs.size() + i));
        }
    }

    /**
     * The order to start {@code confs} and then {@code policies} runs in: the configurations with
     * {@code max_split_size_mb} first (a capacity search under it keeps oversize blocks cached until the device is
     * full, so that every probe replays most of the stream: on the 2,000-step demo snapshot its three searches are
     * three quarters of {@code analyze}'s replaying), then the others as given. Started last, the longest search left
     * one core idle for its final half second.
     */
    static int[] longestFirst(List<String> confs, int policies) {
        int[] order = new int[confs.size() + policies];
        int next = 0;
        for (int pass = 0; pass < 2; pass++) {
            for (int i = 0; i < confs.size(); i++) {
                if (limitsSplits(confs.get(i)) == (pass == 0)) {
                    order[next++] = i;
                }
            }
        }
        for (int i = 0; i < policies; i++) {
            order[next++] = confs.size() + i;
        }
        return order;
    }

    private static boolean limitsSplits(String conf) {
        try {
            return AllocatorConfig.parse(conf).maxSplitSize() != AllocatorConfig.UNLIMITED;
        } catch (RuntimeException malformed) {
            return false; // its run fails at once, and its failure is kept for the call that asks for it
        }
    }

    private static ParallelRuns.Attempt<RunOutcome> attempt(Supplier<RunOutcome> run) {
        return ParallelRuns.all(List.of(run), 1, done -> {}).getFirst();
    }
}
