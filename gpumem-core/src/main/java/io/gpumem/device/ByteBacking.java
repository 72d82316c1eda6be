package io.gpumem.device;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.HashMap;
import java.util.Map;

/**
 * The bytes behind one classic allocation or one physical handle of a backed simulated device: 64 KiB chunks
 * created on first write and kept by chunk index, so memory grows with the bytes written, not with the size of
 * the allocation (a 1 TiB allocation that is never written costs nothing). Unwritten bytes read as zero.
 *
 * <p>Not thread-safe: used under the device's monitor.
 */
final class ByteBacking {
    static final int CHUNK_SHIFT = 16;
    static final long CHUNK = 1L << CHUNK_SHIFT;

    private final Map<Long, MemorySegment> chunks = new HashMap<>();

    /**
     * Copies {@code n} bytes between {@code host} at {@code hostOffset} and this storage at {@code offset}; the
     * range must lie inside one chunk.
     */
    void copy(long offset, MemorySegment host, long hostOffset, long n, boolean toDevice) {
        long chunkOffset = offset & (CHUNK - 1);
        Long index = offset >>> CHUNK_SHIFT;
        MemorySegment chunk = chunks.get(index);
        if (toDevice) {
            if (chunk == null) {
                chunk = Arena.ofAuto().allocate(CHUNK, 16);
                chunks.put(index, chunk);
            }
            MemorySegment.copy(host, hostOffset, chunk, chunkOffset, n);
        } else if (chunk == null) {
            host.asSlice(hostOffset, n).fill((byte) 0);
        } else {
            MemorySegment.copy(chunk, chunkOffset, host, hostOffset, n);
        }
    }

    /** Bytes a copy starting at {@code offset} may move before it crosses into the next chunk. */
    static long roomInChunk(long offset) {
        return CHUNK - (offset & (CHUNK - 1));
    }
}
