package io.gpumem.trace.replay;

/**
 * Receives progress: units done out of a total, called every so often and at the end ({@code done == total}): entries
 * of a replay every few thousand, what-if runs as each ends, bytes of a file as each chunk is read.
 */
@FunctionalInterface
public interface ProgressListener {
    ProgressListener NONE = (done, total) -> {};

    void progress(long done, long total);
}
