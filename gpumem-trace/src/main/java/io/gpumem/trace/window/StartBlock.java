package io.gpumem.trace.window;

/**
 * A block of a rebuilt segment at the window's start: allocated (live then) or free (the merged free
 * space between live neighbours).
 *
 * @param requestedSize the unrounded request of an allocated block; for a free block the stale value PyTorch
 *                      keeps on it (see {@link WindowRebuilder}), 0 when unknown
 * @param exactSize     whether {@code size} is known exactly (end-state blocks, and free blocks) or was
 *                      inferred from the request by the gap / slack rules
 */
public record StartBlock(long address, long size, long requestedSize, boolean allocated, boolean exactSize) {

    public long end() {
        return address + size;
    }
}
