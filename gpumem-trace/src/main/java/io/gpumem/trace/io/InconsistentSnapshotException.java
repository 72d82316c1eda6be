package io.gpumem.trace.io;

/**
 * A trace that was read but whose contents do not add up: a segment whose {@code total_size} disagrees with its
 * blocks, segments that overlap, blocks outside their segment ({@link SnapshotConsistency}), or a window start
 * state that cannot be rebuilt into an allocator or replayed (blocks that do not tile their segment, sizes that
 * are not multiples of 512, ...). The file is at fault, not gpumem; the message names the file and says
 * "inconsistent snapshot". A {@link TraceFormatException}, so whatever refuses an unreadable file refuses this too.
 */
public final class InconsistentSnapshotException extends TraceFormatException {
    static final String WHAT = "inconsistent snapshot: ";

    /**
     * @param file     the file (or other source) of the trace
     * @param location where in the file, e.g. {@code segments}
     * @param problem  what does not add up, naming the segment
     */
    public InconsistentSnapshotException(String file, String location, String problem) {
        super(file, location, WHAT + problem);
    }

    /**
     * @param file  the file (or other source) of the trace, as the session names it
     * @param cause what the rebuild or the replay refused; its message says what and where
     */
    public InconsistentSnapshotException(String file, RuntimeException cause) {
        super(file, "", WHAT + cause.getMessage(), cause);
    }
}
