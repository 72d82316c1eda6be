package io.gpumem.trace.io;

/** Which file format a {@link TraceSnapshot} was read from. */
public enum SourceFormat {
    /** PyTorch 2.0 and older {@code memory_snapshot()}: a bare list of segments, no trace. */
    PYTORCH_SEGMENT_LIST,
    /** PyTorch {@code _snapshot()} dict: segments, device traces, optional settings and annotations. */
    PYTORCH_SNAPSHOT,
    /** RMM {@code logging_resource_adaptor} CSV: {@code Thread,Time,Action,Pointer,Size,Stream}. */
    RMM_LOG,
    /** Tensor lifetimes {@code id,lower,upper,size}: buffers live over [lower, upper). */
    LIFETIME_CSV,
    /** A {@code gpumem sim} ops script. */
    OPS_SCRIPT,
    /** Built in memory (e.g. from gpumem's own allocator). */
    GENERATED
}
