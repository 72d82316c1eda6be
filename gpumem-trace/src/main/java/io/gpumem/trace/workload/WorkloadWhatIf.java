package io.gpumem.trace.workload;

import io.gpumem.trace.analysis.WhatIf;
import io.gpumem.engine.RunOutcome;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * The compare runs behind a table and its recommendations: a request stream re-run from scratch under each
 * configuration on the same simulated device, with the minimum capacity searched when asked. Outcomes are
 * memoised per configuration, so the table and the recommender share runs. A generated training workload
 * can also run with half its batch.
 */
public final class WorkloadWhatIf implements WhatIf {
    /** The alternatives the demo compares with the defaults. */
    public static final List<String> DEMO_ALTERNATIVES =
            List.of("expandable_segments:True", "max_split_size_mb:256", "roundup_power2_divisions:4");

    private final AllocationWorkload workload;
    private final WorkloadRunner runner;
    private final boolean withMinCapacity;
    private final Map<String, RunOutcome> cache = new HashMap<>();

    public WorkloadWhatIf(AllocationWorkload workload, WorkloadRunner runner, boolean withMinCapacity) {
        this.workload = workload;
        this.runner = runner;
        this.withMinCapacity = withMinCapacity;
    }

    @Override
    public String description() {
        return workload.describe();
    }

    @Override
    public RunOutcome run(String conf) {
        return cache.computeIfAbsent(conf, c -> outcome(workload, c, c));
    }

    @Override
    public Optional<RunOutcome> runSmallerBatch() {
        if (!(workload instanceof TrainingWorkload training) || training.settings().batch() < 2) {
            return Optional.empty();
        }
        int half = training.settings().batch() / 2;
        return Optional.of(outcome(training.withBatch(half), "", "batch " + half));
    }

    private RunOutcome outcome(AllocationWorkload w, String conf, String label) {
        WorkloadRunner.Run run = runner.run(w, conf, false);
        long min = withMinCapacity ? runner.minCapacity(w, conf) : -1;
        return run.outcome(label, runner.capacity(), min);
    }
}
