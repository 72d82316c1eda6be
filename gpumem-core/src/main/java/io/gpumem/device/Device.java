package io.gpumem.device;

import java.lang.foreign.MemorySegment;

/**
 * One accelerator as the allocator sees it: the small set of driver operations a caching allocator
 * needs, shaped after the CUDA driver API so that a real backend is a thin mapping.
 *
 * <h2>Contract</h2>
 * <ul>
 *   <li><b>Addresses and handles are plain {@code long}s.</b> {@link #NULL} (0) is never a valid
 *       address, handle, stream or event, except that stream 0 is the device's default stream.</li>
 *   <li><b>Out of memory is a result, not an exception.</b> {@link #malloc} and
 *       {@link #createPhysical} return {@link #NULL} when the device has no room; the caller decides
 *       what to do (the caching allocator frees its cache and retries). Every other failure (bad
 *       argument, double free, unmapped range, an injected fault) throws {@link DeviceException},
 *       which carries the driver's error name.</li>
 *   <li><b>Driver rules are enforced.</b> Virtual-memory sizes and addresses must be multiples of
 *       {@link #allocationGranularity()}; {@link #unmap} takes exactly a range that was mapped with one
 *       or more {@link #map} calls; a range must be unmapped before its address space is freed and a
 *       handle must not be released twice. Implementations fail loudly on misuse.</li>
 *   <li><b>Thread safety.</b> Implementations are safe for concurrent use.</li>
 *   <li><b>Closing.</b> {@link #close()} releases what the backend holds (a driver context, say); the default
 *       does nothing, so every device can be used in try-with-resources without a type test.</li>
 * </ul>
 *
 * <p>{@code SimulatedDevice} is the default everywhere (tests, replays, the CLI); the CUDA backend
 * lives in {@code gpumem-cuda}.
 */
public interface Device extends AutoCloseable {

    /** The null address / handle. */
    long NULL = 0L;

    /** The default (legacy) stream. */
    long DEFAULT_STREAM = 0L;

    // ---------------------------------------------------------------- identity and memory info

    /** What the device is, fixed when it was opened (the five methods below read it). */
    DeviceProperties properties();

    /** Human-readable name, e.g. {@code "NVIDIA H200"} or {@code "simulated"}. */
    default String name() {
        return properties().name();
    }

    /** Device ordinal, as in {@code torch.cuda.current_device()}. */
    default int index() {
        return properties().index();
    }

    /** Total device memory in bytes (what {@code cudaMemGetInfo} reports as total). */
    default long totalMemory() {
        return properties().totalMemory();
    }

    /**
     * Free device memory in bytes as the driver reports it ({@code cudaMemGetInfo}): total minus every
     * byte in use by anyone, including memory held outside the allocator (other processes, the context).
     */
    long freeMemory();

    // ---------------------------------------------------------------- classic allocation

    /**
     * Allocates {@code bytes} of device memory ({@code cuMemAlloc}).
     *
     * @return the device address, or {@link #NULL} if the device is out of memory
     * @throws DeviceException on any other error (non-positive size, injected fault, ...)
     */
    long malloc(long bytes);

    /** Frees an address returned by {@link #malloc} ({@code cuMemFree}); a foreign or freed address throws. */
    void free(long address);

    // ---------------------------------------------------------------- virtual memory management

    /** Whether the virtual-memory family below is supported (CUDA attribute 102). */
    default boolean supportsVirtualMemory() {
        return properties().supportsVirtualMemory();
    }

    /** Minimum granularity of physical allocations and mappings ({@code cuMemGetAllocationGranularity}). */
    default long allocationGranularity() {
        return properties().allocationGranularity();
    }

    /**
     * Reserves a virtual address range ({@code cuMemAddressReserve}); {@code size} must be a multiple of
     * the granularity. Reservation consumes no physical memory.
     */
    long reserveAddressRange(long size);

    /** Frees a reserved range ({@code cuMemAddressFree}); nothing in it may still be mapped. */
    void freeAddressRange(long address, long size);

    /**
     * Creates physical memory ({@code cuMemCreate}); {@code size} must be a multiple of the granularity.
     *
     * @return a handle, or {@link #NULL} if the device is out of memory
     */
    long createPhysical(long size);

    /** Releases physical memory ({@code cuMemRelease}); the memory is freed once it is also unmapped. */
    void releasePhysical(long handle);

    /** Maps the whole of {@code handle} at {@code address} inside a reserved range ({@code cuMemMap}). */
    void map(long address, long size, long handle);

    /** Makes a mapped range readable and writable by this device ({@code cuMemSetAccess}). */
    void setAccess(long address, long size);

    /** Unmaps a range ({@code cuMemUnmap}): it must cover whole earlier mappings exactly. */
    void unmap(long address, long size);

    // ---------------------------------------------------------------- streams and events

    /** Creates a stream; returns a non-zero handle. */
    long createStream();

    /** Destroys a stream created by {@link #createStream}. */
    void destroyStream(long stream);

    /** Blocks until all work queued on {@code stream} has completed. */
    void synchronizeStream(long stream);

    /** Blocks until all work on the device has completed. */
    void synchronizeDevice();

    /** Creates an event; returns a non-zero handle. */
    long createEvent();

    /** Records {@code event} on {@code stream}: it completes once the stream's current work has. */
    void recordEvent(long event, long stream);

    /** Whether the work captured by the event's last record has completed ({@code cuEventQuery}). */
    boolean queryEvent(long event);

    /** Blocks until the event has completed. */
    void synchronizeEvent(long event);

    /** Destroys an event. */
    void destroyEvent(long event);

    // ---------------------------------------------------------------- data movement

    /** Copies {@code bytes} from host memory to device memory (synchronous). */
    void copyToDevice(long deviceAddress, MemorySegment host, long bytes);

    /** Copies {@code bytes} from device memory to host memory (synchronous). */
    void copyToHost(MemorySegment host, long deviceAddress, long bytes);

    /** Copies {@code bytes} between two device addresses (synchronous). */
    void copyDeviceToDevice(long dstAddress, long srcAddress, long bytes);

    // ---------------------------------------------------------------- observability

    /** How many times {@code op} has been called on this device (successful or not). */
    long callCount(DeviceOp op);

    // ---------------------------------------------------------------- lifecycle

    /** Releases the backend's resources; the device must not be used afterwards. Does nothing by default. */
    @Override
    default void close() {}
}
