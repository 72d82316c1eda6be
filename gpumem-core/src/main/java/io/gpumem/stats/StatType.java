package io.gpumem.stats;

/**
 * The three types every array stat of {@code memory_stats()} is kept for: the aggregate ({@code all}) and each
 * pool. PyTorch's {@code StatType} (AGGREGATE, SMALL_POOL, LARGE_POOL), in the same order.
 */
public enum StatType {
    ALL("all"),
    SMALL_POOL("small_pool"),
    LARGE_POOL("large_pool");

    private final String key;

    StatType(String key) {
        this.key = key;
    }

    /** The name in {@code memory_stats()} keys, e.g. {@code small_pool}. */
    public String key() {
        return key;
    }
}
