package io.gpumem.history;

/**
 * State of a block in a snapshot (allocator.md §10.4), with PyTorch's names, in our allocator's snapshots and in
 * snapshot files alike.
 *
 * <p>PyTorch's code writes {@code active_pending_free}, its docstring says {@code active_awaiting_free}; both
 * read as {@link #ACTIVE_PENDING_FREE}. A state name this version does not know reads as {@link #UNKNOWN};
 * our allocator never produces {@code UNKNOWN}, and file readers keep the name as recorded beside the state
 * ({@link BlockInfo#stateName()}) so that nothing is lost.
 */
public enum BlockState {
    /** Allocated to the user. */
    ACTIVE_ALLOCATED("active_allocated"),
    /** Freed by the user but waiting on events of streams recorded with {@code record_stream}. */
    ACTIVE_PENDING_FREE("active_pending_free"),
    /** Free and cached. */
    INACTIVE("inactive"),
    /** Read from a file with a state name this version does not know (wire name ""). */
    UNKNOWN("");

    private final String wireName;

    BlockState(String wireName) {
        this.wireName = wireName;
    }

    /** The name used in snapshots ("" for {@link #UNKNOWN}). */
    public String wireName() {
        return wireName;
    }

    /** Whether the block holds memory (allocated, or freed but waiting on stream events). */
    public boolean isActive() {
        return this == ACTIVE_ALLOCATED || this == ACTIVE_PENDING_FREE;
    }

    /** The state for a snapshot name (either spelling of pending free); {@link #UNKNOWN} for other names. */
    public static BlockState ofWireName(String name) {
        return switch (name) {
            case "active_allocated" -> ACTIVE_ALLOCATED;
            case "active_pending_free", "active_awaiting_free" -> ACTIVE_PENDING_FREE;
            case "inactive" -> INACTIVE;
            default -> UNKNOWN;
        };
    }
}
