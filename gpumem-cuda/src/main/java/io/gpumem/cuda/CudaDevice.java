package io.gpumem.cuda;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import io.gpumem.cuda.driver.CudaDriver;
import io.gpumem.cuda.driver.CudaUnavailableException;
import io.gpumem.cuda.driver.DriverLayouts;
import io.gpumem.device.Device;
import io.gpumem.device.DeviceError;
import io.gpumem.device.DeviceException;
import io.gpumem.device.DeviceOp;
import io.gpumem.device.DeviceProperties;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Locale;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.function.ToIntFunction;

/**
 * A {@link Device} on a real NVIDIA GPU, through the CUDA driver API bound with FFM ({@link CudaDriver}).
 *
 * <h2>Mapping</h2>
 * Each {@code Device} operation is one driver call: {@code malloc} is {@code cuMemAlloc_v2}, the virtual
 * memory family is {@code cuMemAddressReserve}/{@code cuMemCreate}/{@code cuMemMap}/{@code cuMemSetAccess}/
 * {@code cuMemUnmap}/{@code cuMemRelease}/{@code cuMemAddressFree}, and so on. A driver result of
 * {@code CUDA_ERROR_OUT_OF_MEMORY} from {@link #malloc} or {@link #createPhysical} becomes {@link #NULL}, as the
 * {@code Device} contract asks; every other non-zero result throws {@link DeviceException} with the matching
 * {@link DeviceError} and a detail naming the call, its arguments and the driver's own error name
 * ({@code cuGetErrorName}), so codes gpumem has no enum constant for still read correctly.
 *
 * <h2>Virtual memory</h2>
 * Support is read once from device attribute 102 ({@code VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED}). Without it
 * {@link #supportsVirtualMemory()} is false, so the caching allocator builds expandable segments from
 * classic allocations, and a virtual-memory call throws {@code CUDA_ERROR_NOT_SUPPORTED} without reaching
 * the driver. Physical memory is created with one handle per {@link #createPhysical} call; the allocator
 * creates one per page, so each page can later be unmapped on its own (the driver cannot unmap part of one
 * mapping). Every {@link #map} must be followed by {@link #setAccess} before the memory is touched.
 *
 * <h2>Threads and the context</h2>
 * The device retains the primary context ({@code cuDevicePrimaryCtxRetain}), as the CUDA runtime does, and
 * makes it current on a thread whenever gpumem did not bind it there last (the thread's first call, a call after one
 * on another device, or after a device was opened on the thread, which makes the new context current). A virtual
 * thread binds on every call, as late as possible before the driver call: the driver keeps the current context per
 * OS thread, so it goes with the carrier, which the virtual thread may change whenever it parks. Per-thread state (the flag and a
 * small native scratch buffer for out-parameters) lives in a {@link ThreadLocal}, so calls allocate nothing
 * on the Java heap after a thread's first call. Code that switches the current context of a thread behind
 * gpumem's back must switch it back.
 *
 * <h2>Handles</h2>
 * The driver treats {@code CUstream} and {@code CUevent} as pointers, and may crash the process on a made-up
 * value rather than return an error. So the device remembers the streams and events it created (and streams
 * handed to {@link #registerStream}) and refuses any other handle with {@code CUDA_ERROR_INVALID_HANDLE}
 * before the driver sees it. Stream 0, the legacy default stream, is always valid.
 *
 * <h2>Invariants</h2>
 * The allocation property and access descriptor are built once and never change. Call counters count
 * every call, successful or not. {@link #close()} releases the primary context once (a release the driver refuses
 * is thrown as a {@link DeviceException} of {@link DeviceOp#FREE}, the device closed all the same); every call
 * afterwards (pinned host memory included) throws {@code CUDA_ERROR_INVALID_CONTEXT} naming the closed device without
 * reaching the driver: the context may still be alive for another device of the same GPU, and the streams and
 * events this device created may be gone with it, so the driver could neither be trusted to refuse the call nor
 * be safely handed those handles.
 */
public final class CudaDevice implements Device {

    /** System property naming the driver library (a path or a loader name). */
    public static final String LIBRARY_PROPERTY = "gpumem.cuda.library";
    /** Environment variable consulted when the property is unset. */
    public static final String LIBRARY_ENV = "GPUMEM_CUDA_LIBRARY";
    /** The driver's SONAME, used when neither the property nor the environment variable is set. */
    public static final String DEFAULT_LIBRARY = "libcuda.so.1";

    static final int ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 102;
    static final int STREAM_NON_BLOCKING = 0x1;
    static final int EVENT_DISABLE_TIMING = 0x2;
    /**
     * CU_MEM_ALLOC_GRANULARITY_MINIMUM: what cuMemCreate and cuMemMap require their sizes and addresses to be
     * multiples of (the device's granularity). The recommended one may be larger, and taken as the granularity it
     * would refuse expandable segments (whose pages are 2 MiB) on a GPU that serves them.
     */
    static final int GRANULARITY_MINIMUM = 0;

    static final int RESULT_OUT_OF_MEMORY = 2;
    static final int RESULT_NOT_READY = 600;
    /** Granularity reported when the device has no virtual memory management (CUDA's usual 2 MiB). */
    static final long FALLBACK_GRANULARITY = 2L << 20;

    private static final int SCRATCH_BYTES = 256;
    private static final long BOUNCE_BYTES = 1L << 20;

    private final CudaDriver driver;
    private final int ordinal;
    private final int deviceHandle;
    private final long context;
    private final DeviceProperties properties;
    private final int driverVersion;
    private final MemorySegment allocationProp;
    private final MemorySegment accessDescriptor;
    private final AtomicLongArray calls = new AtomicLongArray(DeviceOp.values().length);
    private final HandleSet streams = new HandleSet();
    private final HandleSet events = new HandleSet();
    private final AtomicBoolean closed = new AtomicBoolean();
    /** The arena each live pinned host allocation's segment belongs to, by address (closed when it is freed). */
    private final ConcurrentHashMap<Long, Arena> pinnedHost = new ConcurrentHashMap<>();

    private final ThreadLocal<ThreadState> threadState = ThreadLocal.withInitial(this::newThreadState);

    /**
     * The device whose context gpumem last made current on each thread: a call binds its own device's context unless
     * that device is this one, so that after a call on another device (another GPU's context made current) it binds
     * its own again. A per-device "bound once" flag missed that switch, and ran the next call in the other GPU's
     * context. (The device, not the context handle: a device opened anew binds on each thread's first call, as a
     * primary context released and retained again may come back under the same handle.)
     */
    private static final ThreadLocal<CudaDevice[]> BOUND_DEVICE = ThreadLocal.withInitial(() -> new CudaDevice[1]);

    /** Per-thread scratch for out-parameters. */
    private static final class ThreadState {
        final MemorySegment scratch;
        /** The second word of {@link #scratch}, for calls with two out-parameters. */
        final MemorySegment scratchSecond;

        MemorySegment bounce;

        ThreadState(MemorySegment scratch) {
            this.scratch = scratch;
            this.scratchSecond = scratch.asSlice(8);
        }
    }

    private CudaDevice(CudaDriver driver, int ordinal, boolean allowVirtualMemory) {
        this.driver = driver;
        this.ordinal = ordinal;
        Arena arena = Arena.ofAuto();
        MemorySegment out = arena.allocate(SCRATCH_BYTES, 8);
        openCheck(driver.init(0), "cuInit(0)");
        openCheck(driver.deviceGetCount(out), "cuDeviceGetCount");
        int count = out.get(JAVA_INT, 0);
        if (count <= 0) {
            throw new CudaUnavailableException("the CUDA driver reports no device");
        }
        if (ordinal < 0 || ordinal >= count) {
            throw new CudaUnavailableException("no CUDA device " + ordinal + ": the driver reports " + count
                    + " device(s), numbered 0 to " + (count - 1));
        }
        openCheck(driver.deviceGet(out, ordinal), "cuDeviceGet(" + ordinal + ")");
        this.deviceHandle = out.get(JAVA_INT, 0);
        openCheck(driver.driverGetVersion(out), "cuDriverGetVersion");
        this.driverVersion = out.get(JAVA_INT, 0);
        openCheck(driver.deviceGetName(out, SCRATCH_BYTES, deviceHandle), "cuDeviceGetName");
        String name = out.getString(0);
        openCheck(driver.deviceTotalMem(out, deviceHandle), "cuDeviceTotalMem_v2");
        long totalMemory = out.get(JAVA_LONG, 0);
        openCheck(
                driver.deviceGetAttribute(out, ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, deviceHandle),
                "cuDeviceGetAttribute(VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)");
        boolean virtualMemory = allowVirtualMemory && out.get(JAVA_INT, 0) != 0;
        openCheck(driver.devicePrimaryCtxRetain(out, deviceHandle), "cuDevicePrimaryCtxRetain");
        this.context = out.get(JAVA_LONG, 0);
        this.allocationProp = DriverLayouts.pinnedDeviceProp(arena, ordinal);
        this.accessDescriptor = DriverLayouts.readWriteAccess(arena, ordinal);
        try {
            // This thread's current context changes here, behind whichever device gpumem last bound on it: forget
            // that device, so that its next call (or any device's) binds its own context again.
            BOUND_DEVICE.get()[0] = null;
            openCheck(driver.ctxSetCurrent(context), "cuCtxSetCurrent");
            long granularity = FALLBACK_GRANULARITY;
            if (virtualMemory) {
                openCheck(
                        driver.memGetAllocationGranularity(out, allocationProp, GRANULARITY_MINIMUM),
                        "cuMemGetAllocationGranularity");
                granularity = out.get(JAVA_LONG, 0);
            }
            this.properties = new DeviceProperties(name, ordinal, totalMemory, virtualMemory, granularity);
        } catch (RuntimeException e) {
            driver.devicePrimaryCtxRelease(deviceHandle);
            throw e;
        }
    }

    // ---------------------------------------------------------------- opening

    /** The driver library to load: {@value #LIBRARY_PROPERTY}, else {@value #LIBRARY_ENV}, else {@value #DEFAULT_LIBRARY}. */
    public static String configuredLibrary() {
        String property = System.getProperty(LIBRARY_PROPERTY);
        if (property != null && !property.isBlank()) {
            return property;
        }
        String env = System.getenv(LIBRARY_ENV);
        return env != null && !env.isBlank() ? env : DEFAULT_LIBRARY;
    }

    /** Opens device 0 of the {@linkplain #configuredLibrary() configured} driver. */
    public static CudaDevice open() {
        return open(configuredLibrary(), 0);
    }

    /** Opens device {@code ordinal} of the driver in {@code library}, using virtual memory when supported. */
    public static CudaDevice open(String library, int ordinal) {
        return open(library, ordinal, true);
    }

    /**
     * Opens device {@code ordinal} of the driver in {@code library}.
     *
     * @param allowVirtualMemory false to behave as if the device had no virtual memory management (to
     *                           exercise the classic fallback on a device that has it)
     * @throws CudaUnavailableException if the library cannot be loaded, initialised, or has no such device
     */
    public static CudaDevice open(String library, int ordinal, boolean allowVirtualMemory) {
        return new CudaDevice(CudaDriver.load(library), ordinal, allowVirtualMemory);
    }

    // ---------------------------------------------------------------- identity and memory info

    @Override
    public DeviceProperties properties() {
        return properties;
    }

    @Override
    public long freeMemory() {
        ThreadState state = enterState(DeviceOp.MEM_GET_INFO);
        check(DeviceOp.MEM_GET_INFO, driver.memGetInfo(state.scratch, state.scratchSecond), "cuMemGetInfo_v2()", 0, 0);
        return state.scratch.get(JAVA_LONG, 0);
    }

    /** The driver's version as {@code 1000 * major + 10 * minor}, e.g. 13000 for CUDA 13.0. */
    public int driverVersion() {
        return driverVersion;
    }

    /** The driver library this device was opened from. */
    public String library() {
        return driver.library();
    }

    // ---------------------------------------------------------------- classic allocation

    @Override
    public long malloc(long bytes) {
        MemorySegment out = enter(DeviceOp.MALLOC);
        if (bytes <= 0) {
            throw new DeviceException(
                    DeviceOp.MALLOC,
                    DeviceError.CUDA_ERROR_INVALID_VALUE,
                    "cuMemAlloc_v2 size must be positive, was " + bytes);
        }
        return resultOrNull(DeviceOp.MALLOC, driver.memAlloc(out, bytes), "cuMemAlloc_v2(%d bytes)", bytes, out);
    }

    @Override
    public void free(long address) {
        enter(DeviceOp.FREE);
        if (address == NULL) {
            throw new DeviceException(DeviceOp.FREE, DeviceError.CUDA_ERROR_INVALID_VALUE, "cuMemFree_v2 of address 0");
        }
        check(DeviceOp.FREE, driver.memFree(address), "cuMemFree_v2(0x%x)", address, 0);
    }

    // ---------------------------------------------------------------- virtual memory management

    @Override
    public long reserveAddressRange(long size) {
        MemorySegment out = enterVirtual(DeviceOp.RESERVE_ADDRESS);
        check(
                DeviceOp.RESERVE_ADDRESS,
                driver.memAddressReserve(out, size, 0, 0, 0),
                "cuMemAddressReserve(%d bytes, alignment 0, hint 0, flags 0)",
                size,
                0);
        return out.get(JAVA_LONG, 0);
    }

    @Override
    public void freeAddressRange(long address, long size) {
        enterVirtual(DeviceOp.FREE_ADDRESS);
        int rc = driver.memAddressFree(address, size);
        check(DeviceOp.FREE_ADDRESS, rc, "cuMemAddressFree(0x%x, %d bytes)", address, size);
    }

    @Override
    public long createPhysical(long size) {
        MemorySegment out = enterVirtual(DeviceOp.CREATE_PHYSICAL);
        return resultOrNull(
                DeviceOp.CREATE_PHYSICAL,
                driver.memCreate(out, size, allocationProp, 0),
                "cuMemCreate(%d bytes, pinned on this device, 0)",
                size,
                out);
    }

    /**
     * The end of a call that hands back an allocation through {@code out}: {@link #NULL} when the driver said out
     * of memory (the allocator frees its cache and retries), the value written to {@code out} on success, and a
     * {@link DeviceException} for any other error.
     */
    private long resultOrNull(DeviceOp op, int rc, String call, long size, MemorySegment out) {
        if (rc == RESULT_OUT_OF_MEMORY) {
            return NULL;
        }
        check(op, rc, call, size, 0);
        return out.get(JAVA_LONG, 0);
    }

    @Override
    public void releasePhysical(long handle) {
        enterVirtual(DeviceOp.RELEASE_PHYSICAL);
        check(DeviceOp.RELEASE_PHYSICAL, driver.memRelease(handle), "cuMemRelease(handle %d)", handle, 0);
    }

    @Override
    public void map(long address, long size, long handle) {
        enterVirtual(DeviceOp.MAP);
        int rc = driver.memMap(address, size, 0, handle, 0);
        if (rc != 0) {
            throw failure(
                    DeviceOp.MAP,
                    rc,
                    "cuMemMap(0x" + Long.toHexString(address) + ", " + size + ", 0, handle " + handle + ", 0)");
        }
    }

    @Override
    public void setAccess(long address, long size) {
        enterVirtual(DeviceOp.SET_ACCESS);
        check(
                DeviceOp.SET_ACCESS,
                driver.memSetAccess(address, size, accessDescriptor, 1),
                "cuMemSetAccess(0x%x, %d bytes, read-write for this device)",
                address,
                size);
    }

    @Override
    public void unmap(long address, long size) {
        enterVirtual(DeviceOp.UNMAP);
        check(DeviceOp.UNMAP, driver.memUnmap(address, size), "cuMemUnmap(0x%x, %d bytes)", address, size);
    }

    // ---------------------------------------------------------------- streams and events

    @Override
    public long createStream() {
        return create(
                DeviceOp.CREATE_STREAM,
                out -> driver.streamCreate(out, STREAM_NON_BLOCKING),
                "cuStreamCreate(CU_STREAM_NON_BLOCKING)",
                streams);
    }

    @Override
    public void destroyStream(long stream) {
        count(DeviceOp.DESTROY_STREAM);
        if (stream == DEFAULT_STREAM) {
            throw new DeviceException(
                    DeviceOp.DESTROY_STREAM,
                    DeviceError.CUDA_ERROR_INVALID_HANDLE,
                    "the default stream cannot be destroyed");
        }
        if (!streams.remove(stream)) {
            throw unknownStream(DeviceOp.DESTROY_STREAM, stream);
        }
        bindOrRestore(DeviceOp.DESTROY_STREAM, stream, streams);
        destroyed(DeviceOp.DESTROY_STREAM, driver.streamDestroy(stream), "cuStreamDestroy_v2(0x%x)", stream, streams);
    }

    @Override
    public void synchronizeStream(long stream) {
        enterStream(DeviceOp.SYNCHRONIZE_STREAM, stream);
        check(DeviceOp.SYNCHRONIZE_STREAM, driver.streamSynchronize(stream), "cuStreamSynchronize(0x%x)", stream, 0);
    }

    @Override
    public void synchronizeDevice() {
        enter(DeviceOp.SYNCHRONIZE_DEVICE);
        check(DeviceOp.SYNCHRONIZE_DEVICE, driver.ctxSynchronize(), "cuCtxSynchronize()", 0, 0);
    }

    @Override
    public long createEvent() {
        return create(
                DeviceOp.CREATE_EVENT,
                out -> driver.eventCreate(out, EVENT_DISABLE_TIMING),
                "cuEventCreate(CU_EVENT_DISABLE_TIMING)",
                events);
    }

    @Override
    public void recordEvent(long event, long stream) {
        count(DeviceOp.RECORD_EVENT);
        requireEvent(DeviceOp.RECORD_EVENT, event);
        requireStream(DeviceOp.RECORD_EVENT, stream);
        bind(DeviceOp.RECORD_EVENT);
        int rc = driver.eventRecord(event, stream);
        check(DeviceOp.RECORD_EVENT, rc, "cuEventRecord(0x%x, stream 0x%x)", event, stream);
    }

    @Override
    public boolean queryEvent(long event) {
        enterEvent(DeviceOp.QUERY_EVENT, event);
        int rc = driver.eventQuery(event);
        if (rc == RESULT_NOT_READY) {
            return false;
        }
        check(DeviceOp.QUERY_EVENT, rc, "cuEventQuery(0x%x)", event, 0);
        return true;
    }

    @Override
    public void synchronizeEvent(long event) {
        enterEvent(DeviceOp.SYNCHRONIZE_EVENT, event);
        check(DeviceOp.SYNCHRONIZE_EVENT, driver.eventSynchronize(event), "cuEventSynchronize(0x%x)", event, 0);
    }

    @Override
    public void destroyEvent(long event) {
        count(DeviceOp.DESTROY_EVENT);
        if (!events.remove(event)) {
            throw unknownEvent(DeviceOp.DESTROY_EVENT, event);
        }
        bindOrRestore(DeviceOp.DESTROY_EVENT, event, events);
        destroyed(DeviceOp.DESTROY_EVENT, driver.eventDestroy(event), "cuEventDestroy_v2(0x%x)", event, events);
    }

    /**
     * Lets this device use a stream created elsewhere in the process (other CUDA code sharing the primary
     * context), e.g. for {@code CachingAllocator.recordStream}. The caller keeps ownership: it must outlive
     * its use here, and {@link #destroyStream} destroys it.
     */
    public void registerStream(long stream) {
        if (stream != DEFAULT_STREAM) {
            streams.add(stream);
        }
    }

    /**
     * Runs a create call ({@code call} writes the new handle at the start of the scratch segment it is given and
     * returns the driver's result), checks it and records the handle in {@code owned}, the set later calls check
     * handles against: streams and events are created alike.
     */
    private long create(DeviceOp op, ToIntFunction<MemorySegment> call, String name, HandleSet owned) {
        MemorySegment out = enter(op);
        check(op, call.applyAsInt(out), name, 0, 0);
        long handle = out.get(JAVA_LONG, 0);
        owned.add(handle);
        return handle;
    }

    /**
     * Checks a destroy call of {@code handle}, which the caller took out of {@code owned} before the driver saw it
     * (so that a second destroy of it, even one racing this, is refused before reaching the driver); puts the
     * handle back if the driver did not let it go.
     */
    private void destroyed(DeviceOp op, int rc, String call, long handle, HandleSet owned) {
        if (rc != 0) {
            owned.add(handle);
        }
        check(op, rc, call, handle, 0);
    }

    /** Enters an op on {@code stream} ({@link #enter}), refusing a stream this device neither created nor registered. */
    private void enterStream(DeviceOp op, long stream) {
        count(op);
        requireStream(op, stream);
        bind(op);
    }

    /** Enters an op on {@code event} ({@link #enter}), refusing an event this device did not create or destroyed. */
    private void enterEvent(DeviceOp op, long event) {
        count(op);
        requireEvent(op, event);
        bind(op);
    }

    /** {@link #bind}s for a destroy that already took {@code handle} out of {@code owned}; puts it back if that fails. */
    private void bindOrRestore(DeviceOp op, long handle, HandleSet owned) {
        try {
            bind(op);
        } catch (RuntimeException e) {
            owned.add(handle);
            throw e;
        }
    }

    private void requireStream(DeviceOp op, long stream) {
        if (stream != DEFAULT_STREAM && !streams.contains(stream)) {
            throw unknownStream(op, stream);
        }
    }

    private void requireEvent(DeviceOp op, long event) {
        if (!events.contains(event)) {
            throw unknownEvent(op, event);
        }
    }

    private static DeviceException unknownStream(DeviceOp op, long stream) {
        return new DeviceException(
                op,
                DeviceError.CUDA_ERROR_INVALID_HANDLE,
                "stream 0x" + Long.toHexString(stream)
                        + " was not created by this device (createStream) nor registered (registerStream), or was"
                        + " destroyed");
    }

    private static DeviceException unknownEvent(DeviceOp op, long event) {
        return new DeviceException(
                op,
                DeviceError.CUDA_ERROR_INVALID_HANDLE,
                "event 0x" + Long.toHexString(event) + " was not created by this device or was destroyed");
    }

    // ---------------------------------------------------------------- data movement

    @Override
    public void copyToDevice(long deviceAddress, MemorySegment host, long bytes) {
        copyHost(true, deviceAddress, host, bytes);
    }

    @Override
    public void copyToHost(MemorySegment host, long deviceAddress, long bytes) {
        copyHost(false, deviceAddress, host, bytes);
    }

    /**
     * A copy between device memory and a host segment, either way: in one driver call from a native segment; a
     * heap segment has no stable address, so it is staged through the thread's native bounce buffer a chunk at a
     * time. A read-only segment cannot receive a copy.
     */
    private void copyHost(boolean toDevice, long deviceAddress, MemorySegment host, long bytes) {
        ThreadState state = enterState(DeviceOp.COPY);
        checkHostRange(host, bytes);
        if (!toDevice && host.isReadOnly()) {
            throw new DeviceException(
                    DeviceOp.COPY,
                    DeviceError.CUDA_ERROR_INVALID_VALUE,
                    "cuMemcpyDtoH_v2 into a read-only host segment");
        }
        if (host.isNative()) {
            memcpy(toDevice, deviceAddress, host, bytes);
            return;
        }
        MemorySegment bounce = bounce(state);
        for (long done = 0; done < bytes; done += BOUNCE_BYTES) {
            long chunk = Math.min(BOUNCE_BYTES, bytes - done);
            if (toDevice) {
                MemorySegment.copy(host, done, bounce, 0, chunk);
            }
            memcpy(toDevice, deviceAddress + done, bounce, chunk);
            if (!toDevice) {
                MemorySegment.copy(bounce, 0, host, done, chunk);
            }
        }
    }

    /** One driver copy between device memory and a native host segment. */
    private void memcpy(boolean toDevice, long deviceAddress, MemorySegment nativeHost, long bytes) {
        if (toDevice) {
            check(
                    DeviceOp.COPY,
                    driver.memcpyHtoD(deviceAddress, nativeHost, bytes),
                    "cuMemcpyHtoD_v2(0x%x, host, %d bytes)",
                    deviceAddress,
                    bytes);
        } else {
            check(
                    DeviceOp.COPY,
                    driver.memcpyDtoH(nativeHost, deviceAddress, bytes),
                    "cuMemcpyDtoH_v2(host, 0x%x, %d bytes)",
                    deviceAddress,
                    bytes);
        }
    }

    @Override
    public void copyDeviceToDevice(long dstAddress, long srcAddress, long bytes) {
        enter(DeviceOp.COPY);
        if (bytes < 0) {
            throw new DeviceException(
                    DeviceOp.COPY, DeviceError.CUDA_ERROR_INVALID_VALUE, "negative byte count " + bytes);
        }
        check(
                DeviceOp.COPY,
                driver.memcpyDtoD(dstAddress, srcAddress, bytes),
                "cuMemcpyDtoD_v2(0x%x, 0x%x, %d bytes)",
                dstAddress,
                srcAddress,
                bytes);
    }

    // ---------------------------------------------------------------- pinned host memory

    /**
     * Allocates {@code bytes} of page-locked host memory ({@code cuMemHostAlloc}, portable), which the GPU
     * copies to and from at full speed. Free it with {@link #freePinnedHost}; it is not counted as a
     * {@code Device} operation.
     */
    @SuppressWarnings("restricted") // sizing the driver's host pointer to the bytes it allocated
    public MemorySegment allocatePinnedHost(long bytes) {
        requireOpen(DeviceOp.MALLOC);
        ThreadState state = threadState.get();
        bindContext(DeviceOp.MALLOC);
        if (bytes <= 0) {
            throw new IllegalArgumentException("pinned host allocation size must be positive, was " + bytes);
        }
        int rc = driver.memHostAlloc(state.scratch, bytes, 0x1);
        if (rc != 0) {
            throw failure(DeviceOp.MALLOC, rc, "cuMemHostAlloc(" + bytes + ")");
        }
        long address = state.scratch.get(JAVA_LONG, 0);
        // The segment lives in an arena of its own, closed by freePinnedHost: touching the memory after its free
        // throws instead of reading or writing whatever the driver put there since.
        @SuppressWarnings("MustBeClosedChecker") // closed by freePinnedHost, when the memory goes back to the driver
        Arena lifetime = Arena.ofShared();
        pinnedHost.put(address, lifetime);
        return MemorySegment.ofAddress(address).reinterpret(bytes, lifetime, null);
    }

    /**
     * Frees memory from {@link #allocatePinnedHost} ({@code cuMemFreeHost}); the segment (and every slice of it) is
     * unusable afterwards: an access throws {@link IllegalStateException}.
     */
    public void freePinnedHost(MemorySegment pinned) {
        requireOpen(DeviceOp.FREE);
        bindContext(DeviceOp.FREE);
        int rc = driver.memFreeHost(pinned.address());
        if (rc != 0) {
            throw failure(DeviceOp.FREE, rc, "cuMemFreeHost(0x" + Long.toHexString(pinned.address()) + ")");
        }
        Arena lifetime = pinnedHost.remove(pinned.address());
        if (lifetime != null) {
            lifetime.close();
        }
    }

    // ---------------------------------------------------------------- observability and lifecycle

    @Override
    public long callCount(DeviceOp op) {
        return calls.get(op.ordinal());
    }

    /**
     * Releases the primary context; idempotent. Every later call throws (see the class comment).
     *
     * @throws DeviceException of {@link DeviceOp#FREE} (the release of what the device held), naming
     *     {@code cuDevicePrimaryCtxRelease_v2} and the driver's error, when the driver refuses the release; the device
     *     is closed all the same, and a second close does not try again
     */
    @Override
    public void close() {
        if (closed.compareAndSet(false, true)) {
            int rc = driver.devicePrimaryCtxRelease(deviceHandle);
            if (rc != 0) {
                throw failure(DeviceOp.FREE, rc, "cuDevicePrimaryCtxRelease_v2(device " + ordinal + ") at close");
            }
        }
    }

    @Override
    public String toString() {
        return "CudaDevice[" + ordinal + ": " + properties.name() + ", " + properties.totalMemory()
                + " bytes, virtual memory " + (properties.supportsVirtualMemory() ? "yes" : "no") + ", driver "
                + driver.library() + "]";
    }

    // ---------------------------------------------------------------- plumbing

    private ThreadState newThreadState() {
        return new ThreadState(Arena.ofAuto().allocate(SCRATCH_BYTES, 8));
    }

    /** Counts the call, makes our context current on this thread, and returns the thread's scratch. */
    private MemorySegment enter(DeviceOp op) {
        return enterState(op).scratch;
    }

    private ThreadState enterState(DeviceOp op) {
        count(op);
        return bind(op);
    }

    /** Counts a call and refuses it on a closed device: what every call does before its own checks. */
    private void count(DeviceOp op) {
        calls.incrementAndGet(op.ordinal());
        requireOpen(op);
    }

    /**
     * Makes our context current on this thread and returns the thread's scratch: the last step before the driver
     * call, after any check that may block (a contended handle set), so that a virtual thread cannot change carrier
     * between the bind and the call.
     */
    private ThreadState bind(DeviceOp op) {
        ThreadState state = threadState.get();
        bindContext(op);
        return state;
    }

    /** Refuses a call after {@link #close()}, before the driver sees it. */
    private void requireOpen(DeviceOp op) {
        if (closed.get()) {
            throw new DeviceException(
                    op,
                    DeviceError.CUDA_ERROR_INVALID_CONTEXT,
                    "CUDA device " + ordinal + " (" + properties.name() + ", driver " + driver.library()
                            + ") was closed; open a new CudaDevice");
        }
    }

    private MemorySegment enterVirtual(DeviceOp op) {
        MemorySegment out = enter(op);
        if (!properties.supportsVirtualMemory()) {
            throw new DeviceException(
                    op,
                    DeviceError.CUDA_ERROR_NOT_SUPPORTED,
                    "virtual memory management is not available on " + properties.name()
                            + " (device attribute 102 is 0, or it was disabled when opening the device)");
        }
        return out;
    }

    /**
     * Makes this device's context current on the calling thread, unless gpumem made it so last; {@code op} fails. A
     * virtual thread always binds: the driver's current context belongs to the carrier, which the thread may have
     * changed since its last call, to one where another device's context is current (or none).
     */
    private void bindContext(DeviceOp op) {
        CudaDevice[] bound = BOUND_DEVICE.get();
        if (bound[0] != this || Thread.currentThread().isVirtual()) {
            int rc = driver.ctxSetCurrent(context);
            if (rc != 0) {
                throw failure(op, rc, "cuCtxSetCurrent");
            }
            bound[0] = this;
        }
    }

    private static MemorySegment bounce(ThreadState state) {
        if (state.bounce == null) {
            state.bounce = Arena.ofAuto().allocate(BOUNCE_BYTES, 64);
        }
        return state.bounce;
    }

    private static void checkHostRange(MemorySegment host, long bytes) {
        if (bytes < 0 || bytes > host.byteSize()) {
            throw new DeviceException(
                    DeviceOp.COPY,
                    DeviceError.CUDA_ERROR_INVALID_VALUE,
                    "copy of " + bytes + " bytes with a host segment of " + host.byteSize() + " bytes");
        }
    }

    /**
     * Throws the failure of a driver call unless {@code rc} is 0. {@code call} is a {@link String#format} pattern
     * writing the call with its arguments from {@code arg0}, {@code arg1} (e.g. {@code "cuMemFree_v2(0x%x)"}),
     * formatted only on failure so that a successful call allocates nothing.
     */
    private void check(DeviceOp op, int rc, String call, long arg0, long arg1) {
        check(op, rc, call, arg0, arg1, 0);
    }

    /** {@link #check(DeviceOp, int, String, long, long)} for a call shown with three numbers. */
    private void check(DeviceOp op, int rc, String call, long arg0, long arg1, long arg2) {
        if (rc != 0) {
            throw failure(op, rc, String.format(Locale.ROOT, call, arg0, arg1, arg2));
        }
    }

    private DeviceException failure(DeviceOp op, int rc, String call) {
        return new DeviceException(
                op, DeviceError.ofCode(rc), call + " returned " + driver.errorName(rc) + " (" + rc + ")");
    }

    private void openCheck(int rc, String call) {
        if (rc != 0) {
            throw new CudaUnavailableException("CUDA driver " + driver.library() + ": " + call + " returned "
                    + driver.errorName(rc) + " (" + rc + ")");
        }
    }
}
