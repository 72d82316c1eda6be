package io.gpumem.trace.replay;

import io.gpumem.alloc.BlockTree;
import io.gpumem.alloc.OrderedBlock;
import io.gpumem.alloc.Pool;
import io.gpumem.device.Device;
import io.gpumem.device.DeviceError;
import io.gpumem.device.DeviceException;
import io.gpumem.device.DeviceOp;
import io.gpumem.device.DeviceProperties;
import io.gpumem.engine.StartStateLoader;
import io.gpumem.trace.window.WindowStart;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * A {@link Device} for oracle replays: it hands out the addresses the recorded run got from the driver, so the
 * allocator under test makes its decisions in the same address space as PyTorch did.
 *
 * <p>The replay queues the addresses of the {@code segment_alloc} entries recorded for the current request
 * ({@link #offerMalloc}) and of its {@code segment_map} entries ({@link #offerMap}). {@link #malloc} returns the
 * next queued address; {@link #reserveAddressRange} returns the first queued map address that lies outside every
 * reservation already handed out (a new expandable segment's first map is at its base). When nothing is queued
 * (the model wants a segment PyTorch did not create) a synthetic address far above any real one is returned, so
 * the replay continues and the mismatch is reported by the caller. {@link #clearOffers} drops what the model
 * did not take.
 *
 * <p>Memory is unlimited (placement fidelity does not depend on capacity); {@link #totalMemory()} only sizes
 * expandable reservations (PyTorch reserves ceil(1.125 x total / page) pages). Events complete at once.
 * Single-threaded: a replay drives one device from one thread.
 */
public final class OracleDevice implements Device, StartStateLoader.RecordedAddresses {

    /**
     * Default total memory: 4,560 x 20 MiB / 1.125 bytes (about 79.2 GiB), the size at which PyTorch's large-pool
     * reservation is the 4,560 pages observed in the expandable-segments trace.
     */
    public static final long DEFAULT_TOTAL_MEMORY = 4560L * 20 * (1L << 20) * 8 / 9;

    private static final long GRANULARITY = 2L << 20;
    private static final long SYNTHETIC_BASE = 0x4000_0000_0000_0000L;

    private final DeviceProperties properties;
    private final AddressQueue mallocOffers = new AddressQueue();
    private final AddressQueue mapOffers = new AddressQueue();
    private final Ranges reservations = new Ranges();
    private final Ranges allocations = new Ranges();
    private final long[] calls = new long[DeviceOp.values().length];
    private long nextSynthetic = SYNTHETIC_BASE;
    private long nextHandle = 1;
    private long syntheticAddresses;
    private final Map<Long, Pool> reservedLater;
    private final Map<Long, Long> reservationReach;
    private final Map<Long, Long> reservationFloor;

    public OracleDevice() {
        this(DEFAULT_TOTAL_MEMORY);
    }

    public OracleDevice(long totalMemory) {
        this(totalMemory, Map.of(), Map.of(), Map.of());
    }

    /**
     * @param start the window's start: the expandable reservations its window makes
     *     ({@link WindowStart#reservationsMadeInWindow}), which the start state's reservations are placed around,
     *     and how far up and down the window maps in those ({@link WindowStart#reservationReach},
     *     {@link WindowStart#reservationFloor})
     */
    OracleDevice(long totalMemory, WindowStart start) {
        this(totalMemory, start.reservationsMadeInWindow(), start.reservationReach(), start.reservationFloor());
    }

    private OracleDevice(
            long totalMemory,
            Map<Long, Pool> reservedLater,
            Map<Long, Long> reservationReach,
            Map<Long, Long> reservationFloor) {
        this.properties = new DeviceProperties("oracle", 0, totalMemory, true, GRANULARITY);
        this.reservedLater = Map.copyOf(reservedLater);
        this.reservationReach = Map.copyOf(reservationReach);
        this.reservationFloor = Map.copyOf(reservationFloor);
    }

    @Override
    public Map<Long, Pool> reservedLater() {
        return reservedLater;
    }

    @Override
    public Map<Long, Long> reservationReach() {
        return reservationReach;
    }

    @Override
    public Map<Long, Long> reservationFloor() {
        return reservationFloor;
    }

    /** Queues the address of a recorded {@code segment_alloc} for the next {@link #malloc}. */
    @Override
    public void offerMalloc(long address) {
        mallocOffers.add(address);
    }

    /** Queues the address of a recorded {@code segment_map} (a candidate reservation base). */
    @Override
    public void offerMap(long address) {
        mapOffers.add(address);
    }

    /** Drops offers the model did not take. */
    public void clearOffers() {
        mallocOffers.clear();
        mapOffers.clear();
    }

    /** How many times the model asked for memory the recording did not have (synthetic addresses returned). */
    public long syntheticAddresses() {
        return syntheticAddresses;
    }

    private long synthetic(long size) {
        syntheticAddresses++;
        long a = nextSynthetic;
        nextSynthetic += (size + GRANULARITY - 1) / GRANULARITY * GRANULARITY;
        return a;
    }

    @Override
    public DeviceProperties properties() {
        return properties;
    }

    @Override
    public long freeMemory() {
        return properties.totalMemory();
    }

    @Override
    public long malloc(long bytes) {
        calls[DeviceOp.MALLOC.ordinal()]++;
        if (bytes <= 0) {
            throw new DeviceException(DeviceOp.MALLOC, DeviceError.CUDA_ERROR_INVALID_VALUE, "size " + bytes);
        }
        if (!mallocOffers.isEmpty()) {
            long a = mallocOffers.poll();
            // (reservations first: there are none without expandable segments, so that test costs nothing)
            if (!reservations.overlaps(a, bytes) && allocations.claim(a, bytes)) {
                return a;
            }
        }
        long address = synthetic(bytes);
        allocations.put(address, bytes);
        return address;
    }

    /**
     * The addresses offered for the current request, oldest first, in a plain array (an offer per recorded driver
     * call, cleared after every request: no boxing). Invariant: {@code address[head..tail)} are the queued ones.
     */
    private static final class AddressQueue {
        private long[] address = new long[16];
        private int head;
        private int tail;

        boolean isEmpty() {
            return head == tail;
        }

        int size() {
            return tail - head;
        }

        void add(long a) {
            if (tail == address.length) {
                if (head > 0) {
                    System.arraycopy(address, head, address, 0, tail - head);
                    tail -= head;
                    head = 0;
                } else {
                    address = Arrays.copyOf(address, address.length * 2);
                }
            }
            address[tail++] = a;
        }

        long poll() {
            return address[head++];
        }

        long get(int i) {
            return address[head + i];
        }

        void remove(int i) {
            System.arraycopy(address, head + i + 1, address, head + i, tail - head - i - 1);
            tail--;
        }

        void clear() {
            head = 0;
            tail = 0;
        }
    }

    /**
     * Address ranges handed out, ordered by start in the project's treap ({@link BlockTree}, address order, one
     * node per range, stream 0): a replay's segment mallocs land anywhere among a thousand live ranges, and a
     * sorted array shifted half its length on every insertion was 8% of a replay (profiled on lm2.7b). Starts are
     * compared as unsigned longs (real and synthetic addresses are below 2^63, where that is the signed order the
     * earlier sorted arrays used). Invariant: no start twice; a range's size changes only through
     * {@link BlockTree#rekeyInPlace} (size is no part of the address order, so it never moves).
     */
    private static final class Ranges {
        private final BlockTree<HandedOutRange> tree = new BlockTree<>(BlockTree.Order.BY_ADDRESS);

        /** One handed-out range: {@code ptr} its start, {@code size} its length. */
        private static final class HandedOutRange extends OrderedBlock<HandedOutRange> {
            HandedOutRange(long start, long bytes) {
                ptr = start;
                size = bytes;
            }
        }

        /** The range starting at {@code address}, or null. */
        private @Nullable HandedOutRange at(long address) {
            HandedOutRange r = tree.ceiling(0, 0, address);
            return r != null && r.ptr == address ? r : null;
        }

        /** Whether [address, address + bytes) meets a range (after a mismatch it can). */
        boolean overlaps(long address, long bytes) {
            HandedOutRange above = tree.ceiling(0, 0, address);
            if (above != null && above.ptr == address) {
                return true;
            }
            HandedOutRange below = above != null ? tree.previous(above) : tree.last();
            if (below != null && below.ptr + below.size > address) {
                return true;
            }
            return above != null && above.ptr < address + bytes;
        }

        /** Adds [address, address + bytes) unless it meets a range; returns whether it was added. */
        boolean claim(long address, long bytes) {
            return tree.insertIfDisjoint(new HandedOutRange(address, bytes));
        }

        void put(long address, long bytes) {
            HandedOutRange r = at(address);
            if (r != null) {
                tree.rekeyInPlace(r, bytes, address);
                return;
            }
            tree.insert(new HandedOutRange(address, bytes));
        }

        void remove(long address) {
            HandedOutRange r = at(address);
            if (r != null) {
                tree.remove(r);
            }
        }
    }

    @Override
    public void free(long address) {
        calls[DeviceOp.FREE.ordinal()]++;
        allocations.remove(address);
    }

    @Override
    public long reserveAddressRange(long size) {
        calls[DeviceOp.RESERVE_ADDRESS.ordinal()]++;
        for (int i = 0; i < mapOffers.size(); i++) {
            long a = mapOffers.get(i);
            if (!allocations.overlaps(a, size) && reservations.claim(a, size)) {
                mapOffers.remove(i);
                return a;
            }
        }
        long base = synthetic(size);
        reservations.put(base, size);
        return base;
    }

    @Override
    public void freeAddressRange(long address, long size) {
        calls[DeviceOp.FREE_ADDRESS.ordinal()]++;
        reservations.remove(address);
    }

    @Override
    public long createPhysical(long size) {
        calls[DeviceOp.CREATE_PHYSICAL.ordinal()]++;
        return nextHandle++;
    }

    @Override
    public void releasePhysical(long handle) {
        calls[DeviceOp.RELEASE_PHYSICAL.ordinal()]++;
    }

    @Override
    public void map(long address, long size, long handle) {
        calls[DeviceOp.MAP.ordinal()]++;
    }

    @Override
    public void setAccess(long address, long size) {
        calls[DeviceOp.SET_ACCESS.ordinal()]++;
    }

    @Override
    public void unmap(long address, long size) {
        calls[DeviceOp.UNMAP.ordinal()]++;
    }

    @Override
    public long createStream() {
        calls[DeviceOp.CREATE_STREAM.ordinal()]++;
        return nextHandle++;
    }

    @Override
    public void destroyStream(long stream) {
        calls[DeviceOp.DESTROY_STREAM.ordinal()]++;
    }

    @Override
    public void synchronizeStream(long stream) {
        calls[DeviceOp.SYNCHRONIZE_STREAM.ordinal()]++;
    }

    @Override
    public void synchronizeDevice() {
        calls[DeviceOp.SYNCHRONIZE_DEVICE.ordinal()]++;
    }

    @Override
    public long createEvent() {
        calls[DeviceOp.CREATE_EVENT.ordinal()]++;
        return nextHandle++;
    }

    @Override
    public void recordEvent(long event, long stream) {
        calls[DeviceOp.RECORD_EVENT.ordinal()]++;
    }

    @Override
    public boolean queryEvent(long event) {
        calls[DeviceOp.QUERY_EVENT.ordinal()]++;
        return true;
    }

    @Override
    public void synchronizeEvent(long event) {
        calls[DeviceOp.SYNCHRONIZE_EVENT.ordinal()]++;
    }

    @Override
    public void destroyEvent(long event) {
        calls[DeviceOp.DESTROY_EVENT.ordinal()]++;
    }

    @Override
    public void copyToDevice(long deviceAddress, MemorySegment host, long bytes) {
        throw new DeviceException(
                DeviceOp.COPY, DeviceError.CUDA_ERROR_NOT_SUPPORTED, "the oracle device holds no data");
    }

    @Override
    public void copyToHost(MemorySegment host, long deviceAddress, long bytes) {
        throw new DeviceException(
                DeviceOp.COPY, DeviceError.CUDA_ERROR_NOT_SUPPORTED, "the oracle device holds no data");
    }

    @Override
    public void copyDeviceToDevice(long dstAddress, long srcAddress, long bytes) {
        throw new DeviceException(
                DeviceOp.COPY, DeviceError.CUDA_ERROR_NOT_SUPPORTED, "the oracle device holds no data");
    }

    @Override
    public long callCount(DeviceOp op) {
        return calls[op.ordinal()];
    }
}
