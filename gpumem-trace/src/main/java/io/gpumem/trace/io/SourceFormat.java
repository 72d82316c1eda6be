package io.gpumem.trace.io;

/** Which file format a {@link TraceSnapshot} was read from, and how messages name it. */
public enum SourceFormat {
    /** PyTorch 2.0 and older {@code memory_snapshot()}: a bare list of segments, no trace. */
    PYTORCH_SEGMENT_LIST("PyTorch segment list"),
    /** PyTorch {@code _snapshot()} dict: segments, device traces, optional settings and annotations. */
    PYTORCH_SNAPSHOT("PyTorch snapshot"),
    /** RMM {@code logging_resource_adaptor} CSV: {@code Thread,Time,Action,Pointer,Size,Stream}. */
    RMM_LOG("RMM log"),
    /** Tensor lifetimes {@code id,lower,upper,size}: buffers live over [lower, upper). */
    LIFETIME_CSV("tensor-lifetime CSV"),
    /** A {@code gpumem sim} ops script. */
    OPS_SCRIPT("gpumem sim ops script"),
    /** Built in memory (e.g. from gpumem's own allocator). */
    GENERATED("generated trace");

    private final String description;

    SourceFormat(String description) {
        this.description = description;
    }

    /** The format as a message names it: {@code tensor-lifetime CSV}, {@code RMM log}, ... */
    public String description() {
        return description;
    }
}
