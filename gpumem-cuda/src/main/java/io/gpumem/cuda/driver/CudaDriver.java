package io.gpumem.cuda.driver;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Hand-written Foreign Function &amp; Memory bindings to the CUDA driver API ({@code libcuda.so.1}): the
 * roughly forty functions gpumem needs, each bound by the symbol the driver <em>exports</em>.
 *
 * <h2>Why exact export names</h2>
 * {@code cuda.h} {@code #define}s many API names to versioned exports ({@code cuMemAlloc} to
 * {@code cuMemAlloc_v2}, ...). The unversioned symbols still exist in libcuda for old binaries and take
 * 32-bit sizes, so binding {@code "cuMemAlloc"} by name would silently get the wrong ABI. Every symbol
 * bound here is listed in {@link #SYMBOLS}; the fake driver's tests check with {@code nm -D} that it
 * exports each of them, and the fake's own unversioned {@code cuMemAlloc} always fails.
 *
 * <h2>Calling convention</h2>
 * Each method is one driver call returning the raw {@code CUresult} (0 = success); out-parameters are
 * caller-provided native segments. Opaque pointer handles ({@code CUcontext}, {@code CUstream},
 * {@code CUevent}) are passed and returned as {@code long}: on the LP64 platforms CUDA supports a
 * pointer and a 64-bit integer travel in the same register, and a {@code long} needs no
 * {@link MemorySegment} wrapper per call. Method handles are final fields called with
 * {@code invokeExact}; nothing here allocates per call.
 *
 * <p>Instances are immutable and thread-safe (the driver is). {@link #load} caches one instance per library
 * name, because the library is never unloaded (dlopen caches it anyway).
 */
@SuppressWarnings(
        "restricted") // binding native code is this class's purpose; the JVM grants it with --enable-native-access
public final class CudaDriver {

    /** Every driver symbol this class binds, exactly as exported by libcuda. */
    public static final List<String> SYMBOLS;

    private static final Linker LINKER = Linker.nativeLinker();
    private static final Map<String, CudaDriver> LOADED = new ConcurrentHashMap<>();
    private static final List<String> BOUND = new ArrayList<>();

    private static final FunctionDescriptor I_I = FunctionDescriptor.of(JAVA_INT, JAVA_INT);
    private static final FunctionDescriptor I_A = FunctionDescriptor.of(JAVA_INT, ADDRESS);
    private static final FunctionDescriptor I_L = FunctionDescriptor.of(JAVA_INT, JAVA_LONG);
    private static final FunctionDescriptor I_LL = FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG);
    private static final FunctionDescriptor I_AI = FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT);
    private static final FunctionDescriptor I_AL = FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG);
    private static final FunctionDescriptor I_AA = FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS);

    static {
        // The descriptors below pass opaque handles as JAVA_LONG; that is only the pointer ABI on 64-bit.
        if (ADDRESS.byteSize() != 8) {
            throw new ExceptionInInitializerError("gpumem's CUDA bindings need a 64-bit platform");
        }
        // Record the symbol list once by describing every binding against a lookup that finds nothing.
        new CudaDriver(name -> Optional.of(MemorySegment.NULL), BOUND, "(symbol list)");
        SYMBOLS = Collections.unmodifiableList(new ArrayList<>(BOUND));
    }

    private final String library;

    // init, devices, primary context
    private final MethodHandle cuInit,
            cuDriverGetVersion,
            cuDeviceGetCount,
            cuDeviceGet,
            cuDeviceGetName,
            cuDeviceTotalMem,
            cuDeviceGetAttribute,
            cuDevicePrimaryCtxRetain,
            cuDevicePrimaryCtxRelease,
            cuCtxSetCurrent,
            cuCtxGetCurrent,
            cuCtxSynchronize;
    // classic allocation and memory info
    private final MethodHandle cuMemAlloc, cuMemFree, cuMemGetInfo;
    // virtual memory management
    private final MethodHandle cuMemGetAllocationGranularity,
            cuMemAddressReserve,
            cuMemAddressFree,
            cuMemCreate,
            cuMemRelease,
            cuMemMap,
            cuMemUnmap,
            cuMemSetAccess;
    // streams and events
    private final MethodHandle cuStreamCreate,
            cuStreamDestroy,
            cuStreamSynchronize,
            cuStreamQuery,
            cuStreamWaitEvent,
            cuEventCreate,
            cuEventRecord,
            cuEventQuery,
            cuEventSynchronize,
            cuEventDestroy;
    // copies and pinned host memory
    private final MethodHandle cuMemcpyHtoD, cuMemcpyDtoH, cuMemcpyDtoD, cuMemHostAlloc, cuMemFreeHost;
    // errors
    private final MethodHandle cuGetErrorName, cuGetErrorString;

    private CudaDriver(SymbolLookup lookup, List<String> record, String library) {
        this.library = library;
        Binder b = new Binder(lookup, record, library);
        FunctionDescriptor none = FunctionDescriptor.of(JAVA_INT);
        cuInit = b.bind("cuInit", I_I);
        cuDriverGetVersion = b.bind("cuDriverGetVersion", I_A);
        cuDeviceGetCount = b.bind("cuDeviceGetCount", I_A);
        cuDeviceGet = b.bind("cuDeviceGet", I_AI);
        cuDeviceGetName = b.bind("cuDeviceGetName", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT));
        cuDeviceTotalMem = b.bind("cuDeviceTotalMem_v2", I_AI);
        cuDeviceGetAttribute =
                b.bind("cuDeviceGetAttribute", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT));
        cuDevicePrimaryCtxRetain = b.bind("cuDevicePrimaryCtxRetain", I_AI);
        cuDevicePrimaryCtxRelease = b.bind("cuDevicePrimaryCtxRelease_v2", I_I);
        cuCtxSetCurrent = b.bind("cuCtxSetCurrent", I_L);
        cuCtxGetCurrent = b.bind("cuCtxGetCurrent", I_A);
        cuCtxSynchronize = b.bind("cuCtxSynchronize", none);

        cuMemAlloc = b.bind("cuMemAlloc_v2", I_AL);
        cuMemFree = b.bind("cuMemFree_v2", I_L);
        cuMemGetInfo = b.bind("cuMemGetInfo_v2", I_AA);

        cuMemGetAllocationGranularity =
                b.bind("cuMemGetAllocationGranularity", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, JAVA_INT));
        cuMemAddressReserve = b.bind(
                "cuMemAddressReserve",
                FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG));
        cuMemAddressFree = b.bind("cuMemAddressFree", I_LL);
        cuMemCreate = b.bind("cuMemCreate", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, ADDRESS, JAVA_LONG));
        cuMemRelease = b.bind("cuMemRelease", I_L);
        cuMemMap = b.bind(
                "cuMemMap", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG));
        cuMemUnmap = b.bind("cuMemUnmap", I_LL);
        cuMemSetAccess =
                b.bind("cuMemSetAccess", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG, ADDRESS, JAVA_LONG));

        cuStreamCreate = b.bind("cuStreamCreate", I_AI);
        cuStreamDestroy = b.bind("cuStreamDestroy_v2", I_L);
        cuStreamSynchronize = b.bind("cuStreamSynchronize", I_L);
        // Query calls never block or call back: skip the thread-state transition.
        cuStreamQuery = b.bindCritical("cuStreamQuery", I_L);
        cuStreamWaitEvent =
                b.bind("cuStreamWaitEvent", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_INT));
        cuEventCreate = b.bind("cuEventCreate", I_AI);
        cuEventRecord = b.bind("cuEventRecord", I_LL);
        cuEventQuery = b.bindCritical("cuEventQuery", I_L);
        cuEventSynchronize = b.bind("cuEventSynchronize", I_L);
        cuEventDestroy = b.bind("cuEventDestroy_v2", I_L);

        cuMemcpyHtoD = b.bind("cuMemcpyHtoD_v2", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, ADDRESS, JAVA_LONG));
        cuMemcpyDtoH = b.bind("cuMemcpyDtoH_v2", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_LONG));
        cuMemcpyDtoD = b.bind("cuMemcpyDtoD_v2", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_LONG));
        cuMemHostAlloc = b.bind("cuMemHostAlloc", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_INT));
        cuMemFreeHost = b.bind("cuMemFreeHost", I_L);

        cuGetErrorName = b.bind("cuGetErrorName", FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS));
        cuGetErrorString = b.bind("cuGetErrorString", FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS));
    }

    /**
     * Loads the driver library and binds every symbol in {@link #SYMBOLS}.
     *
     * @param library a file path (anything containing {@code /}) or a library name resolved by the dynamic
     *                loader, e.g. {@code libcuda.so.1}
     * @throws CudaUnavailableException if the library cannot be loaded or lacks a symbol
     */
    public static CudaDriver load(String library) {
        return LOADED.computeIfAbsent(library, CudaDriver::bindLibrary);
    }

    private static CudaDriver bindLibrary(String library) {
        SymbolLookup lookup;
        try {
            lookup = library.contains("/")
                    ? SymbolLookup.libraryLookup(Path.of(library), Arena.global())
                    : SymbolLookup.libraryLookup(library, Arena.global());
        } catch (IllegalArgumentException | IllegalCallerException e) {
            throw new CudaUnavailableException(
                    "cannot load the CUDA driver library '" + library + "' ("
                            + e.getMessage() + "); is an NVIDIA driver installed? Point -Dgpumem.cuda.library (or "
                            + "GPUMEM_CUDA_LIBRARY) at libcuda.so.1",
                    e);
        }
        return new CudaDriver(lookup, null, library);
    }

    /** The library this driver was loaded from, as given to {@link #load}. */
    public String library() {
        return library;
    }

    // ---------------------------------------------------------------- init, devices, primary context

    public int init(int flags) {
        try {
            return (int) cuInit.invokeExact(flags);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public int driverGetVersion(MemorySegment outVersion) {
        try {
            return (int) cuDriverGetVersion.invokeExact(outVersion);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public int deviceGetCount(MemorySegment outCount) {
        try {
            return (int) cuDeviceGetCount.invokeExact(outCount);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public int deviceGet(MemorySegment outDevice, int ordinal) {
        try {
            return (int) cuDeviceGet.invokeExact(outDevice, ordinal);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public int deviceGetName(MemorySegment outName, int length, int device) {
        try {
            return (int) cuDeviceGetName.invokeExact(outName, length, device);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public int deviceTotalMem(MemorySegment outBytes, int device) {
        try {
            return (int) cuDeviceTotalMem.invokeExact(outBytes, device);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public int deviceGetAttribute(MemorySegment outValue, int attribute, int device) {
        try {
            return (int) cuDeviceGetAttribute.invokeExact(outValue, attribute, device);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public int devicePrimaryCtxRetain(MemorySegment outContext, int device) {
        try {
            return (int) cuDevicePrimaryCtxRetain.invokeExact(outContext, device);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public int devicePrimaryCtxRelease(int device) {
        try {
            return (int) cuDevicePrimaryCtxRelease.invokeExact(device);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public int ctxSetCurrent(long context) {
        try {
            return (int) cuCtxSetCurrent.invokeExact(context);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public int ctxGetCurrent(MemorySegment outContext) {
        try {
            return (int) cuCtxGetCurrent.invokeExact(outContext);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public int ctxSynchronize() {
        try {
            return (int) cuCtxSynchronize.invokeExact();
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    // ---------------------------------------------------------------- classic allocation

    public int memAlloc(MemorySegment outPointer, long bytes) {
        try {
            return (int) cuMemAlloc.invokeExact(outPointer, bytes);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public int memFree(long pointer) {
        try {
            return (int) cuMemFree.invokeExact(pointer);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** {@code cuMemGetInfo_v2}: writes free bytes at {@code outFree} and total bytes at {@code outTotal}. */
    public int memGetInfo(MemorySegment outFree, MemorySegment outTotal) {
        try {
            return (int) cuMemGetInfo.invokeExact(outFree, outTotal);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    // ---------------------------------------------------------------- virtual memory management

    public int memGetAllocationGranularity(MemorySegment outGranularity, MemorySegment prop, int option) {
        try {
            return (int) cuMemGetAllocationGranularity.invokeExact(outGranularity, prop, option);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public int memAddressReserve(MemorySegment outPointer, long size, long alignment, long addressHint, long flags) {
        try {
            return (int) cuMemAddressReserve.invokeExact(outPointer, size, alignment, addressHint, flags);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public int memAddressFree(long pointer, long size) {
        try {
            return (int) cuMemAddressFree.invokeExact(pointer, size);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public int memCreate(MemorySegment outHandle, long size, MemorySegment prop, long flags) {
        try {
            return (int) cuMemCreate.invokeExact(outHandle, size, prop, flags);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public int memRelease(long handle) {
        try {
            return (int) cuMemRelease.invokeExact(handle);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public int memMap(long pointer, long size, long offset, long handle, long flags) {
        try {
            return (int) cuMemMap.invokeExact(pointer, size, offset, handle, flags);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public int memUnmap(long pointer, long size) {
        try {
            return (int) cuMemUnmap.invokeExact(pointer, size);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public int memSetAccess(long pointer, long size, MemorySegment descriptors, long count) {
        try {
            return (int) cuMemSetAccess.invokeExact(pointer, size, descriptors, count);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    // ---------------------------------------------------------------- streams and events

    public int streamCreate(MemorySegment outStream, int flags) {
        try {
            return (int) cuStreamCreate.invokeExact(outStream, flags);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public int streamDestroy(long stream) {
        try {
            return (int) cuStreamDestroy.invokeExact(stream);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public int streamSynchronize(long stream) {
        try {
            return (int) cuStreamSynchronize.invokeExact(stream);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public int streamQuery(long stream) {
        try {
            return (int) cuStreamQuery.invokeExact(stream);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public int streamWaitEvent(long stream, long event, int flags) {
        try {
            return (int) cuStreamWaitEvent.invokeExact(stream, event, flags);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public int eventCreate(MemorySegment outEvent, int flags) {
        try {
            return (int) cuEventCreate.invokeExact(outEvent, flags);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public int eventRecord(long event, long stream) {
        try {
            return (int) cuEventRecord.invokeExact(event, stream);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public int eventQuery(long event) {
        try {
            return (int) cuEventQuery.invokeExact(event);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public int eventSynchronize(long event) {
        try {
            return (int) cuEventSynchronize.invokeExact(event);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public int eventDestroy(long event) {
        try {
            return (int) cuEventDestroy.invokeExact(event);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    // ---------------------------------------------------------------- copies and pinned host memory

    /** Synchronous host-to-device copy; {@code source} must be a native segment of at least {@code bytes}. */
    public int memcpyHtoD(long destination, MemorySegment source, long bytes) {
        try {
            return (int) cuMemcpyHtoD.invokeExact(destination, source, bytes);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** Synchronous device-to-host copy; {@code destination} must be a native segment of at least {@code bytes}. */
    public int memcpyDtoH(MemorySegment destination, long source, long bytes) {
        try {
            return (int) cuMemcpyDtoH.invokeExact(destination, source, bytes);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public int memcpyDtoD(long destination, long source, long bytes) {
        try {
            return (int) cuMemcpyDtoD.invokeExact(destination, source, bytes);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** {@code cuMemHostAlloc}: page-locked host memory; the host address is written at {@code outPointer}. */
    public int memHostAlloc(MemorySegment outPointer, long bytes, int flags) {
        try {
            return (int) cuMemHostAlloc.invokeExact(outPointer, bytes, flags);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public int memFreeHost(long hostPointer) {
        try {
            return (int) cuMemFreeHost.invokeExact(hostPointer);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    // ---------------------------------------------------------------- errors

    /**
     * The driver's name for a result code ({@code cuGetErrorName}), e.g. {@code CUDA_ERROR_INVALID_VALUE};
     * {@code "CUresult <code>"} when the driver does not know the code.
     */
    public String errorName(int result) {
        return describe(cuGetErrorName, result);
    }

    /** The driver's description of a result code ({@code cuGetErrorString}). */
    public String errorString(int result) {
        return describe(cuGetErrorString, result);
    }

    private static String describe(MethodHandle function, int result) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(ADDRESS);
            int rc = (int) function.invokeExact(result, out);
            MemorySegment text = out.get(ADDRESS, 0);
            if (rc != 0 || text.equals(MemorySegment.NULL)) {
                return "CUresult " + result;
            }
            return text.reinterpret(4096).getString(0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    private static RuntimeException rethrow(Throwable t) {
        if (t instanceof RuntimeException r) {
            return r;
        }
        if (t instanceof Error e) {
            throw e;
        }
        return new IllegalStateException("CUDA driver call failed unexpectedly", t);
    }

    /** Looks up symbols and makes downcall handles; with a record list it only notes the names. */
    private record Binder(SymbolLookup lookup, List<String> record, String library) {
        MethodHandle bind(String symbol, FunctionDescriptor descriptor, Linker.Option... options) {
            if (record != null) {
                record.add(symbol);
                return null;
            }
            MemorySegment address = lookup.find(symbol)
                    .orElseThrow(() -> new CudaUnavailableException("the CUDA driver library '" + library
                            + "' does not export " + symbol + "; it is too old for gpumem or not libcuda"));
            return LINKER.downcallHandle(address, descriptor, options);
        }

        MethodHandle bindCritical(String symbol, FunctionDescriptor descriptor) {
            return bind(symbol, descriptor, Linker.Option.critical(false));
        }
    }
}
