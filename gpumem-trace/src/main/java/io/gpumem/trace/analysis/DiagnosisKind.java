package io.gpumem.trace.analysis;

/** What the analysis blames for an out-of-memory or a state near capacity. */
public enum DiagnosisKind {
    /** No OOM and not near capacity (or capacity unknown): nothing to blame. */
    NONE,
    /** Enough bytes are cached free (plus driver free), but no single block fits the request. */
    FRAGMENTATION,
    /** Live tensors fill the device: even every cached byte would not fit the request. */
    LIVE_TENSORS,
    /**
     * The failed request alone needs more than the allocator holds or could get (reserved + driver free: the device,
     * less memory held outside it): it fails with no tensor live, so no shrinking of live tensors helps.
     */
    REQUEST_TOO_LARGE,
    /** Memory held outside this allocator (other processes, the CUDA context, another allocator) is what is missing. */
    OUTSIDE_MEMORY
}
