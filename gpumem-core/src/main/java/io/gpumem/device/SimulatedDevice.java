package io.gpumem.device;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.function.LongConsumer;
import org.jspecify.annotations.Nullable;

/**
 * A deterministic, in-process stand-in for a GPU: the default {@link Device} for tests, replays and the CLI.
 *
 * <h2>Memory model</h2>
 * Capacity is fixed; {@code heldOutside} bytes are in use by someone else (other processes, the CUDA
 * context) and count against it. Classic allocations and physical handles consume their size rounded up to
 * the granularity; physical memory is given back once its handle is released <em>and</em> unmapped, as with
 * the real driver. {@link #freeMemory()} is {@code capacity − heldOutside − consumed}.
 *
 * <h2>Addresses</h2>
 * Deterministic: a new allocation (or address reservation) of a size reuses the most recently freed range of
 * exactly that size, as the real driver was observed to do, else fresh space from a bump pointer, aligned to
 * the granularity. Classic allocations and reservations come from two disjoint address regions.
 *
 * <h2>Rules enforced (each violation throws {@link DeviceException})</h2>
 * Positive sizes; granularity multiples for every virtual-memory size and address; maps only inside a live
 * reservation, never overlapping another mapping, with the handle's exact size; unmap of exactly whole
 * earlier mappings; no freeing of a reservation that still has mappings; no double free or double release;
 * copies only to allocated, mapped <em>and</em> access-enabled memory.
 *
 * <h2>Events</h2>
 * Each stream has a counter of recorded work; an event completes when its stream's completed counter
 * reaches the event's ticket. By default work completes at once (a GPU that has caught up). With
 * {@link Builder#holdEvents(boolean)} (or {@link #holdEvents(boolean)}) events stay pending until a test
 * releases them ({@link #completeNextEvent(long)}, {@link #completeEvents(long)},
 * {@link #completeAllEvents()}) or something synchronises.
 *
 * <h2>Faults and counters</h2>
 * {@link #failNth(DeviceOp, int, DeviceError)} makes the n-th next call of an operation fail: an
 * out-of-memory error on {@code malloc}/{@code createPhysical} is returned as {@link #NULL}, any other error
 * is thrown. Every call of every operation is counted, including failed ones.
 *
 * <h2>Content</h2>
 * With {@link Builder#backed(boolean)}, device memory really holds bytes (64 KiB chunks created on first write,
 * per allocation or physical handle), so copies move data; without it copies are checked and counted only.
 *
 * <h2>Structure</h2>
 * This class is the {@link Device} facade: it counts the call, checks what the device as a whole decides
 * (virtual-memory support, capacity), and hands the job to one of its package-private collaborators:
 * {@code AddressSpace} (allocations, reservations, handles, mappings and the rules on them), {@code EventClock}
 * (streams and events), {@code FaultPlan} (call counters and injected faults) and {@code ByteBacking} (the
 * bytes of a backed device). Memory use follows what is allocated and written, never the capacity, so a
 * device of any size can be simulated.
 *
 * <p>Thread-safe: every operation holds the device's monitor.
 */
public final class SimulatedDevice implements Device {
    /** The allocation granularity of a device built without one: 2 MiB, what CUDA GPUs report. */
    public static final long DEFAULT_GRANULARITY = 2L << 20;

    private final DeviceProperties properties;
    private final boolean backed;
    private volatile long heldOutside;

    private final FaultPlan faults;
    /** Allocation calls refused for want of memory; see {@link #refusedForMemory()}. */
    private long refusedForMemory;
    /** Most bytes consumed plus held outside after a granted allocation; see {@link #sameOutcomesFrom()}. */
    private long peakDemandGranted;
    /** Fewest bytes a refused allocation would have needed with those held outside; see {@link #sameOutcomesBelow()}. */
    private long leastDemandRefused = Long.MAX_VALUE;
    /** Told each rise of {@link #peakDemandGranted}, or null; see {@link #reportPeakDemandRises}. Never copied. */
    private @Nullable LongConsumer peakDemandRises;

    private final AddressSpace space;
    private final EventClock clock;

    private SimulatedDevice(Builder b) {
        this.properties = new DeviceProperties(b.name, b.index, b.capacity, b.virtualMemory, b.granularity);
        this.heldOutside = b.heldOutside;
        this.backed = b.backed;
        this.faults = new FaultPlan();
        this.space = new AddressSpace(b.granularity, b.backed, faults);
        this.clock = new EventClock(b.holdEvents);
    }

    private SimulatedDevice(SimulatedDevice from, long capacity) {
        this.properties = from.properties.withTotalMemory(capacity);
        this.heldOutside = from.heldOutside;
        this.backed = false;
        this.faults = from.faults.copy();
        this.space = from.space.copy(this.faults);
        this.clock = from.clock.copy();
        this.refusedForMemory = from.refusedForMemory;
        this.peakDemandGranted = from.peakDemandGranted;
        this.leastDemandRefused = from.leastDemandRefused;
    }

    /**
     * An independent copy of this device's state (allocations, reservations, mappings, handles, freed-range
     * order, streams, events, call counts) with another capacity: what a what-if replay forks to try a prefix
     * under several capacities. Nothing is shared, so either may go on alone. Refused for a backed device (its
     * bytes are not copied), a device with injected faults pending, and a capacity below what is consumed and
     * held outside.
     */
    public synchronized SimulatedDevice copyWithCapacity(long capacity) {
        if (backed) {
            throw new IllegalStateException("cannot copy a backed device");
        }
        if (capacity < heldOutside + space.consumed()) {
            throw new IllegalArgumentException(
                    "capacity " + capacity + " is below the " + (heldOutside + space.consumed()) + " bytes in use");
        }
        return new SimulatedDevice(this, capacity);
    }

    public static Builder builder() {
        return new Builder();
    }

    /** A simulated device of the given capacity with every other option at its default. */
    public static SimulatedDevice withCapacity(long capacityBytes) {
        return builder().capacity(capacityBytes).build();
    }

    // ------------------------------------------------------------------ identity and info

    @Override
    public DeviceProperties properties() {
        return properties;
    }

    @Override
    public synchronized long freeMemory() {
        faults.count(DeviceOp.MEM_GET_INFO);
        return Math.max(0, properties.totalMemory() - heldOutside - space.consumed());
    }

    /** Bytes held outside the allocator (other processes, the context). */
    public long heldOutside() {
        return heldOutside;
    }

    /** Changes the bytes held outside the allocator, e.g. to model another process growing. */
    public synchronized void setHeldOutside(long bytes) {
        if (bytes < 0 || bytes > properties.totalMemory()) {
            throw new IllegalArgumentException("held outside must be in [0, capacity], got " + bytes);
        }
        this.heldOutside = bytes;
    }

    /** Bytes currently consumed by allocations and physical handles made through this device. */
    public synchronized long consumedBytes() {
        return space.consumed();
    }

    /** Memory the allocations and handles of this device may consume in all. */
    private long available() {
        return properties.totalMemory() - heldOutside;
    }

    // ------------------------------------------------------------------ classic allocation

    @Override
    public synchronized long malloc(long bytes) {
        faults.count(DeviceOp.MALLOC);
        if (bytes <= 0) {
            throw new DeviceException(DeviceOp.MALLOC, DeviceError.CUDA_ERROR_INVALID_VALUE, "size " + bytes);
        }
        long demand = demand(space.roundUp(bytes));
        return counted(faults.outOfMemoryDue(DeviceOp.MALLOC) ? NULL : space.malloc(bytes, available()), demand);
    }

    @Override
    public synchronized void free(long address) {
        faults.count(DeviceOp.FREE);
        space.free(address);
    }

    // ------------------------------------------------------------------ virtual memory

    @Override
    public synchronized long reserveAddressRange(long size) {
        faults.count(DeviceOp.RESERVE_ADDRESS);
        requireVmm(DeviceOp.RESERVE_ADDRESS);
        return space.reserve(size);
    }

    @Override
    public synchronized void freeAddressRange(long address, long size) {
        faults.count(DeviceOp.FREE_ADDRESS);
        space.freeReservation(address, size);
    }

    @Override
    public synchronized long createPhysical(long size) {
        faults.count(DeviceOp.CREATE_PHYSICAL);
        requireVmm(DeviceOp.CREATE_PHYSICAL);
        long demand = demand(size);
        return counted(space.createPhysical(size, available()), demand);
    }

    /**
     * The capacity a call consuming {@code rounded} bytes needs: those held outside, those consumed and its own;
     * {@link Long#MAX_VALUE} where the sum passes 2^63 (no capacity grants it).
     */
    private long demand(long rounded) {
        long before = heldOutside + space.consumed();
        return rounded > Long.MAX_VALUE - before ? Long.MAX_VALUE : before + rounded;
    }

    /**
     * {@code result} of a malloc or createPhysical call that needed {@code demand} bytes of capacity (what is held
     * outside, consumed, and the call's own rounded size): a refusal ({@link #NULL}) counted in
     * {@link #refusedForMemory}, and either way noted in the range of capacities that would have decided alike. An
     * injected refusal narrows that range too, which only makes it more cautious.
     */
    private long counted(long result, long demand) {
        if (result == NULL) {
            refusedForMemory++;
            leastDemandRefused = Math.min(leastDemandRefused, demand);
        } else if (demand > peakDemandGranted) {
            peakDemandGranted = demand;
            LongConsumer rises = peakDemandRises;
            if (rises != null) {
                rises.accept(demand);
            }
        }
        return result;
    }

    /**
     * Tells {@code rises} each new {@link #sameOutcomesFrom()} from now on, as the granted call that raised it returns
     * (null: nobody). A capacity search records an unlimited run's rises so: the first op after which a run at
     * capacity C differs from it is the op of the first rise above C. A copy of this device tells nobody.
     */
    public synchronized void reportPeakDemandRises(@Nullable LongConsumer rises) {
        this.peakDemandRises = rises;
    }

    /**
     * The smallest capacity under which every {@code malloc}/{@code createPhysical} call this device has answered
     * (including those of the device it was copied from) would have been answered the same: the most bytes a granted
     * call left consumed, with those held outside. Together with {@link #sameOutcomesBelow()} it bounds the
     * capacities whose run, of an allocator the capacity does not otherwise steer, is this device's run so far: the
     * capacity search answers probes inside a range it has seen without replaying them.
     */
    public synchronized long sameOutcomesFrom() {
        return peakDemandGranted;
    }

    /**
     * The capacity from which a call this device refused for want of memory would have been granted instead: every
     * capacity below it refuses them all ({@link Long#MAX_VALUE} while none was refused). See
     * {@link #sameOutcomesFrom()}.
     */
    public synchronized long sameOutcomesBelow() {
        return leastDemandRefused;
    }

    /**
     * How many {@code malloc}/{@code createPhysical} calls were refused for want of memory (injected or real):
     * zero means no call's outcome depended on the capacity being larger than what was consumed.
     */
    public synchronized long refusedForMemory() {
        return refusedForMemory;
    }

    @Override
    public synchronized void releasePhysical(long handle) {
        faults.count(DeviceOp.RELEASE_PHYSICAL);
        space.releasePhysical(handle);
    }

    @Override
    public synchronized void map(long address, long size, long handle) {
        faults.count(DeviceOp.MAP);
        space.map(address, size, handle);
    }

    @Override
    public synchronized void setAccess(long address, long size) {
        faults.count(DeviceOp.SET_ACCESS);
        space.setAccess(address, size);
    }

    @Override
    public synchronized void unmap(long address, long size) {
        faults.count(DeviceOp.UNMAP);
        space.unmap(address, size);
    }

    /** Number of live mappings (for tests). */
    public synchronized int mappingCount() {
        return space.mappingCount();
    }

    /** Number of live address reservations (for tests). */
    public synchronized int reservationCount() {
        return space.reservationCount();
    }

    /** Number of physical handles not yet destroyed (for tests). */
    public synchronized int physicalHandleCount() {
        return space.physicalHandleCount();
    }

    /** Number of live classic allocations (for tests). */
    public synchronized int mallocCount() {
        return space.mallocCount();
    }

    // ------------------------------------------------------------------ streams and events

    @Override
    public synchronized long createStream() {
        faults.count(DeviceOp.CREATE_STREAM);
        faults.throwIfDue(DeviceOp.CREATE_STREAM);
        return clock.createStream();
    }

    @Override
    public synchronized void destroyStream(long stream) {
        faults.count(DeviceOp.DESTROY_STREAM);
        clock.destroyStream(stream);
    }

    @Override
    public synchronized void synchronizeStream(long stream) {
        faults.count(DeviceOp.SYNCHRONIZE_STREAM);
        clock.synchronizeStream(stream);
    }

    @Override
    public synchronized void synchronizeDevice() {
        faults.count(DeviceOp.SYNCHRONIZE_DEVICE);
        clock.completeAll();
    }

    @Override
    public synchronized long createEvent() {
        faults.count(DeviceOp.CREATE_EVENT);
        faults.throwIfDue(DeviceOp.CREATE_EVENT);
        return clock.createEvent();
    }

    @Override
    public synchronized void recordEvent(long event, long stream) {
        faults.count(DeviceOp.RECORD_EVENT);
        clock.requireEvent(DeviceOp.RECORD_EVENT, event);
        faults.throwIfDue(DeviceOp.RECORD_EVENT);
        clock.recordEvent(event, stream);
    }

    @Override
    public synchronized boolean queryEvent(long event) {
        faults.count(DeviceOp.QUERY_EVENT);
        return clock.queryEvent(event);
    }

    @Override
    public synchronized void synchronizeEvent(long event) {
        faults.count(DeviceOp.SYNCHRONIZE_EVENT);
        clock.synchronizeEvent(event);
    }

    @Override
    public synchronized void destroyEvent(long event) {
        faults.count(DeviceOp.DESTROY_EVENT);
        clock.destroyEvent(event);
    }

    /** Holds back (true) or lets through (false) the completion of events recorded from now on. */
    public synchronized void holdEvents(boolean hold) {
        clock.holdEvents(hold);
    }

    /** Completes the oldest pending work item on {@code stream}; returns false if none was pending. */
    public synchronized boolean completeNextEvent(long stream) {
        return clock.completeNext(stream);
    }

    /** Completes all pending work on {@code stream}. */
    public synchronized void completeEvents(long stream) {
        clock.synchronizeStream(stream);
    }

    /** Completes all pending work on every stream. */
    public synchronized void completeAllEvents() {
        clock.completeAll();
    }

    /** Number of recorded events not yet completed. */
    public synchronized int pendingEventCount() {
        return clock.pendingEventCount();
    }

    // ------------------------------------------------------------------ data movement

    @Override
    public synchronized void copyToDevice(long deviceAddress, MemorySegment host, long bytes) {
        faults.count(DeviceOp.COPY);
        checkHost(host, bytes);
        faults.throwIfDue(DeviceOp.COPY);
        space.transfer(deviceAddress, bytes, host, true);
    }

    @Override
    public synchronized void copyToHost(MemorySegment host, long deviceAddress, long bytes) {
        faults.count(DeviceOp.COPY);
        checkHost(host, bytes);
        faults.throwIfDue(DeviceOp.COPY);
        space.transfer(deviceAddress, bytes, host, false);
    }

    @Override
    public synchronized void copyDeviceToDevice(long dstAddress, long srcAddress, long bytes) {
        faults.count(DeviceOp.COPY);
        faults.throwIfDue(DeviceOp.COPY);
        if (bytes <= 0) {
            return;
        }
        space.resolve(srcAddress, bytes); // validate both before moving anything
        space.resolve(dstAddress, bytes);
        if (!backed) {
            return;
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment tmp = arena.allocate(bytes);
            space.transfer(srcAddress, bytes, tmp, false);
            space.transfer(dstAddress, bytes, tmp, true);
        }
    }

    private static void checkHost(MemorySegment host, long bytes) {
        if (bytes < 0 || host.byteSize() < bytes) {
            throw new DeviceException(
                    DeviceOp.COPY,
                    DeviceError.CUDA_ERROR_INVALID_VALUE,
                    "host buffer of " + host.byteSize() + " bytes, copy of " + bytes);
        }
    }

    // ------------------------------------------------------------------ faults and counters

    @Override
    public long callCount(DeviceOp op) {
        return faults.callCount(op);
    }

    /**
     * Makes the {@code n}-th next call of {@code op} fail with {@code error} (n = 1: the very next call).
     * An out-of-memory error on {@code malloc} or {@code createPhysical} is reported as a {@link #NULL}
     * result, like a real out-of-memory; every other error is thrown as a {@link DeviceException}.
     */
    public synchronized void failNth(DeviceOp op, int n, DeviceError error) {
        faults.failNth(op, n, error);
    }

    private void requireVmm(DeviceOp op) {
        if (!properties.supportsVirtualMemory()) {
            throw new DeviceException(op, DeviceError.CUDA_ERROR_NOT_SUPPORTED, "virtual memory management is off");
        }
    }

    @Override
    public String toString() {
        return "SimulatedDevice{" + properties.name() + ", capacity=" + properties.totalMemory() + ", granularity="
                + properties.allocationGranularity() + ", heldOutside="
                + heldOutside + "}";
    }

    /** Options for a {@link SimulatedDevice}; every option has a sensible default. */
    public static final class Builder {
        private String name = "simulated";
        private int index = 0;
        private long capacity = 80L << 30;
        private long granularity = DEFAULT_GRANULARITY;
        private long heldOutside = 0;
        private boolean backed = false;
        private boolean virtualMemory = true;
        private boolean holdEvents = false;

        /** Total memory; default 80 GiB. */
        public Builder capacity(long bytes) {
            if (bytes <= 0) {
                throw new IllegalArgumentException("capacity must be positive, got " + bytes);
            }
            this.capacity = bytes;
            return this;
        }

        /** Allocation granularity; default 2 MiB; must be a power of two. */
        public Builder granularity(long bytes) {
            if (bytes <= 0 || Long.bitCount(bytes) != 1) {
                throw new IllegalArgumentException("granularity must be a positive power of two, got " + bytes);
            }
            this.granularity = bytes;
            return this;
        }

        /** Memory in use outside the allocator (other processes, the CUDA context); default 0. */
        public Builder heldOutside(long bytes) {
            if (bytes < 0) {
                throw new IllegalArgumentException("held outside must be >= 0, got " + bytes);
            }
            this.heldOutside = bytes;
            return this;
        }

        public Builder name(String name) {
            this.name = name;
            return this;
        }

        public Builder index(int index) {
            this.index = index;
            return this;
        }

        /** Whether device memory holds real bytes (so copies move data); default false. */
        public Builder backed(boolean backed) {
            this.backed = backed;
            return this;
        }

        /** Whether the virtual-memory family is supported; default true. */
        public Builder virtualMemory(boolean supported) {
            this.virtualMemory = supported;
            return this;
        }

        /** Whether recorded events wait for the test to complete them; default false. */
        public Builder holdEvents(boolean hold) {
            this.holdEvents = hold;
            return this;
        }

        public SimulatedDevice build() {
            if (heldOutside > capacity) {
                throw new IllegalArgumentException(
                        "held outside (" + heldOutside + ") exceeds capacity (" + capacity + ")");
            }
            return new SimulatedDevice(this);
        }
    }
}
