package io.gpumem.device;

import java.lang.foreign.MemorySegment;
import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;
import org.jspecify.annotations.Nullable;

/**
 * The simulated device's address space and memory accounting: classic allocations, virtual reservations,
 * physical handles and the mappings between them, with the driver's rules checked on every call.
 *
 * <h2>Addresses</h2>
 * Deterministic: a new allocation (or reservation) of a size reuses the most recently freed range of exactly
 * that size, as the real driver was observed to do, else fresh space from a bump pointer. Classic allocations
 * and reservations come from two disjoint regions. Everything is kept per live object (tree maps keyed by
 * address), so memory use follows what is allocated, never the device's capacity.
 *
 * <h2>Accounting</h2>
 * Classic allocations and physical handles consume their size rounded up to the granularity; a handle's memory
 * is given back once it is released <em>and</em> unmapped, as with the real driver.
 *
 * <p>Faults are injected through the {@link FaultPlan} at the point the driver would report them: after the
 * call's arguments were checked, before anything changes. Not thread-safe: used under the device's monitor.
 */
final class AddressSpace {
    private static final long MALLOC_BASE = 0x7f00_0000_0000L;
    private static final long RESERVE_BASE = 0x2000_0000_0000L;

    /** Memory behind one classic allocation or one physical handle. */
    private static final class Storage {
        final long size;
        final long consumed;
        /** The bytes, for a backed device; null otherwise. */
        final @Nullable ByteBacking bytes;

        boolean released;
        int mapCount;

        Storage(long size, long consumed, boolean backed) {
            this.size = size;
            this.consumed = consumed;
            this.bytes = backed ? new ByteBacking() : null;
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

    private final long granularity;
    private final boolean backed;
    private final FaultPlan faults;

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

    AddressSpace(long granularity, boolean backed, FaultPlan faults) {
        this.granularity = granularity;
        this.backed = backed;
        this.faults = faults;
    }

    /**
     * An independent copy sharing nothing mutable (the freed-range queues keep their order, so later allocations
     * get the same addresses), counting calls into {@code faultsOfCopy}. Refused for a backed space (its bytes
     * are not copied).
     */
    AddressSpace copy(FaultPlan faultsOfCopy) {
        if (backed) {
            throw new IllegalStateException("cannot copy a backed device");
        }
        AddressSpace c = new AddressSpace(granularity, false, faultsOfCopy);
        c.consumed = consumed;
        c.nextMalloc = nextMalloc;
        c.nextReserve = nextReserve;
        freedMallocBySize.forEach((size, q) -> c.freedMallocBySize.put(size, new ArrayDeque<>(q)));
        freedReserveBySize.forEach((size, q) -> c.freedReserveBySize.put(size, new ArrayDeque<>(q)));
        // each Storage belongs to one malloc or one handle; the TreeMaps are copied whole (linear), then their values
        c.mallocs.putAll(mallocs);
        c.mallocs.replaceAll((a, s) -> copyOf(s));
        c.reservations.putAll(reservations);
        mappings.forEach((a, m) -> {
            Mapping x = new Mapping(m.address, m.size, m.handle);
            x.accessible = m.accessible;
            c.mappings.put(a, x);
        });
        handles.forEach((h, s) -> c.handles.put(h, copyOf(s)));
        c.nextHandle = nextHandle;
        return c;
    }

    private static Storage copyOf(Storage o) {
        Storage x = new Storage(o.size, o.consumed, false);
        x.released = o.released;
        x.mapCount = o.mapCount;
        return x;
    }

    long consumed() {
        return consumed;
    }

    int mappingCount() {
        return mappings.size();
    }

    int reservationCount() {
        return reservations.size();
    }

    int physicalHandleCount() {
        return handles.size();
    }

    int mallocCount() {
        return mallocs.size();
    }

    // ------------------------------------------------------------------ classic allocation

    /** A classic allocation of {@code bytes} (already checked positive), or {@link Device#NULL} without room. */
    long malloc(long bytes, long available) {
        long need = roundUp(bytes);
        if (need > available - consumed) {
            return Device.NULL;
        }
        long address = take(freedMallocBySize, bytes);
        if (address == Device.NULL) {
            address = nextMalloc;
            nextMalloc += need;
        }
        consumed += need;
        mallocs.put(address, new Storage(bytes, need, backed));
        return address;
    }

    void free(long address) {
        Storage s = mallocs.get(address);
        if (s == null) {
            throw new DeviceException(
                    DeviceOp.FREE,
                    DeviceError.CUDA_ERROR_INVALID_VALUE,
                    "address " + hex(address) + " was not returned by malloc or is already freed");
        }
        faults.throwIfDue(DeviceOp.FREE);
        mallocs.remove(address);
        consumed -= s.consumed;
        freedMallocBySize.computeIfAbsent(s.size, k -> new ArrayDeque<>()).push(address);
    }

    // ------------------------------------------------------------------ virtual memory

    long reserve(long size) {
        requireSize(DeviceOp.RESERVE_ADDRESS, size);
        faults.throwIfDue(DeviceOp.RESERVE_ADDRESS);
        long address = take(freedReserveBySize, size);
        if (address == Device.NULL) {
            address = nextReserve;
            nextReserve += size;
        }
        reservations.put(address, size);
        return address;
    }

    void freeReservation(long address, long size) {
        Long reserved = reservations.get(address);
        if (reserved == null || reserved != size) {
            throw new DeviceException(
                    DeviceOp.FREE_ADDRESS,
                    DeviceError.CUDA_ERROR_INVALID_VALUE,
                    "no reservation of " + size + " bytes at " + hex(address));
        }
        Map.Entry<Long, Mapping> m = mappings.ceilingEntry(address);
        if (m != null && m.getKey() < address + size) {
            throw new DeviceException(
                    DeviceOp.FREE_ADDRESS,
                    DeviceError.CUDA_ERROR_INVALID_VALUE,
                    "range at " + hex(address) + " still has a mapping at " + hex(m.getKey()));
        }
        faults.throwIfDue(DeviceOp.FREE_ADDRESS);
        reservations.remove(address);
        freedReserveBySize.computeIfAbsent(size, k -> new ArrayDeque<>()).push(address);
    }

    /** A physical handle of {@code size} bytes, or {@link Device#NULL} without room. */
    long createPhysical(long size, long available) {
        requireSize(DeviceOp.CREATE_PHYSICAL, size);
        if (faults.outOfMemoryDue(DeviceOp.CREATE_PHYSICAL)) {
            return Device.NULL;
        }
        if (size > available - consumed) {
            return Device.NULL;
        }
        consumed += size;
        long handle = nextHandle++;
        handles.put(handle, new Storage(size, size, backed));
        return handle;
    }

    void releasePhysical(long handle) {
        Storage s = handles.get(handle);
        if (s == null || s.released) {
            throw new DeviceException(
                    DeviceOp.RELEASE_PHYSICAL,
                    DeviceError.CUDA_ERROR_INVALID_VALUE,
                    "handle " + handle + " is unknown or already released");
        }
        faults.throwIfDue(DeviceOp.RELEASE_PHYSICAL);
        s.released = true;
        maybeDestroy(handle, s);
    }

    void map(long address, long size, long handle) {
        requireAddress(DeviceOp.MAP, address);
        requireSize(DeviceOp.MAP, size);
        Storage s = handles.get(handle);
        if (s == null || s.released) {
            throw new DeviceException(DeviceOp.MAP, DeviceError.CUDA_ERROR_INVALID_HANDLE, "handle " + handle);
        }
        if (s.size != size) {
            throw new DeviceException(
                    DeviceOp.MAP,
                    DeviceError.CUDA_ERROR_INVALID_VALUE,
                    "handle " + handle + " has " + s.size + " bytes, mapping asks for " + size);
        }
        Map.Entry<Long, Long> r = reservations.floorEntry(address);
        if (r == null || address + size > r.getKey() + r.getValue()) {
            throw new DeviceException(
                    DeviceOp.MAP,
                    DeviceError.CUDA_ERROR_INVALID_VALUE,
                    "range " + hex(address) + "+" + size + " is not inside a reservation");
        }
        Map.Entry<Long, Mapping> before = mappings.floorEntry(address + size - 1);
        if (before != null && before.getKey() + before.getValue().size > address) {
            throw new DeviceException(
                    DeviceOp.MAP,
                    DeviceError.CUDA_ERROR_INVALID_VALUE,
                    "range " + hex(address) + "+" + size + " overlaps the mapping at " + hex(before.getKey()));
        }
        faults.throwIfDue(DeviceOp.MAP);
        mappings.put(address, new Mapping(address, size, handle));
        s.mapCount++;
    }

    void setAccess(long address, long size) {
        requireWholeMappings(DeviceOp.SET_ACCESS, address, size, "range does not end on a mapping boundary");
        faults.throwIfDue(DeviceOp.SET_ACCESS);
        for (long at = address; at < address + size; ) {
            Mapping m = mappingCheckedAt(at);
            m.accessible = true;
            at += m.size;
        }
    }

    void unmap(long address, long size) {
        requireWholeMappings(DeviceOp.UNMAP, address, size, null);
        faults.throwIfDue(DeviceOp.UNMAP);
        for (long at = address; at < address + size; ) {
            Mapping m = mappingCheckedAt(at);
            mappings.remove(at);
            Storage s = Objects.requireNonNull(handles.get(m.handle), "a mapped handle is never destroyed");
            s.mapCount--;
            maybeDestroy(m.handle, s);
            at += m.size;
        }
    }

    /** The mapping starting at {@code at}, which {@link #requireWholeMappings} has found there. */
    private Mapping mappingCheckedAt(long at) {
        return Objects.requireNonNull(mappings.get(at), "requireWholeMappings checked it");
    }

    /** Checks that [address, address+size) is granular and covered by whole mappings, exactly. */
    private void requireWholeMappings(DeviceOp op, long address, long size, @Nullable String boundaryMessage) {
        requireAddress(op, address);
        requireSize(op, size);
        long at = address;
        long end = address + size;
        while (at < end) {
            Mapping m = mappings.get(at);
            if (m == null) {
                throw new DeviceException(
                        op,
                        DeviceError.CUDA_ERROR_INVALID_VALUE,
                        "no mapping starts at " + hex(at)
                                + (op == DeviceOp.UNMAP ? " (unmap must cover whole mappings)" : ""));
            }
            at += m.size;
        }
        if (at != end) {
            throw new DeviceException(
                    op,
                    DeviceError.CUDA_ERROR_INVALID_VALUE,
                    boundaryMessage != null
                            ? boundaryMessage
                            : "unmap of " + hex(address) + "+" + size + " would split the mapping ending at "
                                    + hex(at));
        }
    }

    // ------------------------------------------------------------------ data movement

    /** Moves bytes between device memory at {@code address} and {@code host}, piece by piece. */
    void transfer(long address, long bytes, MemorySegment host, boolean toDevice) {
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
                s = Objects.requireNonNull(handles.get(mp.handle), "resolve checked the range");
                offset = at - mp.address;
            }
            long n = Math.min(bytes - done, Math.min(ByteBacking.roomInChunk(offset), s.size - offset));
            ByteBacking backing = Objects.requireNonNull(s.bytes, "a backed device backs every storage");
            backing.copy(offset, host, done, n, toDevice);
            done += n;
        }
    }

    /** Checks that [address, address+bytes) is allocated, or mapped and accessible, throughout. */
    void resolve(long address, long bytes) {
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
                    throw new DeviceException(
                            DeviceOp.COPY,
                            DeviceError.CUDA_ERROR_ILLEGAL_ADDRESS,
                            hex(at) + " is mapped but access was never set");
                }
                at = mp.getKey() + mp.getValue().size;
                continue;
            }
            throw new DeviceException(
                    DeviceOp.COPY, DeviceError.CUDA_ERROR_ILLEGAL_ADDRESS, hex(at) + " is not allocated or mapped");
        }
    }

    // ------------------------------------------------------------------ helpers

    private void maybeDestroy(long handle, Storage s) {
        if (s.released && s.mapCount == 0) {
            handles.remove(handle);
            consumed -= s.consumed;
        }
    }

    /**
     * {@code bytes} rounded up to the granularity; {@link Long#MAX_VALUE} where that would pass 2^63 (no device holds
     * it, and the sum would wrap negative and pass for room).
     */
    long roundUp(long bytes) {
        if (bytes > Long.MAX_VALUE - (granularity - 1)) {
            return Long.MAX_VALUE;
        }
        return (bytes + granularity - 1) / granularity * granularity;
    }

    /** A virtual-memory size: positive and a multiple of the granularity. */
    private void requireSize(DeviceOp op, long size) {
        if (size <= 0) {
            throw new DeviceException(op, DeviceError.CUDA_ERROR_INVALID_VALUE, "size " + size);
        }
        requireMultiple(op, "size", size);
    }

    /** A virtual-memory address: a multiple of the granularity. */
    private void requireAddress(DeviceOp op, long address) {
        requireMultiple(op, "address", address);
    }

    private void requireMultiple(DeviceOp op, String what, long value) {
        if (value % granularity != 0) {
            throw new DeviceException(
                    op,
                    DeviceError.CUDA_ERROR_INVALID_VALUE,
                    what + " " + value + " is not a multiple of the granularity " + granularity);
        }
    }

    private static long take(Map<Long, ArrayDeque<Long>> freed, long size) {
        ArrayDeque<Long> q = freed.get(size);
        if (q == null || q.isEmpty()) {
            return Device.NULL;
        }
        return q.pop();
    }

    static String hex(long address) {
        return "0x" + Long.toHexString(address);
    }
}
