package io.gpumem.trace.window;

import java.util.List;
import java.util.Set;

/**
 * The allocator state of one device at the first entry of its trace window: the segments that existed
 * then with their blocks (see {@link WindowRebuilder}).
 *
 * @param preWindowFreed addresses of blocks allocated before the window and freed inside it (their size is
 *                       inferred, not recorded)
 * @param inferredSizes  how many of those sizes the gap / slack rules extended beyond {@code round_size}
 */
public record WindowStart(int device, List<StartSegment> segments, Set<Long> preWindowFreed, int inferredSizes) {

    public long reservedBytes() {
        long n = 0;
        for (StartSegment s : segments) {
            n += s.size();
        }
        return n;
    }

    public long allocatedBytes() {
        long n = 0;
        for (StartSegment s : segments) {
            n += s.allocatedBytes();
        }
        return n;
    }

    public boolean isEmpty() {
        return segments.isEmpty();
    }
}
