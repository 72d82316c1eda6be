package io.gpumem.oom;

/**
 * The caching allocator could not satisfy a request even after releasing its cache (PyTorch's
 * {@code torch.OutOfMemoryError}). The message is PyTorch's text; {@link #report()} carries the figures.
 */
public class OutOfMemoryException extends RuntimeException {
    private final transient OomReport report;

    public OutOfMemoryException(OomReport report) {
        super(report.message());
        this.report = report;
    }

    /** The figures behind the message. */
    public OomReport report() {
        return report;
    }
}
