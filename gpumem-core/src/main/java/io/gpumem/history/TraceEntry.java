package io.gpumem.history;

import java.util.List;

/**
 * One entry of the allocator's memory history (allocator.md §10.5).
 *
 * <p>Meaning of {@code addr} and {@code size} by action: alloc = block address and unrounded request;
 * free_requested / free_completed = block address and the block's requested size; segment_alloc / segment_free
 * = segment base and size; segment_map / segment_unmap = range start and page-multiple size; snapshot = 0 and
 * total active bytes; oom = {@code addr} is unused (0) and {@code size} is the rounded request, with
 * {@code deviceFree} holding the free bytes the device reported.
 *
 * @param action     what happened
 * @param addr       address (see above)
 * @param size       size in bytes (see above)
 * @param stream     stream handle, 0 for the default stream
 * @param timeUs     microseconds from the allocator's clock
 * @param frames     the attached stack, innermost first; {@code null} when no context was captured (the
 *                   snapshot then has no {@code frames} key)
 * @param deviceFree oom only: free device bytes; −1 for every other action
 */
public record TraceEntry(TraceAction action, long addr, long size, long stream, long timeUs, List<Frame> frames,
                         long deviceFree) {
}
