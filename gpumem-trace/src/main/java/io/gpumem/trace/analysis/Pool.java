package io.gpumem.trace.analysis;

/** The caching allocator's two default block pools; a rounded request of at most 1 MiB goes to {@link #SMALL}. */
public enum Pool {
    SMALL("small_pool"),
    LARGE("large_pool");

    private final String statName;

    Pool(String statName) {
        this.statName = statName;
    }

    /** The name PyTorch uses in {@code memory_stats()} keys ({@code small_pool}, {@code large_pool}). */
    public String statName() {
        return statName;
    }

    /** Parses a snapshot's {@code segment_type} ({@code "small"} / {@code "large"}). */
    public static Pool ofSegmentType(String segmentType) {
        return switch (segmentType) {
            case "small" -> SMALL;
            case "large" -> LARGE;
            default -> throw new IllegalArgumentException("unknown segment_type '" + segmentType + "' (expected small or large)");
        };
    }
}
