package io.gpumem.trace.io;

/** Which file format a {@link TraceSnapshot} was read from, and how messages name it. */
public enum SourceFormat {
    /** PyTorch 2.0 and older {@code memory_snapshot()}: a bare list of segments, no trace. */
    PYTORCH_SEGMENT_LIST("a PyTorch segment list"),
    /** PyTorch {@code _snapshot()} dict: segments, device traces, optional settings and annotations. */
    PYTORCH_SNAPSHOT("a PyTorch snapshot"),
    /** RMM {@code logging_resource_adaptor} CSV: {@code Thread,Time,Action,Pointer,Size,Stream}. */
    RMM_LOG("an RMM log"),
    /** Tensor lifetimes {@code id,lower,upper,size}: buffers live over [lower, upper). */
    LIFETIME_CSV("a tensor-lifetime CSV"),
    /** A {@code gpumem sim} ops script. */
    OPS_SCRIPT("a gpumem sim ops script"),
    /** Built in memory (e.g. from gpumem's own allocator). */
    GENERATED("a generated trace");

    /** The format as a message names it after its indefinite article: {@code an RMM log}. */
    private final String withArticle;

    SourceFormat(String withArticle) {
        this.withArticle = withArticle;
    }

    /** The format as a message names it: {@code tensor-lifetime CSV}, {@code RMM log}, ... */
    public String description() {
        return withArticle.substring(withArticle.indexOf(' ') + 1);
    }

    /** {@link #description()} after its indefinite article: {@code an RMM log}, {@code a PyTorch snapshot}. */
    public String withArticle() {
        return withArticle;
    }
}
