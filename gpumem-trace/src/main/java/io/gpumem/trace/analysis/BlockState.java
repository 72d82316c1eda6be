package io.gpumem.trace.analysis;

/** A block's state as a snapshot reports it (spec §10.4). */
public enum BlockState {
    /** Allocated to a live tensor: counts in allocated and active bytes. */
    ALLOCATED,
    /** Freed by the program but waiting on stream events: active, not allocated, not reusable yet. */
    PENDING_FREE,
    /** Free and cached: reusable by a request that fits. */
    INACTIVE;

    /** Parses a snapshot's block {@code state}; accepts both spellings of the pending state. */
    public static BlockState ofSnapshotState(String state) {
        return switch (state) {
            case "active_allocated" -> ALLOCATED;
            case "active_pending_free", "active_awaiting_free" -> PENDING_FREE;
            case "inactive" -> INACTIVE;
            default -> throw new IllegalArgumentException("unknown block state '" + state + "'");
        };
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
