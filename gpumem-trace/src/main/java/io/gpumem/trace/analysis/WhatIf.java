package io.gpumem.trace.analysis;

import io.gpumem.engine.RunOutcome;
import io.gpumem.policy.PolicySpec;
import java.util.List;
import java.util.Optional;

/**
 * A request stream that can be run again under another allocator configuration or allocation policy: the
 * compare run that backs a recommendation. A generated workload implements it by re-running its ops; a trace by
 * replaying its window. Both run on the engine's one runner.
 */
public interface WhatIf {
    /** What is replayed, for the report (e.g. "the demo workload, 20 steps"). */
    String description();

    /**
     * Runs the request stream from scratch under {@code allocatorConf} ({@code PYTORCH_CUDA_ALLOC_CONF}
     * syntax; "" for the defaults) and reports how it went.
     */
    RunOutcome run(String allocatorConf);

    /**
     * Runs the request stream from scratch under allocation policy {@code policy} (a registered policy with its
     * options) and reports how it went, labelled as compare labels a policy row.
     */
    RunOutcome run(PolicySpec policy);

    /**
     * Runs these configurations and policies now, ahead of the {@code run} calls that will ask for them, in
     * parallel where the source can; each later call gives what it would have given alone (its outcome, or its
     * exception, which is kept for it rather than thrown here). A source that cannot run ahead does nothing.
     */
    default void prefetch(List<String> confs, List<PolicySpec> policies) {}

    /** How a policy's row is labelled in a table of configurations: {@code policy NAME[:OPTIONS]}. */
    static String policyLabel(PolicySpec policy) {
        return "policy " + policy.label();
    }

    /** Runs the stream with a smaller batch under the baseline config, where the source can (a trace cannot). */
    default Optional<RunOutcome> runSmallerBatch() {
        return Optional.empty();
    }
}
