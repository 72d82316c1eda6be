package io.gpumem.trace.replay;

import io.gpumem.device.Device;
import io.gpumem.device.DeviceError;
import io.gpumem.device.DeviceException;
import io.gpumem.device.DeviceOp;
import io.gpumem.device.DeviceProperties;
import io.gpumem.engine.StartStateLoader;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;

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

    public OracleDevice() {
        this(DEFAULT_TOTAL_MEMORY);
    }

    public OracleDevice(long totalMemory) {
        this.properties = new DeviceProperties("oracle", 0, totalMemory, true, GRANULARITY);
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
        boolean offered = !mallocOffers.isEmpty();
        long a = offered ? mallocOffers.poll() : 0;
        long address =
                offered && !allocations.overlaps(a, bytes) && !reservations.overlaps(a, bytes) ? a : synthetic(bytes);
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
     * Address ranges handed out, sorted by start in two parallel arrays (a device holds hundreds, and a sorted
     * array is searched and shifted faster than a tree of boxed keys is walked). Starts are compared as signed
     * longs, as the {@code TreeMap<Long, Long>} this replaces did. Invariant: {@code start[0..count)} ascending,
     * no start twice.
     */
    private static final class Ranges {
        private long[] start = new long[64];
        private long[] size = new long[64];
        private int count;

        /** Index of {@code address} if present, else {@code -(insertion point) - 1}. */
        private int find(long address) {
            return Arrays.binarySearch(start, 0, count, address);
        }

        /** Whether [address, address + bytes) meets a range (after a mismatch it can). */
        boolean overlaps(long address, long bytes) {
            int i = find(address);
            if (i >= 0) {
                return true;
            }
            int above = -i - 1;
            if (above > 0 && start[above - 1] + size[above - 1] > address) {
                return true;
            }
            return above < count && start[above] < address + bytes;
        }

        void put(long address, long bytes) {
            int i = find(address);
            if (i >= 0) {
                size[i] = bytes;
                return;
            }
            i = -i - 1;
            if (count == start.length) {
                start = Arrays.copyOf(start, count * 2);
                size = Arrays.copyOf(size, count * 2);
            }
            System.arraycopy(start, i, start, i + 1, count - i);
            System.arraycopy(size, i, size, i + 1, count - i);
            start[i] = address;
            size[i] = bytes;
            count++;
        }

        void remove(long address) {
            int i = find(address);
            if (i < 0) {
                return;
            }
            System.arraycopy(start, i + 1, start, i, count - i - 1);
            System.arraycopy(size, i + 1, size, i, count - i - 1);
            count--;
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
        long base = 0;
        for (int i = 0; i < mapOffers.size(); i++) {
            long a = mapOffers.get(i);
            if (!reservations.overlaps(a, size) && !allocations.overlaps(a, size)) {
                mapOffers.remove(i);
                base = a;
                break;
            }
        }
        if (base == 0) {
            base = synthetic(size);
        }
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
