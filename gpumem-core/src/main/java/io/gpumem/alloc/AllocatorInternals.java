package io.gpumem.alloc;

import io.gpumem.device.Device;
import io.gpumem.history.BlockState;
import io.gpumem.history.DriverCallListener;
import io.gpumem.history.TraceEntry;
import java.util.List;
import java.util.Objects;
import java.util.function.Consumer;

/**
 * The operations of a {@link CachingAllocator} that are not part of PyTorch's user API: what every allocator's
 * {@link GpuAllocatorInternals} offers (history recording, its stacks and clock, from
 * {@link AbstractAllocatorInternals}; the checks tests run after every step), plus state import for replays that
 * start mid-trace and trace listeners. Reached through {@link CachingAllocator#internals()}, so the user-facing
 * class stays small (as Caffeine keeps advanced operations behind {@code Cache.policy()}).
 *
 * <p>Every method takes the allocator's lock, like the allocator's own methods.
 */
public final class AllocatorInternals extends AbstractAllocatorInternals implements SegmentRestorer {
    private final AllocatorCore core;

    AllocatorInternals(AllocatorLock lock, AllocatorCore core) {
        super(lock, core.trace);
        this.core = core;
    }

    /**
     * Rebuilds one segment of a recorded allocator state, so a replay can start mid-trace. It takes the
     * segment's memory from the device exactly like a live allocation would ({@link Device#malloc} for a
     * classic segment; {@link Device#reserveAddressRange} plus one created, mapped and access-enabled page per
     * mapped page for an expandable one); an oracle device that hands out recorded addresses needs no special
     * allocator code. The blocks tile the segment in address order and must not put two free (or two unmapped)
     * blocks next to each other (PyTorch would have merged them). Stats become those of a process that made the
     * same allocations: segment, reserved, allocated, active, requested, inactive_split and oversize stats rise
     * (current, peak and allocated); the device-call counters and the trace do not.
     *
     * @param address    where the segment must live; the device must return exactly this address, or pass
     *                   {@link Device#NULL} to accept whatever the device returns
     * @param totalSize  segment size (classic) or reservation size (expandable, a multiple of the page size; 0
     *                   means PyTorch's default reservation for this device); must equal the blocks' total
     * @param streamId   allocation stream of the segment and all its blocks
     * @param pool       the pool the segment belongs to
     * @param expandable an expandable segment (2 MiB pages small, 20 MiB large) instead of a cudaMalloc'd one
     * @param blocks     the blocks in address order; for expandable segments unmapped blocks must start and end
     *                   on page boundaries
     * @return the segment's base address
     * @throws IllegalArgumentException when the blocks are inconsistent or the device put the segment elsewhere;
     *                                  nothing is changed then
     */
    @Override
    public long restoreSegment(
            long address, long totalSize, long streamId, Pool pool, boolean expandable, List<RestoredBlock> blocks) {
        Objects.requireNonNull(pool, "pool");
        lock.lock();
        try {
            return StateImporter.restore(core, address, totalSize, streamId, pool, expandable, blocks);
        } finally {
            lock.unlock();
        }
    }

    /**
     * Whether expandable segments are in effect: configured, and on a device with virtual memory (a device without
     * it ignores the setting, as PyTorch does, so a start state's expandable runs must be loaded as classic
     * segments there).
     */
    @Override
    public boolean expandableSegments() {
        return core.expandableInEffect(core.config);
    }

    /**
     * Attaches a listener that sees the fields of every driver call the allocator records, even with history off,
     * without an entry being built (nothing is allocated per operation for it).
     */
    public void attachDriverCallListener(DriverCallListener listener) {
        core.trace.addListener(Objects.requireNonNull(listener, "listener"));
    }

    /** Detaches a listener attached by {@link #attachDriverCallListener}; returns whether it was attached. */
    public boolean detachDriverCallListener(DriverCallListener listener) {
        return core.trace.removeListener(listener);
    }

    /** Attaches a listener that sees every trace entry as it is recorded, even with history off. */
    public void attachTraceTracker(Consumer<TraceEntry> tracker) {
        core.trace.addTracker(Objects.requireNonNull(tracker, "tracker"));
    }

    /** Detaches a listener; returns whether it was attached. */
    public boolean detachTraceTracker(Consumer<TraceEntry> tracker) {
        return core.trace.removeTracker(tracker);
    }

    /**
     * Verifies every structural invariant and every stat against its recomputation from the block graph.
     *
     * @throws IllegalStateException listing every violation found
     */
    @Override
    public void checkInvariants() {
        lock.lock();
        try {
            InvariantChecker.check(core);
        } finally {
            lock.unlock();
        }
    }

    /**
     * Receives the state {@link CachingAllocator#snapshot()} would report, without it being built: each segment
     * (a cudaMalloc'd segment, or one mapped run of an expandable one), then its blocks in address order.
     */
    public interface SegmentVisitor {
        /**
         * A segment starts at {@code address}, on {@code stream}, in {@code pool}, part of an expandable segment or
         * not (as a snapshot's {@code stream}, {@code segment_type} and {@code is_expandable} say); its blocks follow,
         * up to the next segment or the end.
         */
        void segment(long address, long stream, Pool pool, boolean expandable);

        /** The next block of the current segment. */
        void block(long address, long size, long requestedSize, BlockState state);
    }

    /**
     * Reports the segments and blocks of the current state to {@code visitor}, segments in no particular order.
     * Unlike {@link CachingAllocator#snapshot()} it builds nothing and records no {@code snapshot} trace entry.
     */
    public void visitSegments(SegmentVisitor visitor) {
        Objects.requireNonNull(visitor, "visitor");
        lock.lock();
        try {
            SnapshotBuilder.visit(core, visitor);
        } finally {
            lock.unlock();
        }
    }

    /**
     * Opens a {@link SlotSession} of {@code slots} slots on the calling thread: until it is closed, that thread
     * holds the allocator's lock and plays its requests through the session, by slot. Close it in a
     * try-with-resources block.
     *
     * @throws IllegalStateException when the allocator is closed or a session is open already
     */
    public SlotSession openSlots(int slots) {
        lock.lock();
        try {
            core.ensureOpen();
            if (core.session != null) {
                throw new IllegalStateException("a slot session is open on this allocator already");
            }
            SlotSession session = new SlotSession(core, lock, slots);
            core.session = session;
            return session;
        } catch (Throwable t) { // (an OutOfMemoryError for the slot array too: never return holding the lock)
            lock.unlock();
            throw t;
        }
    }

    /**
     * Sizes the table of live allocations for about {@code blocks} blocks at once, so that a replay that knows its
     * peak (a request stream's {@code peakLiveBlocks()}) does not grow it step by step. Changes no decision.
     */
    public void expectLiveBlocks(int blocks) {
        lock.lock();
        try {
            core.allocatedBlocks().ensureCapacity(blocks);
        } finally {
            lock.unlock();
        }
    }

    /** Number of blocks waiting on stream events (freed by the user, not yet reusable). */
    public int pendingFreeBlocks() {
        lock.lock();
        try {
            return SnapshotBuilder.pendingBlocks(core).size();
        } finally {
            lock.unlock();
        }
    }

    /**
     * Size of the block serving a live allocation (the rounded request, or more when a remainder was too small
     * to split), or −1 when {@code address} is not allocated here.
     */
    public long blockSize(long address) {
        lock.lock();
        try {
            Block b = core.allocatedBlocks().get(address);
            return b == null ? -1 : b.size;
        } finally {
            lock.unlock();
        }
    }
}
