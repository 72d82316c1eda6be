package io.gpumem.trace.replay;

/** Receives replay progress: entries done out of a total, called every few thousand entries and at the end. */
@FunctionalInterface
public interface ProgressListener {
    ProgressListener NONE = (done, total) -> {};

    void progress(long done, long total);
}
