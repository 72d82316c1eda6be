package io.gpumem.trace.analysis;

import io.gpumem.alloc.Pool;

/**
 * How much of one segment is reserved without serving a request.
 *
 * @param freeBytes  bytes in inactive blocks
 * @param slackBytes rounding slack of allocated blocks (block size − requested size)
 * @param pinned     whether an active block keeps the free bytes from being released ({@code empty_cache} cannot return them)
 */
public record SegmentWaste(
        long address,
        Pool pool,
        long stream,
        boolean expandable,
        long totalSize,
        long allocated,
        long freeBytes,
        long slackBytes,
        boolean pinned) {
    /** Free plus slack bytes. */
    public long waste() {
        return freeBytes + slackBytes;
    }
}
