package io.gpumem.trace.analysis;

import io.gpumem.engine.RunOutcome;
import java.util.Optional;

/**
 * A request stream that can be run again under another allocator configuration: the compare run that
 * backs a recommendation. A generated workload implements it by re-running its ops; a trace by replaying
 * its alloc/free entries.
 */
public interface WhatIf {
    /** What is replayed, for the report (e.g. "the demo workload, 20 steps"). */
    String description();

    /**
     * Runs the request stream from scratch under {@code allocatorConf} ({@code PYTORCH_CUDA_ALLOC_CONF}
     * syntax; "" for the defaults) and reports how it went.
     */
    RunOutcome run(String allocatorConf);

    /** Runs the stream with a smaller batch under the baseline config, where the source can (a trace cannot). */
    default Optional<RunOutcome> runSmallerBatch() {
        return Optional.empty();
    }
}
