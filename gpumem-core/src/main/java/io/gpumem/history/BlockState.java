package io.gpumem.history;

/** State of a block in a snapshot (spec §10.4), with PyTorch's names. */
public enum BlockState {
    /** Allocated to the user. */
    ACTIVE_ALLOCATED("active_allocated"),
    /** Freed by the user but waiting on events of streams recorded with {@code record_stream}. */
    ACTIVE_PENDING_FREE("active_pending_free"),
    /** Free and cached. */
    INACTIVE("inactive");

    private final String wireName;

    BlockState(String wireName) {
        this.wireName = wireName;
    }

    public String wireName() {
        return wireName;
    }
}
