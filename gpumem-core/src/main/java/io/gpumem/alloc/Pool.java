package io.gpumem.alloc;

import io.gpumem.stats.StatType;

/**
 * The caching allocator's two block pools. A request whose rounded size is at most 1 MiB is served from
 * {@link #SMALL} (2 MiB segments), anything larger from {@link #LARGE}; {@link SizeRules#poolFor} is the rule.
 *
 * <p>This is the one pool type of the project: the allocator's own pools, the stat types of
 * {@code memory_stats()} ({@link #statName()}), a snapshot's {@code segment_type} ({@link #segmentType()}) and
 * the analyses all use it.
 */
public enum Pool {
    SMALL("small", StatType.SMALL_POOL),
    LARGE("large", StatType.LARGE_POOL);

    private final String segmentType;
    private final StatType statType;

    Pool(String segmentType, StatType statType) {
        this.segmentType = segmentType;
        this.statType = statType;
    }

    /**
     * The name PyTorch uses in {@code memory_stats()} keys: {@code small_pool} or {@code large_pool}, its
     * {@link #statType()}'s key.
     */
    public String statName() {
        return statType.key();
    }

    /** The name a memory snapshot writes as {@code segment_type}: {@code small} or {@code large}. */
    public String segmentType() {
        return segmentType;
    }

    /** The {@code memory_stats()} type whose figures this pool's blocks count towards (besides {@code all}). */
    public StatType statType() {
        return statType;
    }

    /**
     * Parses a snapshot's {@code segment_type}.
     *
     * @throws IllegalArgumentException for anything but {@code small} or {@code large}
     */
    public static Pool ofSegmentType(String segmentType) {
        return switch (segmentType) {
            case "small" -> SMALL;
            case "large" -> LARGE;
            default ->
                throw new IllegalArgumentException(
                        "unknown segment_type '" + segmentType + "' (expected small or large)");
        };
    }
}
