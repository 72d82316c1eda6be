package io.gpumem.trace.analysis;

/**
 * A block's state as the analysis sees it (allocator.md §10.4): gpumem-core's {@link io.gpumem.history.BlockState}
 * without {@code UNKNOWN}, so that the analysis never meets a block it cannot account for (readers reject
 * unknown states with the file and block named before a state is built). The snapshot names and their
 * spellings are core's; {@link #of} maps.
 */
public enum BlockState {
    /** Allocated to a live tensor: counts in allocated and active bytes. */
    ALLOCATED,
    /** Freed by the program but waiting on stream events: active, not allocated, not reusable yet. */
    PENDING_FREE,
    /** Free and cached: reusable by a request that fits. */
    INACTIVE;

    /** Parses a snapshot's block {@code state}; accepts both spellings of the pending state. */
    public static BlockState ofSnapshotState(String state) {
        io.gpumem.history.BlockState known = io.gpumem.history.BlockState.ofWireName(state);
        if (known == io.gpumem.history.BlockState.UNKNOWN) {
            throw new IllegalArgumentException("unknown block state '" + state + "'");
        }
        return of(known);
    }

    /**
     * The analysis state of a snapshot block's state (the allocator's and the file model's).
     *
     * @throws IllegalArgumentException for {@link io.gpumem.history.BlockState#UNKNOWN}
     */
    public static BlockState of(io.gpumem.history.BlockState state) {
        return switch (state) {
            case ACTIVE_ALLOCATED -> ALLOCATED;
            case ACTIVE_PENDING_FREE -> PENDING_FREE;
            case INACTIVE -> INACTIVE;
            case UNKNOWN -> throw new IllegalArgumentException("unknown block state");
        };
    }

    /** Whether the block holds bytes the program still uses (allocated or waiting on events). */
    public boolean isActive() {
        return this != INACTIVE;
    }
}
