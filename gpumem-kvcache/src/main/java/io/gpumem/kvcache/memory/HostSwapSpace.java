package io.gpumem.kvcache.memory;

import io.gpumem.kvcache.KvCacheException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * Host memory for swap preemption: a byte budget of off-heap memory that holds the KV blocks of requests
 * preempted with {@code PreemptionMode.SWAP} until they resume. Each swapped request
 * gets one contiguous off-heap buffer ({@code layers × blocks × pageBytes}, layer-major) from its own arena,
 * released when the request is swapped back in or dropped.
 *
 * <p>Not a cache tier, and deliberately not merged with the cache's host tier ({@code HostTier}), although both
 * are off-heap host memory with a byte budget: the contracts differ. Swap space holds one request's private
 * blocks (full or not, hashed or not), addressed by the request's {@link Handle}, and must give every byte back:
 * it never evicts, and a swap that does not fit is refused up front ({@link #fits}; the manager then recomputes).
 * The host tier holds copies of evicted full prefix-cache blocks addressed by content hash, shared by any
 * request, and may drop or evict them at will (a miss only costs a recompute). Sharing one budget would let cache
 * traffic push out a preempted request's only copy.
 *
 * <p>Transfers are batched per request: for each layer, runs of consecutive block ids travel in a
 * single copy call, so a request whose blocks are contiguous costs one copy per layer instead of one
 * per block (PagedAttention paper, section 7.3: small transfers make swapping slow).
 */
public final class HostSwapSpace {
    private final long capacityBytes;
    private long usedBytes;
    private long swappedOutBytes;
    private long swappedInBytes;
    private long transfers;

    public HostSwapSpace(long capacityBytes) {
        if (capacityBytes < 0) {
            throw new KvCacheException("swap space must not be negative, got " + capacityBytes);
        }
        this.capacityBytes = capacityBytes;
    }

    /** One swapped-out request's host copy. */
    public static final class Handle {
        private final Arena arena;
        private final MemorySegment buffer;
        private final int blocks;
        private boolean released;

        private Handle(Arena arena, MemorySegment buffer, int blocks) {
            this.arena = arena;
            this.buffer = buffer;
            this.blocks = blocks;
        }

        /** Blocks held. */
        public int blocks() {
            return blocks;
        }

        /** The host bytes (layer-major, block order of the request's table). */
        public MemorySegment buffer() {
            return buffer;
        }
    }

    public long capacityBytes() {
        return capacityBytes;
    }

    public long usedBytes() {
        return usedBytes;
    }

    public long swappedOutBytes() {
        return swappedOutBytes;
    }

    public long swappedInBytes() {
        return swappedInBytes;
    }

    /** Copy calls made in either direction. */
    public long transfers() {
        return transfers;
    }

    /** Whether {@code blocks} blocks of {@code pages} fit in the remaining budget. */
    public boolean fits(KvPages pages, int blocks) {
        return usedBytes + bytesFor(pages, blocks) <= capacityBytes;
    }

    private static long bytesFor(KvPages pages, int blocks) {
        return (long) blocks * pages.spec().pageBytes() * pages.spec().layers();
    }

    /** Copies {@code table[0..count)} of every layer to a new host buffer. */
    public Handle swapOut(KvPages pages, int[] table, int count) {
        long bytes = bytesFor(pages, count);
        if (usedBytes + bytes > capacityBytes) {
            throw new KvCacheException(
                    "swap space full: need " + bytes + " bytes, " + (capacityBytes - usedBytes) + " left");
        }
        // The arena outlives this method: the handle owns it (swapIn or release closes it), so it cannot sit in a
        // try-with-resources; it is closed here only when the copy fails.
        @SuppressWarnings("MustBeClosedChecker")
        Arena arena = Arena.ofShared();
        MemorySegment buffer = arena.allocate(Math.max(1, bytes), 64);
        long page = pages.spec().pageBytes();
        long layerStride = count * page;
        try {
            for (int layer = 0; layer < pages.spec().layers(); layer++) {
                int i = 0;
                while (i < count) {
                    int run = runLength(table, i, count);
                    pages.device()
                            .copyToHost(
                                    buffer.asSlice(layer * layerStride + i * page, run * page),
                                    pages.pageAddress(layer, table[i]),
                                    run * page);
                    transfers++;
                    i += run;
                }
            }
        } catch (RuntimeException e) {
            arena.close(); // a failed copy leaves no host memory behind
            throw e;
        }
        usedBytes += bytes;
        swappedOutBytes += bytes;
        return new Handle(arena, buffer, count);
    }

    /**
     * Copies a handle's bytes for table positions {@code [from, blocks)} into those blocks of every layer
     * (positions before {@code from} were recovered another way) and releases the handle. If a copy
     * fails the handle stays valid, so the swap-in can be retried.
     */
    public void swapIn(KvPages pages, Handle handle, int[] table, int from) {
        if (handle.released) {
            throw new KvCacheException("swap handle already released");
        }
        int count = handle.blocks;
        long page = pages.spec().pageBytes();
        long layerStride = count * page;
        for (int layer = 0; layer < pages.spec().layers(); layer++) {
            int i = from;
            while (i < count) {
                int run = runLength(table, i, count);
                pages.device()
                        .copyToDevice(
                                pages.pageAddress(layer, table[i]),
                                handle.buffer.asSlice(layer * layerStride + i * page, run * page),
                                run * page);
                transfers++;
                i += run;
            }
        }
        swappedInBytes += bytesFor(pages, count - from);
        release(pages, handle);
    }

    /** Drops a swapped copy without restoring it (the request was freed while swapped out). */
    public void release(KvPages pages, Handle handle) {
        if (handle.released) {
            return;
        }
        handle.released = true;
        usedBytes -= bytesFor(pages, handle.blocks);
        handle.arena.close();
    }

    private static int runLength(int[] table, int from, int count) {
        int run = 1;
        while (from + run < count && table[from + run] == table[from] + run) {
            run++;
        }
        return run;
    }
}
