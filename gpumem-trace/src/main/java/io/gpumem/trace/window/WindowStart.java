package io.gpumem.trace.window;

import io.gpumem.alloc.Pool;
import io.gpumem.history.SegmentInfo;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The allocator state of one device at the first entry of its trace window: the segments that existed
 * then with their blocks (see {@link WindowRebuilder}), in address order. Each segment is a cudaMalloc'd range or,
 * for expandable segments, one contiguous mapped run; its blocks tile it (no two free blocks adjacent), are
 * allocated (live then) or free (the merged free space between live neighbours), and have no stacks; its totals
 * are its blocks'.
 *
 * @param preWindowFreed addresses of blocks allocated before the window and freed inside it (their size is
 *                       inferred, not recorded)
 * @param inferredSizes  how many of those sizes the gap / slack rules extended beyond {@code round_size}
 * @param frees          what each free of the window frees, matched while rebuilding (for compiling the window)
 * @param segmentAllocBeforeWindow the address of the segment the window's first entry, an {@code alloc}, was served
 *                       from when that segment was cudaMalloc'd for it just before the window opened (the ring cut
 *                       its {@code segment_alloc} off); 0 when not. Such a segment is not in {@code segments}: they
 *                       are the state before that request, which a replay serves from a segment at this address.
 * @param reservationsMadeInWindow the expandable reservations the window makes, base address to pool: each begins
 *                       with a {@code segment_map} at its base while its stream had nothing mapped in that pool. They
 *                       did not exist at the start, and a start reservation ends at or below each one above it (the
 *                       driver hands a range given back to the next reservation of its size), so the replay places
 *                       the start's reservations around them.
 * @param reservationReach how far the window maps in a start reservation above its highest run, that run's address
 *                       to the end of the highest range mapped there (before the reservation is given back): the
 *                       reservation reaches at least that far, so the replay does not place it to end at the run.
 *                       Only for runs the window maps above.
 * @param reservationFloor how far the window maps in a start reservation below its lowest run, that run's address to
 *                       the lowest address mapped there (before the reservation is given back): the reservation begins
 *                       at or below it, so the replay does not place it to begin at the run. Only for runs the window
 *                       maps below.
 */
public record WindowStart(
        int device,
        List<SegmentInfo> segments,
        Set<Long> preWindowFreed,
        int inferredSizes,
        FreeMatches frees,
        long segmentAllocBeforeWindow,
        Map<Long, Pool> reservationsMadeInWindow,
        Map<Long, Long> reservationReach,
        Map<Long, Long> reservationFloor) {

    public long reservedBytes() {
        long n = 0;
        for (SegmentInfo s : segments) {
            n += s.totalSize();
        }
        return n;
    }

    public long allocatedBytes() {
        long n = 0;
        for (SegmentInfo s : segments) {
            n += s.allocatedSize();
        }
        return n;
    }

    public boolean isEmpty() {
        return segments.isEmpty();
    }
}
