package io.gpumem.alloc;

/**
 * One block of a segment given to {@link AllocatorInternals#restoreSegment}.
 *
 * @param size          block size in bytes (positive; a multiple of 512)
 * @param kind          allocated, free (cached) or unmapped (expandable segments only)
 * @param requestedSize for allocated blocks the caller's unrounded request (1 ≤ requestedSize ≤ size); for free
 *                      blocks the stale value snapshots show (may be 0); ignored for unmapped blocks
 */
public record RestoredBlock(long size, Kind kind, long requestedSize) {

    /** Block kinds. */
    public enum Kind {
        ALLOCATED,
        FREE,
        UNMAPPED
    }

    public RestoredBlock {
        if (kind == null) {
            throw new IllegalArgumentException("kind must not be null");
        }
    }

    public static RestoredBlock allocated(long size, long requestedSize) {
        return new RestoredBlock(size, Kind.ALLOCATED, requestedSize);
    }

    public static RestoredBlock free(long size) {
        return free(size, 0);
    }

    /** A free block showing {@code staleRequestedSize}, the request its block object last served (PyTorch keeps it). */
    public static RestoredBlock free(long size, long staleRequestedSize) {
        return new RestoredBlock(size, Kind.FREE, staleRequestedSize);
    }

    public static RestoredBlock unmapped(long size) {
        return new RestoredBlock(size, Kind.UNMAPPED, 0);
    }
}
