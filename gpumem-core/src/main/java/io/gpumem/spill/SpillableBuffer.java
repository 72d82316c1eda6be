package io.gpumem.spill;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import org.jspecify.annotations.Nullable;

/**
 * A device buffer its {@link SpillingAllocator} may move to host memory or disk when an allocation would
 * otherwise fail. The user holds this handle, never a raw address across a possible spill:
 * {@link #acquire()} returns the buffer's device address (bringing it back first if it was spilled)
 * and pins it until {@link #release()}; only unpinned buffers are spilled. {@link #close()} frees it
 * wherever it is.
 *
 * <p>Where it lives is exactly one of: device ({@code address != 0}), host ({@code host != null}),
 * disk ({@code file != null}), or nowhere once closed. All state changes happen under the allocator's
 * registry lock.
 */
public final class SpillableBuffer implements AutoCloseable {
    /** Where a buffer's bytes are now. */
    public enum Location {
        DEVICE,
        HOST,
        DISK,
        CLOSED
    }

    final SpillingAllocator owner;
    final long id;
    final long size;
    final int priority;
    long address;

    @Nullable
    Arena hostArena;

    @Nullable
    MemorySegment host;

    @Nullable
    Path file;

    int pins;
    long lastUse;
    boolean closed;

    SpillableBuffer(SpillingAllocator owner, long id, long size, int priority, long address) {
        this.owner = owner;
        this.id = id;
        this.size = size;
        this.priority = priority;
        this.address = address;
    }

    public long size() {
        return size;
    }

    /** Lower priorities are spilled first. */
    public int priority() {
        return priority;
    }

    public Location location() {
        synchronized (owner) {
            return closed
                    ? Location.CLOSED
                    : address != 0 ? Location.DEVICE : host != null ? Location.HOST : Location.DISK;
        }
    }

    /**
     * The device address, valid until {@link #release()}; brings the bytes back from host or disk first
     * (which may spill other buffers).
     *
     * @throws io.gpumem.oom.OutOfMemoryException when the device cannot take it back even after spilling
     */
    public long acquire() {
        return owner.acquire(this);
    }

    /** Ends one {@link #acquire()}: the buffer may be spilled again. */
    public void release() {
        owner.release(this);
    }

    /** Frees the buffer wherever it is. Idempotent. */
    @Override
    public void close() {
        owner.close(this);
    }
}
