package io.gpumem.stats;

/**
 * The nine array stats of {@code memory_stats()}, each kept per {@link StatType}, in PyTorch's order
 * ({@code DeviceStats} in {@code c10/core/CachingDeviceAllocator.h}).
 */
public enum StatKind {
    /** Live allocations (blocks handed to the user). */
    ALLOCATION("allocation"),
    /** Segments (cudaMalloc'd memory, or expandable segments' reservations). */
    SEGMENT("segment"),
    /** Blocks in use by the user or waiting on stream events. */
    ACTIVE("active"),
    /** Free blocks that are part of a split segment. */
    INACTIVE_SPLIT("inactive_split"),
    /** Bytes of the live allocations' blocks (rounded sizes). */
    ALLOCATED_BYTES("allocated_bytes"),
    /** Bytes held from the device. */
    RESERVED_BYTES("reserved_bytes"),
    /** Bytes of active blocks. */
    ACTIVE_BYTES("active_bytes"),
    /** Bytes of inactive split blocks. */
    INACTIVE_SPLIT_BYTES("inactive_split_bytes"),
    /** Bytes the user asked for (unrounded) of active blocks. */
    REQUESTED_BYTES("requested_bytes");

    private final String key;

    StatKind(String key) {
        this.key = key;
    }

    /** The name in {@code memory_stats()} keys, e.g. {@code allocated_bytes}. */
    public String key() {
        return key;
    }
}
