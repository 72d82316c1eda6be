package io.gpumem.trace.window;

import io.gpumem.alloc.Pool;

import java.util.List;

/**
 * A segment as it stood at the window's start: its range, stream, pool, and the blocks tiling it in
 * address order (no two free blocks adjacent). For expandable segments this is one contiguous mapped run.
 */
public record StartSegment(long address, long size, long stream, Pool pool, boolean expandable,
                           List<StartBlock> blocks) {

    public long end() {
        return address + size;
    }

    public long allocatedBytes() {
        long n = 0;
        for (StartBlock b : blocks) {
            if (b.allocated()) {
                n += b.size();
            }
        }
        return n;
    }
}
