package io.gpumem.alloc;

import io.gpumem.config.AllocatorConfig;
import org.jspecify.annotations.Nullable;

/**
 * PyTorch's size rules, in one place: how a request is rounded ({@code round_size}), which pool serves it, how
 * big a new segment is ({@code get_allocation_size}), when a cached block is too big to serve a request (the
 * oversize rules of {@code get_free_block}), and when a remainder is split off ({@code should_split}). The
 * allocator ({@code AllocatorCore}) decides with these methods, and so does every module that has to infer what
 * the allocator did (trace window rebuilding, snapshot analysis); nothing else in the project restates them.
 *
 * <p>All methods are pure and allocation-free (but for the message of a refusal); the allocator calls them on its
 * hot path.
 */
public final class SizeRules {
    /** {@code kMinBlockSize}: every block size is a multiple of this, and no block is smaller. */
    public static final long MIN_BLOCK_SIZE = 512;
    /** {@code kSmallSize}: rounded requests up to this size go to the small pool. */
    public static final long SMALL_SIZE = 1L << 20;
    /** {@code kSmallBuffer}: the segment size of the small pool (and its expandable page size). */
    public static final long SMALL_BUFFER = 2L << 20;
    /** {@code kLargeBuffer}: the segment size for large requests under 10 MiB (and the large expandable page size). */
    public static final long LARGE_BUFFER = 20L << 20;
    /** {@code kMinLargeAlloc}: from this rounded size on, a segment is the request rounded to 2 MiB. */
    public static final long MIN_LARGE_ALLOC = 10L << 20;
    /** {@code kRoundLarge}: the rounding step of segments for requests of {@link #MIN_LARGE_ALLOC} or more. */
    public static final long ROUND_LARGE = 2L << 20;

    private SizeRules() {}

    /** {@code round_size} under {@code config}'s {@code roundup_power2_divisions}. */
    public static long roundSize(long size, AllocatorConfig config) {
        if (size < MIN_BLOCK_SIZE) {
            return MIN_BLOCK_SIZE;
        }
        int divisions = config.roundupPower2Divisions(size);
        if (divisions > 1 && size > MIN_BLOCK_SIZE * divisions) {
            return roundupPower2NextDivision(size, divisions);
        }
        return roundToMinBlock(size);
    }

    /** {@code round_size} without power-of-two divisions: up to a multiple of 512, at least 512. */
    public static long roundToMinBlock(long size) {
        return size < MIN_BLOCK_SIZE ? MIN_BLOCK_SIZE : (size + MIN_BLOCK_SIZE - 1) & -MIN_BLOCK_SIZE;
    }

    /**
     * {@code roundup_power2_next_division}: {@code size} rounded up to the next of {@code divisions} equal steps
     * between the powers of two around it (a power of two is its own rounding).
     */
    public static long roundupPower2NextDivision(long size, int divisions) {
        if (Long.bitCount(size) == 1) {
            return size;
        }
        long floor = Long.highestOneBit(size);
        long step = floor >>> (31 - Integer.numberOfLeadingZeros(divisions));
        if (step == 0) {
            return floor << 1;
        }
        long roundFloor = size & ~(step - 1);
        return roundFloor == size ? size : roundFloor + step;
    }

    /** The pool a request of {@code rounded} bytes (already rounded by {@link #roundSize}) is served from. */
    public static Pool poolFor(long rounded) {
        return rounded <= SMALL_SIZE ? Pool.SMALL : Pool.LARGE;
    }

    /** {@code get_allocation_size}: the size of the segment created for a rounded request that nothing cached fits. */
    public static long allocationSize(long rounded) {
        if (rounded <= SMALL_SIZE) {
            return SMALL_BUFFER;
        } else if (rounded < MIN_LARGE_ALLOC) {
            return LARGE_BUFFER;
        }
        return ROUND_LARGE * ((rounded + ROUND_LARGE - 1) / ROUND_LARGE);
    }

    /** The page size of an expandable segment of {@code pool}: 2 MiB small, 20 MiB large. */
    public static long expandablePageSize(Pool pool) {
        return pool == Pool.SMALL ? SMALL_BUFFER : LARGE_BUFFER;
    }

    /**
     * Why a device of {@code totalMemory} bytes with this allocation {@code granularity} could not hold expandable
     * segments, or null when it can: each pool's page must be a whole number of granules, and the reservation
     * (9/8 of the device's memory, in pages) must be a page count the allocator can hold. These are the checks
     * the allocator makes when it reserves a segment, asked ahead: an ops script's {@code device} line is refused
     * with its line rather than failing part way through a run.
     */
    public static @Nullable String expandableSegmentsUnsupported(long totalMemory, long granularity) {
        return ExpandableSegment.unsupportedDevice(totalMemory, granularity);
    }

    /**
     * Whether a block (or segment) counts as oversize: {@code size >= max_split_size}. Oversize blocks are never
     * split and are counted in {@code oversize_allocations} / {@code oversize_segments}.
     */
    public static boolean isOversize(long size, long maxSplitSize) {
        return size >= maxSplitSize;
    }

    /**
     * The oversize rules of {@code get_free_block}: whether the best-fit cached block of {@code blockSize} bytes
     * must not serve a request of {@code rounded} bytes. A request below {@code max_split_size} never takes an
     * oversize block; an oversize request takes one only if it wastes less than {@code max_non_split_rounding}.
     */
    public static boolean rejectsCachedBlock(
            long rounded, long blockSize, long maxSplitSize, long maxNonSplitRounding) {
        if (rounded < maxSplitSize) {
            return blockSize >= maxSplitSize;
        }
        return blockSize >= rounded + maxNonSplitRounding;
    }

    /**
     * {@code should_split}: whether the {@code remaining} bytes left after carving {@code rounded} bytes from a
     * block are split off as a free block of their own. In the small pool, and for every block while expandable
     * segments are in effect, any remainder of at least 512 bytes is; in the large pool only a remainder above
     * 1 MiB, and only for requests below {@code max_split_size}.
     *
     * @param expandable whether expandable segments are in effect (configured and supported by the device)
     */
    public static boolean shouldSplit(long remaining, long rounded, Pool pool, boolean expandable, long maxSplitSize) {
        if (pool == Pool.SMALL || expandable) {
            return remaining >= MIN_BLOCK_SIZE;
        }
        return rounded < maxSplitSize && remaining > SMALL_SIZE;
    }

    /**
     * The largest remainder {@link #shouldSplit} keeps inside the block (does not split off), or −1 when every
     * remainder stays (an oversize request in the large pool).
     */
    public static long largestUnsplitRemainder(long rounded, Pool pool, boolean expandable, long maxSplitSize) {
        if (pool == Pool.SMALL || expandable) {
            return MIN_BLOCK_SIZE - 1;
        }
        return rounded < maxSplitSize ? SMALL_SIZE : -1;
    }
}
