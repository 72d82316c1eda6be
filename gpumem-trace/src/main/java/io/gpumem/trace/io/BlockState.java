package io.gpumem.trace.io;

/**
 * State of a block in a snapshot (spec §10.4). PyTorch's code writes {@code active_pending_free}, its
 * docstring says {@code active_awaiting_free}; both read as {@link #ACTIVE_PENDING_FREE} (the block keeps
 * the spelling it was read with).
 */
public enum BlockState {
    ACTIVE_ALLOCATED("active_allocated"),
    ACTIVE_PENDING_FREE("active_pending_free"),
    INACTIVE("inactive"),
    UNKNOWN("");

    private final String pythonName;

    BlockState(String pythonName) {
        this.pythonName = pythonName;
    }

    public String pythonName() {
        return pythonName;
    }

    /** Whether the block holds memory (allocated, or freed but waiting on stream events). */
    public boolean isActive() {
        return this == ACTIVE_ALLOCATED || this == ACTIVE_PENDING_FREE;
    }

    public static BlockState fromName(String name) {
        return switch (name) {
            case "active_allocated" -> ACTIVE_ALLOCATED;
            case "active_pending_free", "active_awaiting_free" -> ACTIVE_PENDING_FREE;
            case "inactive" -> INACTIVE;
            default -> UNKNOWN;
        };
    }
}
