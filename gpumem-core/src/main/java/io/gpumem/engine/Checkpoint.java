package io.gpumem.engine;

import io.gpumem.alloc.ForkableAllocator;
import io.gpumem.alloc.GpuAllocator;
import io.gpumem.device.SimulatedDevice;

/**
 * A replay's state at one op, kept to fork replays from (the capacity search's checkpoints, {@link CapacityProbes}):
 * its device and allocator, which no replay plays on, and the addresses of the slots live at that op only. A
 * replay holds one address for every slot of the stream (12 MB on a 276 MB snapshot's 1.5 M allocations), of
 * which a few thousand are live at any op; keeping just those makes a checkpoint small and its fork allocate
 * nothing per slot (the fork plays into an array the caller reuses).
 *
 * <p>Invariants: {@code liveSlots} ascend and pair with {@code liveAddresses}; every other slot was free (address
 * 0) at the op; the allocator is forkable.
 */
final class Checkpoint {
    private final SimulatedDevice dev;
    private final GpuAllocator allocator;
    private final long[] devStreams;
    final int next;
    private final boolean stepOpen;
    private final int stepsClosed;
    private final int[] liveSlots;
    private final long[] liveAddresses;
    /** The most blocks live at once in the stream, which a fork's allocation table is sized for. */
    private final int liveBlocksAtPeak;

    private Checkpoint(SimulatedDevice dev, GpuAllocator allocator, StreamRunner.Replay at) {
        this.dev = dev;
        this.allocator = allocator;
        this.liveBlocksAtPeak = at.liveBlocksAtPeak;
        this.devStreams = at.devStreams;
        this.next = at.next;
        this.stepOpen = at.stepOpen;
        this.stepsClosed = at.stepsClosed;
        long[] address = at.address;
        int live = 0;
        for (long a : address) {
            if (a != 0) {
                live++;
            }
        }
        liveSlots = new int[live];
        liveAddresses = new long[live];
        for (int slot = 0, i = 0; i < live; slot++) {
            if (address[slot] != 0) {
                liveSlots[i] = slot;
                liveAddresses[i++] = address[slot];
            }
        }
    }

    /** The state of {@code r}, which becomes the checkpoint's: {@code r} must not be played afterwards. */
    static Checkpoint taking(StreamRunner.Replay r) {
        return new Checkpoint(r.dev, r.allocator, r);
    }

    /**
     * A copy of the state of {@code r}, which goes on unchanged; the allocator must be forkable. The copy keeps
     * no statistics: a checkpoint is only forked, and its forks count nothing either.
     */
    static Checkpoint copying(StreamRunner.Replay r) {
        SimulatedDevice d = r.dev.copyWithCapacity(r.dev.properties().totalMemory());
        return new Checkpoint(d, ((ForkableAllocator) r.allocator).uncountedCopyOnto(d), r);
    }

    /**
     * A replay from this op on a device of {@code capacity} bytes (deep copies of device and allocator), playing
     * into {@code address}: one entry per slot of the stream, all zero, which it fills with this op's live slots.
     * Its allocator keeps no statistics ({@link ForkableAllocator#uncountedCopyOnto}): a fork only learns
     * whether the rest of the stream runs, so nothing may read its allocator's stats.
     */
    StreamRunner.Replay fork(long capacity, long[] address) {
        for (int i = 0; i < liveSlots.length; i++) {
            address[liveSlots[i]] = liveAddresses[i];
        }
        SimulatedDevice d = dev.copyWithCapacity(capacity);
        GpuAllocator copy = ((ForkableAllocator) allocator).uncountedCopyOnto(d);
        StreamRunner.expectLiveBlocks(copy, liveBlocksAtPeak);
        StreamRunner.Replay r = new StreamRunner.Replay(d, copy, devStreams, address);
        r.freedAtOnce = true;
        r.liveBlocksAtPeak = liveBlocksAtPeak;
        r.next = next;
        r.stepOpen = stepOpen;
        r.stepsClosed = stepsClosed; // a fork serves the capacity search, which never stops at a steady state
        return r;
    }
}
