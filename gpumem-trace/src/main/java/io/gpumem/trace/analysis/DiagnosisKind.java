package io.gpumem.trace.analysis;

/** What the analysis blames for an out-of-memory or a state near capacity. */
public enum DiagnosisKind {
    /** No OOM and not near capacity (or capacity unknown): nothing to blame. */
    NONE,
    /** Enough bytes are cached free (plus driver free), but no single block fits the request. */
    FRAGMENTATION,
    /** Live tensors fill the device: even every cached byte would not fit the request. */
    LIVE_TENSORS,
    /** Memory held outside this allocator (other processes, the CUDA context, another allocator) is what is missing. */
    OUTSIDE_MEMORY
}
