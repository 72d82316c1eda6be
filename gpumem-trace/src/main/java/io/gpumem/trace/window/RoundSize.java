package io.gpumem.trace.window;

import io.gpumem.config.AllocatorConfig;

/**
 * PyTorch's {@code round_size} (allocator.md §1.2) and the split thresholds (§2.3), needed to infer the size of
 * blocks whose request is all a trace records.
 */
public final class RoundSize {

    static final long MIN_BLOCK = 512;
    static final long SMALL_SIZE = 1L << 20;

    private RoundSize() {
    }

    /** The block size PyTorch allocates for a request of {@code n} bytes under {@code config}. */
    public static long of(long n, AllocatorConfig config) {
        if (n < MIN_BLOCK) {
            return MIN_BLOCK;
        }
        int divisions = config.roundupPower2Divisions(n);
        if (divisions > 1 && n > MIN_BLOCK * divisions) {
            if (Long.bitCount(n) == 1) {
                return n;
            }
            long floorPow2 = Long.highestOneBit(n);
            long step = floorPow2 >> Integer.numberOfTrailingZeros(divisions);
            if (step == 0) {
                return floorPow2 << 1;
            }
            return (n + step - 1) / step * step;
        }
        return (n + MIN_BLOCK - 1) / MIN_BLOCK * MIN_BLOCK;
    }

    /**
     * Whether a free remainder of {@code remaining} bytes would have been split off a block of which
     * {@code rounded} bytes were used: at least 512 in the small pool or with expandable segments on; in the
     * large pool more than 1 MiB, and only below {@code max_split_size}.
     */
    public static boolean wouldSplit(long remaining, long rounded, boolean smallPool, AllocatorConfig config) {
        if (smallPool || config.expandableSegments()) {
            return remaining >= MIN_BLOCK;
        }
        return rounded < config.maxSplitSize() && remaining > SMALL_SIZE;
    }

    /** The largest remainder that stays inside a block (is not split off); −1 when any remainder stays. */
    static long largestUnsplitRemainder(long rounded, boolean smallPool, AllocatorConfig config) {
        if (smallPool || config.expandableSegments()) {
            return MIN_BLOCK - 1;
        }
        return rounded < config.maxSplitSize() ? SMALL_SIZE : -1;
    }
}
