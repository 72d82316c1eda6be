package io.gpumem.device;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayDeque;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicLongArray;

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
 * With {@link Builder#backed(boolean)}, device memory really holds bytes (lazily allocated 64 KiB chunks per
 * allocation or physical handle), so copies move data; without it copies are checked and counted only.
 *
 * <p>Thread-safe: every operation holds the device's monitor.
 */
public final class SimulatedDevice implements Device {

    private static final long MALLOC_BASE = 0x7f00_0000_0000L;
    private static final long RESERVE_BASE = 0x2000_0000_0000L;
    private static final int CHUNK_SHIFT = 16;
    private static final long CHUNK = 1L << CHUNK_SHIFT;

    private final String name;
    private final int index;
    private final long capacity;
    private final long granularity;
    private final boolean backed;
    private final boolean virtualMemory;
    private volatile long heldOutside;

    private long consumed;
    private long nextMalloc = MALLOC_BASE;
    private long nextReserve = RESERVE_BASE;
    private final Map<Long, ArrayDeque<Long>> freedMallocBySize = new HashMap<>();
    private final Map<Long, ArrayDeque<Long>> freedReserveBySize = new HashMap<>();
    private final TreeMap<Long, Storage> mallocs = new TreeMap<>();
    private final TreeMap<Long, Long> reservations = new TreeMap<>();
    private final TreeMap<Long, Mapping> mappings = new TreeMap<>();
    private final Map<Long, Storage> handles = new HashMap<>();
    private long nextHandle = 1;

    private final Map<Long, long[]> streams = new HashMap<>(); // stream -> {recorded, completed}
    private final Map<Long, long[]> events = new HashMap<>(); // event -> {stream, ticket}; ticket 0 = never recorded
    private long nextStream = 1;
    private long nextEvent = 1;
    private boolean holdEvents;

    private final AtomicLongArray calls = new AtomicLongArray(DeviceOp.values().length);
    private final EnumMap<DeviceOp, long[]> faults = new EnumMap<>(DeviceOp.class); // {remaining, errorOrdinal}

    /** Memory behind one classic allocation or one physical handle. */
    private static final class Storage {
        final long size;
        final long consumed;
        MemorySegment[] chunks;
        boolean released;
        int mapCount;

        Storage(long size, long consumed) {
            this.size = size;
            this.consumed = consumed;
        }
    }

    /** One cuMemMap: a handle mapped at an address. */
    private static final class Mapping {
        final long address;
        final long size;
        final long handle;
        boolean accessible;

        Mapping(long address, long size, long handle) {
            this.address = address;
            this.size = size;
            this.handle = handle;
        }
    }

    private SimulatedDevice(Builder b) {
        this.name = b.name;
        this.index = b.index;
        this.capacity = b.capacity;
        this.granularity = b.granularity;
        this.heldOutside = b.heldOutside;
        this.backed = b.backed;
        this.virtualMemory = b.virtualMemory;
        this.holdEvents = b.holdEvents;
        streams.put(DEFAULT_STREAM, new long[2]);
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
    public String name() {
        return name;
    }

    @Override
    public int index() {
        return index;
    }

    @Override
    public long totalMemory() {
        return capacity;
    }

    @Override
    public synchronized long freeMemory() {
        count(DeviceOp.MEM_GET_INFO);
        return Math.max(0, capacity - heldOutside - consumed);
    }

    /** Bytes held outside the allocator (other processes, the context). */
    public long heldOutside() {
        return heldOutside;
    }

    /** Changes the bytes held outside the allocator, e.g. to model another process growing. */
    public synchronized void setHeldOutside(long bytes) {
        if (bytes < 0 || bytes > capacity) {
            throw new IllegalArgumentException("held outside must be in [0, capacity], got " + bytes);
        }
        this.heldOutside = bytes;
    }

    /** Bytes currently consumed by allocations and physical handles made through this device. */
    public synchronized long consumedBytes() {
        return consumed;
    }

    // ------------------------------------------------------------------ classic allocation

    @Override
    public synchronized long malloc(long bytes) {
        count(DeviceOp.MALLOC);
        if (bytes <= 0) {
            throw new DeviceException(DeviceOp.MALLOC, DeviceError.CUDA_ERROR_INVALID_VALUE, "size " + bytes);
        }
        if (injectedFault(DeviceOp.MALLOC)) {
            return NULL;
        }
        long need = roundUp(bytes);
        if (need > capacity - heldOutside - consumed) {
            return NULL;
        }
        long address = take(freedMallocBySize, bytes);
        if (address == NULL) {
            address = nextMalloc;
            nextMalloc += need;
        }
        consumed += need;
        mallocs.put(address, new Storage(bytes, need));
        return address;
    }

    @Override
    public synchronized void free(long address) {
        count(DeviceOp.FREE);
        Storage s = mallocs.get(address);
        if (s == null) {
            throw new DeviceException(DeviceOp.FREE, DeviceError.CUDA_ERROR_INVALID_VALUE,
                    "address " + hex(address) + " was not returned by malloc or is already freed");
        }
        injectedFaultThrowing(DeviceOp.FREE);
        mallocs.remove(address);
        consumed -= s.consumed;
        freedMallocBySize.computeIfAbsent(s.size, k -> new ArrayDeque<>()).push(address);
    }

    // ------------------------------------------------------------------ virtual memory

    @Override
    public boolean supportsVirtualMemory() {
        return virtualMemory;
    }

    @Override
    public long allocationGranularity() {
        return granularity;
    }

    @Override
    public synchronized long reserveAddressRange(long size) {
        count(DeviceOp.RESERVE_ADDRESS);
        requireVmm(DeviceOp.RESERVE_ADDRESS);
        requireGranular(DeviceOp.RESERVE_ADDRESS, "size", size);
        injectedFaultThrowing(DeviceOp.RESERVE_ADDRESS);
        long address = take(freedReserveBySize, size);
        if (address == NULL) {
            address = nextReserve;
            nextReserve += size;
        }
        reservations.put(address, size);
        return address;
    }

    @Override
    public synchronized void freeAddressRange(long address, long size) {
        count(DeviceOp.FREE_ADDRESS);
        Long reserved = reservations.get(address);
        if (reserved == null || reserved != size) {
            throw new DeviceException(DeviceOp.FREE_ADDRESS, DeviceError.CUDA_ERROR_INVALID_VALUE,
                    "no reservation of " + size + " bytes at " + hex(address));
        }
        Map.Entry<Long, Mapping> m = mappings.ceilingEntry(address);
        if (m != null && m.getKey() < address + size) {
            throw new DeviceException(DeviceOp.FREE_ADDRESS, DeviceError.CUDA_ERROR_INVALID_VALUE,
                    "range at " + hex(address) + " still has a mapping at " + hex(m.getKey()));
        }
        injectedFaultThrowing(DeviceOp.FREE_ADDRESS);
        reservations.remove(address);
        freedReserveBySize.computeIfAbsent(size, k -> new ArrayDeque<>()).push(address);
    }

    @Override
    public synchronized long createPhysical(long size) {
        count(DeviceOp.CREATE_PHYSICAL);
        requireVmm(DeviceOp.CREATE_PHYSICAL);
        requireGranular(DeviceOp.CREATE_PHYSICAL, "size", size);
        if (injectedFault(DeviceOp.CREATE_PHYSICAL)) {
            return NULL;
        }
        if (size > capacity - heldOutside - consumed) {
            return NULL;
        }
        consumed += size;
        long handle = nextHandle++;
        handles.put(handle, new Storage(size, size));
        return handle;
    }

    @Override
    public synchronized void releasePhysical(long handle) {
        count(DeviceOp.RELEASE_PHYSICAL);
        Storage s = handles.get(handle);
        if (s == null || s.released) {
            throw new DeviceException(DeviceOp.RELEASE_PHYSICAL, DeviceError.CUDA_ERROR_INVALID_VALUE,
                    "handle " + handle + " is unknown or already released");
        }
        injectedFaultThrowing(DeviceOp.RELEASE_PHYSICAL);
        s.released = true;
        maybeDestroy(handle, s);
    }

    @Override
    public synchronized void map(long address, long size, long handle) {
        count(DeviceOp.MAP);
        requireGranular(DeviceOp.MAP, "address", address);
        requireGranular(DeviceOp.MAP, "size", size);
        Storage s = handles.get(handle);
        if (s == null || s.released) {
            throw new DeviceException(DeviceOp.MAP, DeviceError.CUDA_ERROR_INVALID_HANDLE, "handle " + handle);
        }
        if (s.size != size) {
            throw new DeviceException(DeviceOp.MAP, DeviceError.CUDA_ERROR_INVALID_VALUE,
                    "handle " + handle + " has " + s.size + " bytes, mapping asks for " + size);
        }
        Map.Entry<Long, Long> r = reservations.floorEntry(address);
        if (r == null || address + size > r.getKey() + r.getValue()) {
            throw new DeviceException(DeviceOp.MAP, DeviceError.CUDA_ERROR_INVALID_VALUE,
                    "range " + hex(address) + "+" + size + " is not inside a reservation");
        }
        Map.Entry<Long, Mapping> before = mappings.floorEntry(address + size - 1);
        if (before != null && before.getKey() + before.getValue().size > address) {
            throw new DeviceException(DeviceOp.MAP, DeviceError.CUDA_ERROR_INVALID_VALUE,
                    "range " + hex(address) + "+" + size + " overlaps the mapping at " + hex(before.getKey()));
        }
        injectedFaultThrowing(DeviceOp.MAP);
        mappings.put(address, new Mapping(address, size, handle));
        s.mapCount++;
    }

    @Override
    public synchronized void setAccess(long address, long size) {
        count(DeviceOp.SET_ACCESS);
        requireGranular(DeviceOp.SET_ACCESS, "address", address);
        requireGranular(DeviceOp.SET_ACCESS, "size", size);
        long at = address;
        long end = address + size;
        while (at < end) {
            Mapping m = mappings.get(at);
            if (m == null) {
                throw new DeviceException(DeviceOp.SET_ACCESS, DeviceError.CUDA_ERROR_INVALID_VALUE,
                        "no mapping starts at " + hex(at));
            }
            at += m.size;
        }
        if (at != end) {
            throw new DeviceException(DeviceOp.SET_ACCESS, DeviceError.CUDA_ERROR_INVALID_VALUE,
                    "range does not end on a mapping boundary");
        }
        injectedFaultThrowing(DeviceOp.SET_ACCESS);
        for (at = address; at < end; ) {
            Mapping m = mappings.get(at);
            m.accessible = true;
            at += m.size;
        }
    }

    @Override
    public synchronized void unmap(long address, long size) {
        count(DeviceOp.UNMAP);
        requireGranular(DeviceOp.UNMAP, "address", address);
        requireGranular(DeviceOp.UNMAP, "size", size);
        long at = address;
        long end = address + size;
        while (at < end) {
            Mapping m = mappings.get(at);
            if (m == null) {
                throw new DeviceException(DeviceOp.UNMAP, DeviceError.CUDA_ERROR_INVALID_VALUE,
                        "no mapping starts at " + hex(at) + " (unmap must cover whole mappings)");
            }
            at += m.size;
        }
        if (at != end) {
            throw new DeviceException(DeviceOp.UNMAP, DeviceError.CUDA_ERROR_INVALID_VALUE,
                    "unmap of " + hex(address) + "+" + size + " would split the mapping ending at " + hex(at));
        }
        injectedFaultThrowing(DeviceOp.UNMAP);
        for (at = address; at < end; ) {
            Mapping m = mappings.remove(at);
            Storage s = handles.get(m.handle);
            s.mapCount--;
            maybeDestroy(m.handle, s);
            at += m.size;
        }
    }

    /** Number of live mappings (for tests). */
    public synchronized int mappingCount() {
        return mappings.size();
    }

    /** Number of live address reservations (for tests). */
    public synchronized int reservationCount() {
        return reservations.size();
    }

    /** Number of physical handles not yet destroyed (for tests). */
    public synchronized int physicalHandleCount() {
        return handles.size();
    }

    /** Number of live classic allocations (for tests). */
    public synchronized int mallocCount() {
        return mallocs.size();
    }

    // ------------------------------------------------------------------ streams and events

    @Override
    public synchronized long createStream() {
        count(DeviceOp.CREATE_STREAM);
        injectedFaultThrowing(DeviceOp.CREATE_STREAM);
        long s = nextStream++;
        streams.put(s, new long[2]);
        return s;
    }

    @Override
    public synchronized void destroyStream(long stream) {
        count(DeviceOp.DESTROY_STREAM);
        if (stream == DEFAULT_STREAM || streams.remove(stream) == null) {
            throw new DeviceException(DeviceOp.DESTROY_STREAM, DeviceError.CUDA_ERROR_INVALID_HANDLE,
                    "stream " + stream);
        }
    }

    @Override
    public synchronized void synchronizeStream(long stream) {
        count(DeviceOp.SYNCHRONIZE_STREAM);
        // Like recordEvent, accepts handles it never created: replays name streams by the trace's handles.
        long[] s = streams.get(stream);
        if (s != null) {
            s[1] = s[0];
        }
    }

    @Override
    public synchronized void synchronizeDevice() {
        count(DeviceOp.SYNCHRONIZE_DEVICE);
        for (long[] s : streams.values()) {
            s[1] = s[0];
        }
    }

    @Override
    public synchronized long createEvent() {
        count(DeviceOp.CREATE_EVENT);
        injectedFaultThrowing(DeviceOp.CREATE_EVENT);
        long e = nextEvent++;
        events.put(e, new long[] {DEFAULT_STREAM, 0});
        return e;
    }

    @Override
    public synchronized void recordEvent(long event, long stream) {
        count(DeviceOp.RECORD_EVENT);
        long[] e = event(DeviceOp.RECORD_EVENT, event);
        long[] s = streams.computeIfAbsent(stream, k -> new long[2]); // streams named by traces need no creation
        injectedFaultThrowing(DeviceOp.RECORD_EVENT);
        s[0]++;
        e[0] = stream;
        e[1] = s[0];
        if (!holdEvents) {
            s[1] = s[0];
        }
    }

    @Override
    public synchronized boolean queryEvent(long event) {
        count(DeviceOp.QUERY_EVENT);
        return completed(event(DeviceOp.QUERY_EVENT, event));
    }

    @Override
    public synchronized void synchronizeEvent(long event) {
        count(DeviceOp.SYNCHRONIZE_EVENT);
        long[] e = event(DeviceOp.SYNCHRONIZE_EVENT, event);
        long[] s = streams.get(e[0]);
        if (s != null && s[1] < e[1]) {
            s[1] = e[1];
        }
    }

    @Override
    public synchronized void destroyEvent(long event) {
        count(DeviceOp.DESTROY_EVENT);
        event(DeviceOp.DESTROY_EVENT, event);
        events.remove(event);
    }

    /** Holds back (true) or lets through (false) the completion of events recorded from now on. */
    public synchronized void holdEvents(boolean hold) {
        this.holdEvents = hold;
    }

    /** Completes the oldest pending work item on {@code stream}; returns false if none was pending. */
    public synchronized boolean completeNextEvent(long stream) {
        long[] s = streams.get(stream);
        if (s == null || s[1] >= s[0]) {
            return false;
        }
        s[1]++;
        return true;
    }

    /** Completes all pending work on {@code stream}. */
    public synchronized void completeEvents(long stream) {
        long[] s = streams.get(stream);
        if (s != null) {
            s[1] = s[0];
        }
    }

    /** Completes all pending work on every stream. */
    public synchronized void completeAllEvents() {
        for (long[] s : streams.values()) {
            s[1] = s[0];
        }
    }

    /** Number of recorded events not yet completed. */
    public synchronized int pendingEventCount() {
        int n = 0;
        for (long[] e : events.values()) {
            if (e[1] != 0 && !completed(e)) {
                n++;
            }
        }
        return n;
    }

    private boolean completed(long[] e) {
        if (e[1] == 0) {
            return true; // never recorded: CUDA reports success
        }
        long[] s = streams.get(e[0]);
        return s == null || s[1] >= e[1];
    }

    // ------------------------------------------------------------------ data movement

    @Override
    public synchronized void copyToDevice(long deviceAddress, MemorySegment host, long bytes) {
        count(DeviceOp.COPY);
        checkHost(host, bytes);
        injectedFaultThrowing(DeviceOp.COPY);
        transfer(deviceAddress, bytes, host, true);
    }

    @Override
    public synchronized void copyToHost(MemorySegment host, long deviceAddress, long bytes) {
        count(DeviceOp.COPY);
        checkHost(host, bytes);
        injectedFaultThrowing(DeviceOp.COPY);
        transfer(deviceAddress, bytes, host, false);
    }

    @Override
    public synchronized void copyDeviceToDevice(long dstAddress, long srcAddress, long bytes) {
        count(DeviceOp.COPY);
        injectedFaultThrowing(DeviceOp.COPY);
        if (bytes <= 0) {
            return;
        }
        resolve(srcAddress, bytes); // validate both before moving anything
        resolve(dstAddress, bytes);
        if (!backed) {
            return;
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment tmp = arena.allocate(bytes);
            transfer(srcAddress, bytes, tmp, false);
            transfer(dstAddress, bytes, tmp, true);
        }
    }

    private static void checkHost(MemorySegment host, long bytes) {
        if (bytes < 0 || host.byteSize() < bytes) {
            throw new DeviceException(DeviceOp.COPY, DeviceError.CUDA_ERROR_INVALID_VALUE,
                    "host buffer of " + host.byteSize() + " bytes, copy of " + bytes);
        }
    }

    /** Moves bytes between device memory at {@code address} and {@code host}, piece by piece. */
    private void transfer(long address, long bytes, MemorySegment host, boolean toDevice) {
        if (bytes == 0) {
            return;
        }
        resolve(address, bytes);
        if (!backed) {
            return;
        }
        long done = 0;
        while (done < bytes) {
            long at = address + done;
            Storage s;
            long offset;
            Map.Entry<Long, Storage> m = mallocs.floorEntry(at);
            if (m != null && at < m.getKey() + m.getValue().size) {
                s = m.getValue();
                offset = at - m.getKey();
            } else {
                Mapping mp = mappings.floorEntry(at).getValue();
                s = handles.get(mp.handle);
                offset = at - mp.address;
            }
            long chunkOffset = offset & (CHUNK - 1);
            long n = Math.min(bytes - done, Math.min(CHUNK - chunkOffset, s.size - offset));
            MemorySegment chunk = chunk(s, (int) (offset >>> CHUNK_SHIFT), toDevice);
            if (toDevice) {
                MemorySegment.copy(host, done, chunk, chunkOffset, n);
            } else if (chunk == null) {
                host.asSlice(done, n).fill((byte) 0);
            } else {
                MemorySegment.copy(chunk, chunkOffset, host, done, n);
            }
            done += n;
        }
    }

    private static MemorySegment chunk(Storage s, int index, boolean create) {
        if (s.chunks == null) {
            if (!create) {
                return null;
            }
            s.chunks = new MemorySegment[(int) ((s.size + CHUNK - 1) >>> CHUNK_SHIFT)];
        }
        MemorySegment c = s.chunks[index];
        if (c == null && create) {
            c = Arena.ofAuto().allocate(CHUNK, 16);
            s.chunks[index] = c;
        }
        return c;
    }

    /** Checks that [address, address+bytes) is allocated, or mapped and accessible, throughout. */
    private void resolve(long address, long bytes) {
        long at = address;
        long end = address + bytes;
        while (at < end) {
            Map.Entry<Long, Storage> m = mallocs.floorEntry(at);
            if (m != null && at < m.getKey() + m.getValue().size) {
                at = m.getKey() + m.getValue().size;
                continue;
            }
            Map.Entry<Long, Mapping> mp = mappings.floorEntry(at);
            if (mp != null && at < mp.getKey() + mp.getValue().size) {
                if (!mp.getValue().accessible) {
                    throw new DeviceException(DeviceOp.COPY, DeviceError.CUDA_ERROR_ILLEGAL_ADDRESS,
                            hex(at) + " is mapped but access was never set");
                }
                at = mp.getKey() + mp.getValue().size;
                continue;
            }
            throw new DeviceException(DeviceOp.COPY, DeviceError.CUDA_ERROR_ILLEGAL_ADDRESS,
                    hex(at) + " is not allocated or mapped");
        }
    }

    // ------------------------------------------------------------------ faults and counters

    @Override
    public long callCount(DeviceOp op) {
        return calls.get(op.ordinal());
    }

    /** Zeroes every call counter. */
    public void resetCallCounts() {
        for (int i = 0; i < calls.length(); i++) {
            calls.set(i, 0);
        }
    }

    /**
     * Makes the {@code n}-th next call of {@code op} fail with {@code error} (n = 1: the very next call).
     * An out-of-memory error on {@code malloc} or {@code createPhysical} is reported as a {@link #NULL}
     * result, like a real out-of-memory; every other error is thrown as a {@link DeviceException}.
     */
    public synchronized void failNth(DeviceOp op, int n, DeviceError error) {
        if (n < 1) {
            throw new IllegalArgumentException("n must be >= 1, got " + n);
        }
        faults.put(op, new long[] {n, error.ordinal()});
    }

    /** Cancels every pending injected fault. */
    public synchronized void clearFaults() {
        faults.clear();
    }

    private void count(DeviceOp op) {
        calls.incrementAndGet(op.ordinal());
    }

    /** Consumes a pending fault for {@code op}; true when this call must report out-of-memory. */
    private boolean injectedFault(DeviceOp op) {
        DeviceError e = dueFault(op);
        if (e == null) {
            return false;
        }
        if (e == DeviceError.CUDA_ERROR_OUT_OF_MEMORY) {
            return true;
        }
        throw new DeviceException(op, e, "injected fault");
    }

    private void injectedFaultThrowing(DeviceOp op) {
        DeviceError e = dueFault(op);
        if (e != null) {
            throw new DeviceException(op, e, "injected fault");
        }
    }

    private DeviceError dueFault(DeviceOp op) {
        long[] f = faults.get(op);
        if (f == null) {
            return null;
        }
        if (--f[0] > 0) {
            return null;
        }
        faults.remove(op);
        return DeviceError.values()[(int) f[1]];
    }

    // ------------------------------------------------------------------ helpers

    private void maybeDestroy(long handle, Storage s) {
        if (s.released && s.mapCount == 0) {
            handles.remove(handle);
            consumed -= s.consumed;
        }
    }

    private long roundUp(long bytes) {
        return (bytes + granularity - 1) / granularity * granularity;
    }

    private void requireVmm(DeviceOp op) {
        if (!virtualMemory) {
            throw new DeviceException(op, DeviceError.CUDA_ERROR_NOT_SUPPORTED, "virtual memory management is off");
        }
    }

    private void requireGranular(DeviceOp op, String what, long value) {
        if (value <= 0 && what.equals("size")) {
            throw new DeviceException(op, DeviceError.CUDA_ERROR_INVALID_VALUE, what + " " + value);
        }
        if (value % granularity != 0) {
            throw new DeviceException(op, DeviceError.CUDA_ERROR_INVALID_VALUE,
                    what + " " + value + " is not a multiple of the granularity " + granularity);
        }
    }

    private long[] event(DeviceOp op, long event) {
        long[] e = events.get(event);
        if (e == null) {
            throw new DeviceException(op, DeviceError.CUDA_ERROR_INVALID_HANDLE, "event " + event);
        }
        return e;
    }

    private static long take(Map<Long, ArrayDeque<Long>> freed, long size) {
        ArrayDeque<Long> q = freed.get(size);
        if (q == null || q.isEmpty()) {
            return NULL;
        }
        return q.pop();
    }

    private static String hex(long address) {
        return "0x" + Long.toHexString(address);
    }

    @Override
    public String toString() {
        return "SimulatedDevice{" + name + ", capacity=" + capacity + ", granularity=" + granularity
                + ", heldOutside=" + heldOutside + "}";
    }

    /** Options for a {@link SimulatedDevice}; every option has a sensible default. */
    public static final class Builder {
        private String name = "simulated";
        private int index = 0;
        private long capacity = 80L << 30;
        private long granularity = 2L << 20;
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
                throw new IllegalArgumentException("held outside (" + heldOutside + ") exceeds capacity (" + capacity + ")");
            }
            return new SimulatedDevice(this);
        }
    }
}
