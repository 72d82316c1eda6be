package io.gpumem.alloc;

import io.gpumem.device.Device;
import io.gpumem.history.HistoryOptions;
import java.util.Objects;

/**
 * One thread's exclusive run of requests on the exact allocator, its allocations named by the caller's slot numbers
 * (as a {@link io.gpumem.engine.RequestStream} names them) rather than by address: what a replay that plays tens of
 * thousands of requests in a row uses ({@link AllocatorInternals#openSlots}).
 *
 * <h2>Why</h2>
 * {@link CachingAllocator#malloc} and {@link CachingAllocator#free} take the allocator's lock and keep PyTorch's
 * {@code allocated_blocks}, a table from address to block, for every request: a free must find its block by
 * address. A player that already knows which allocation a free releases (its slot) needs neither: the session
 * takes the lock once, for its whole life, and keeps each slot's block in an array. On lm2.7b's oracle check the
 * table's probes and the lock were about a fifth of the replay's time. The decisions are the core's, unchanged:
 * a session's malloc, free and empty_cache are {@link CachingAllocator}'s minus the table and the lock.
 *
 * <h2>Invariants</h2>
 * <ul>
 *   <li>While the session is open its thread holds the allocator's lock (other threads wait), and the allocator's
 *       own malloc, free, recordStream, emptyCache and close refuse (IllegalStateException): every change goes
 *       through the session.</li>
 *   <li>{@code blocks[s]} is the live block of slot {@code s}, or null, and {@code blocks[s].sessionSlot == s};
 *       every other block's {@code sessionSlot} is −1. A slot's block is not in {@code allocated_blocks} until the
 *       session keeps the table ({@link #keepTable}): the first read of the table by anything else (a snapshot, an
 *       out-of-memory report of an uncounted allocator, an invariant check), or a free by address that misses it,
 *       puts every slot's block in, and from then on the session adds and removes its blocks there too, so the
 *       table is whole whenever anyone else reads it.</li>
 *   <li>{@link #close} puts the live blocks in the table (if not yet), clears their slots, then releases the lock:
 *       afterwards the allocator is exactly as if every request had gone through {@link CachingAllocator}.</li>
 * </ul>
 * Not thread-safe: only the thread that opened it may use it.
 */
public final class SlotSession implements AutoCloseable {
    private final AllocatorCore core;
    private final AllocatorLock lock;
    private final Block[] blocks;
    /** Whether the session's blocks are in {@code allocated_blocks} (see the class comment). */
    private boolean tableKept;

    private boolean open = true;

    /** Opens the session; the caller holds the lock, which the session keeps until {@link #close}. */
    SlotSession(AllocatorCore core, AllocatorLock lock, int slots) {
        if (slots < 0) {
            throw new IllegalArgumentException("a slot session needs a non-negative number of slots, not " + slots);
        }
        this.core = core;
        this.lock = lock;
        this.blocks = new Block[slots];
    }

    /** Number of slots. */
    public int slots() {
        return blocks.length;
    }

    /**
     * Moves the live allocation at {@code address} (one made before the session, e.g. a restored start state) into
     * slot {@code slot}, which must be empty, so that {@link #free(int)} releases it.
     *
     * @return whether it did: false when no allocation made outside the session is at {@code address} (a block
     *     freed but waiting on stream events is none); the slot then stays empty
     * @throws IllegalArgumentException when the slot holds an allocation
     */
    public boolean adopt(int slot, long address) {
        ensureOpen();
        emptySlot(slot);
        AddressTable<Block> table = core.allocatedBlocksBesideSession();
        Block b = tableKept ? table.get(address) : table.remove(address);
        if (b == null || b.sessionSlot >= 0) {
            return false;
        }
        blocks[slot] = b;
        b.sessionSlot = slot;
        return true;
    }

    /**
     * {@link CachingAllocator#malloc} into slot {@code slot}, which must be empty.
     *
     * @return the address; 0 for a zero-byte request (the slot stays empty)
     * @throws OutOfMemoryException     as {@link CachingAllocator#malloc} (the slot stays empty)
     * @throws IllegalArgumentException for a negative size or a slot that holds an allocation
     */
    public long malloc(int slot, long size, long stream) {
        ensureOpen();
        emptySlot(slot);
        if (size < 0) {
            throw new IllegalArgumentException("malloc: negative size " + size);
        }
        if (size == 0) {
            return Device.NULL;
        }
        if (size >= AllocatorCore.ONE_EXABYTE) {
            throw core.exabyteOom(size);
        }
        Block b = core.malloc(size, stream);
        if (tableKept && !core.allocatedBlocksBesideSession().putIfAbsent(b.ptr, b)) {
            throw new IllegalStateException("the device handed out memory at 0x" + Long.toHexString(b.ptr)
                    + " that overlaps a live allocation; the allocator state is no longer trustworthy");
        }
        blocks[slot] = b;
        b.sessionSlot = slot;
        return b.ptr;
    }

    /**
     * {@link CachingAllocator#free} of slot {@code slot}'s allocation; the slot becomes empty.
     *
     * @throws IllegalArgumentException when the slot holds no allocation
     */
    public void free(int slot) {
        ensureOpen();
        Block b = slot >= 0 && slot < blocks.length ? blocks[slot] : null;
        if (b == null) {
            throw new IllegalArgumentException("free: slot " + slot + " holds no allocation");
        }
        blocks[slot] = null;
        b.sessionSlot = -1;
        if (tableKept) {
            core.allocatedBlocksBesideSession().remove(b.ptr);
        }
        core.free(b);
    }

    /**
     * Frees what the caller knows as slot {@code slot} at {@code address}: the slot's block when the session holds
     * it there, else (an allocation made before the session, which the caller names by the same slot) the
     * allocation at {@code address}, as {@link #freeAddress} does.
     *
     * @throws IllegalArgumentException when neither holds an allocation
     */
    public void free(int slot, long address) {
        Block b = slot >= 0 && slot < blocks.length ? blocks[slot] : null;
        if (b != null && b.ptr == address) {
            free(slot);
        } else {
            freeAddress(address);
        }
    }

    /**
     * {@link CachingAllocator#free} by address, of whatever is allocated there: a slot's allocation (the slot
     * becomes empty) or one made outside the session. A player frees this way a block it cannot name by slot (a
     * recorded free of an address its stream does not hold). A slot's block is found through the table: the first
     * such free that misses it puts every slot's block in (the session then keeps the table), so no call scans the
     * slots.
     *
     * @throws IllegalArgumentException when nothing is allocated at {@code address}
     */
    public void freeAddress(long address) {
        ensureOpen();
        if (address == Device.NULL) {
            return;
        }
        AddressTable<Block> table = core.allocatedBlocksBesideSession();
        Block b = table.remove(address);
        if (b == null && !tableKept) {
            // perhaps a slot's block: put them all in the table once (then it is kept), rather than scan per call
            keepTable();
            b = table.remove(address);
        }
        if (b == null) {
            throw new IllegalArgumentException("free: 0x" + Long.toHexString(address)
                    + " is not an allocated block of this allocator (foreign pointer or double free)");
        }
        if (b.sessionSlot >= 0) {
            blocks[b.sessionSlot] = null;
            b.sessionSlot = -1;
        }
        core.free(b);
    }

    /** {@link CachingAllocator#emptyCache}. */
    public void emptyCache() {
        ensureOpen();
        core.releaseCachedBlocks(core.trace.maybeGatherContext(HistoryOptions.Context.ALL));
    }

    /** The address of slot {@code slot}'s allocation, or 0 when it holds none. */
    public long address(int slot) {
        Block b = blocks[slot];
        return b == null ? Device.NULL : b.ptr;
    }

    /**
     * Puts every slot's block in {@code allocated_blocks} and keeps them there from now on: called by the core
     * before anything but the session reads the table.
     */
    void keepTable() {
        if (tableKept) {
            return;
        }
        AddressTable<Block> table = core.allocatedBlocksBesideSession();
        for (Block b : blocks) {
            if (b != null && !table.putIfAbsent(b.ptr, b)) {
                throw overlap(b);
            }
        }
        tableKept = true;
    }

    /**
     * Ends the session: the live allocations stay allocated (the allocator's own {@code free} releases them by
     * address from now on), and the allocator's lock is released. Idempotent; only the opening thread may call it.
     */
    @Override
    public void close() {
        if (!open) {
            return;
        }
        try {
            AddressTable<Block> table = core.allocatedBlocksBesideSession();
            for (Block b : blocks) { // keepTable and the slots' release in one pass
                if (b != null) {
                    if (!tableKept && !table.putIfAbsent(b.ptr, b)) {
                        throw overlap(b);
                    }
                    b.sessionSlot = -1;
                }
            }
            tableKept = true;
        } finally {
            core.session = null;
            open = false;
            lock.unlock();
        }
    }

    private static IllegalStateException overlap(Block b) {
        return new IllegalStateException("slot block at 0x" + Long.toHexString(b.ptr)
                + " is also in the allocation table; the allocator state is no longer trustworthy");
    }

    /** (The allocator cannot be closed while the session is open, so it is open whenever the session is.) */
    private void ensureOpen() {
        if (!open) {
            throw new IllegalStateException("the slot session is closed");
        }
    }

    private void emptySlot(int slot) {
        Objects.checkIndex(slot, blocks.length);
        if (blocks[slot] != null) {
            throw new IllegalArgumentException(
                    "slot " + slot + " already holds the allocation at 0x" + Long.toHexString(blocks[slot].ptr));
        }
    }
}
