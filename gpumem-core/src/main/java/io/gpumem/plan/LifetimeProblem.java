package io.gpumem.plan;

/**
 * A static allocation problem: buffers, each with a size and a half-open lifetime {@code [lower, upper)} on a
 * logical clock; a solution gives every buffer an offset so that no two buffers live at the same time share an
 * address. The planner minimises the highest offset + size (the planned peak); no solution can go below
 * {@link #peakLive()}, the most bytes live at any one time.
 *
 * <p>Sizes are kept as given ({@link #size}) and as placed ({@link #placedSize}: rounded up to the alignment,
 * 512 B by default like the caching allocator's rounding), so an output file keeps the caller's sizes while
 * offsets stay aligned. Buffers with {@code lower == upper} are never live; they get offset 0 and take no room.
 * Design notes: offset-planner.md §1.
 */
public final class LifetimeProblem {

    /** The caching allocator's minimum block size and rounding step. */
    public static final long DEFAULT_ALIGNMENT = 512;

    /** The smallest size refused: 2^60 bytes (1 EiB), which PyTorch's allocator refuses as it does every size above. */
    public static final long MAX_SIZE = 1L << 60;

    final long[] id;
    final long[] lower;
    final long[] upper;
    final long[] size;
    final long[] placedSize;
    final long alignment;

    /** Builds a problem over copies of the given arrays (all of the same length). */
    public LifetimeProblem(long[] id, long[] lower, long[] upper, long[] size, long alignment) {
        int n = id.length;
        if (lower.length != n || upper.length != n || size.length != n) {
            throw new IllegalArgumentException("arrays of different lengths");
        }
        if (alignment <= 0 || Long.bitCount(alignment) != 1) {
            throw new IllegalArgumentException("alignment must be a positive power of two, got " + alignment);
        }
        this.id = id.clone();
        this.lower = lower.clone();
        this.upper = upper.clone();
        this.size = size.clone();
        this.alignment = alignment;
        this.placedSize = new long[n];
        long total = 0;
        for (int i = 0; i < n; i++) {
            if (upper[i] < lower[i] || size[i] < 0) {
                throw new IllegalArgumentException(
                        "buffer " + id[i] + ": bad lifetime [" + lower[i] + ", " + upper[i] + ") or size " + size[i]);
            }
            if (size[i] >= MAX_SIZE) {
                throw new IllegalArgumentException("buffer " + id[i] + ": size " + size[i]
                        + " is 2^60 bytes (1 EiB) or more, which no device holds (PyTorch's allocator refuses it)");
            }
            placedSize[i] = placed(lower[i], upper[i], size[i], alignment);
            total += placedSize[i]; // (each below 2^60 + 2^62: only the sum can wrap)
            if (total < 0) {
                // every offset a plan gives lies below the sum of the placed sizes: past 2^63 it would wrap
                throw new IllegalArgumentException("buffer " + id[i] + ": the buffers' sizes, each aligned to "
                        + alignment + " bytes, add up to 2^63 bytes or more, past any offset a plan can give");
            }
        }
    }

    /**
     * The bytes a buffer takes in a plan: its size rounded up to {@code alignment} (a power of two), 0 for a buffer
     * never live ({@code lower == upper}). A reader that checks rows as it goes adds these up to name the row at
     * which the sum passes 2^63, which the constructor refuses.
     */
    public static long placed(long lower, long upper, long size, long alignment) {
        return lower == upper ? 0 : (size + alignment - 1) & -alignment;
    }

    /** Number of buffers. */
    public int buffers() {
        return id.length;
    }

    public long id(int i) {
        return id[i];
    }

    public long lower(int i) {
        return lower[i];
    }

    public long upper(int i) {
        return upper[i];
    }

    /** The size as given. */
    public long size(int i) {
        return size[i];
    }

    /** The size the planner reserves: rounded up to the alignment, 0 for a buffer never live. */
    public long placedSize(int i) {
        return placedSize[i];
    }

    public long alignment() {
        return alignment;
    }

    /** The most placed bytes live at one time: the lower bound of any plan's peak. */
    public long peakLive() {
        int m = 0;
        for (long ps : placedSize) {
            m += ps > 0 ? 1 : 0;
        }
        long[] lo = new long[m];
        long[] hi = new long[m];
        long[] sz = new long[m];
        m = 0;
        for (int i = 0; i < placedSize.length; i++) {
            if (placedSize[i] > 0) {
                lo[m] = lower[i];
                hi[m] = upper[i];
                sz[m++] = placedSize[i];
            }
        }
        return m == 0 ? 0 : new TimeAxis(lo, hi).peak(sz);
    }
}
