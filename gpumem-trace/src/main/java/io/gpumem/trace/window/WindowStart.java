package io.gpumem.trace.window;

import io.gpumem.history.SegmentInfo;
import java.util.List;
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
 */
public record WindowStart(
        int device, List<SegmentInfo> segments, Set<Long> preWindowFreed, int inferredSizes, FreeMatches frees) {

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
