package io.gpumem.trace.session;

/**
 * A trace that was read but whose contents do not add up: its window's start state cannot be rebuilt into an
 * allocator (blocks that do not tile their segment, sizes that are not multiples of 512, ...) or a replay of it
 * meets a state the allocator refuses. The file is at fault, not gpumem; the message names the file.
 */
public final class InconsistentSnapshotException extends RuntimeException {

    /**
     * @param source the file (or other source) of the trace, as the session names it
     * @param cause  what the rebuild or the replay refused; its message says what and where
     */
    public InconsistentSnapshotException(String source, RuntimeException cause) {
        super(source + ": inconsistent snapshot: " + cause.getMessage(), cause);
    }
}
