package io.gpumem.cuda.fake;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import io.gpumem.cuda.CudaDevice;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Test-side handle on the fake driver's control API ({@code fakecuda_*} exports of
 * {@code src/test/c/fakecuda.c}). The library is the one the build compiled and passed in the system
 * property {@code gpumem.cuda.fake.library}; it is the same file {@link CudaDevice} loads through
 * {@code gpumem.cuda.library}, and dlopen gives both the same instance, so the control calls act on the
 * driver state the device under test sees.
 */
@SuppressWarnings("restricted")
public final class FakeCuda {
    /** Absolute path of the compiled fake driver. */
    public static final Path LIBRARY = Path.of(require("gpumem.cuda.fake.library"));

    private static final Linker LINKER = Linker.nativeLinker();
    private static final SymbolLookup LOOKUP = SymbolLookup.libraryLookup(LIBRARY, Arena.global());
    private static final MethodHandle RESET = handle("fakecuda_reset", FunctionDescriptor.ofVoid());
    private static final MethodHandle SET_TOTAL = handle("fakecuda_set_total", FunctionDescriptor.ofVoid(JAVA_LONG));
    private static final MethodHandle SET_HELD_OUTSIDE =
            handle("fakecuda_set_held_outside", FunctionDescriptor.ofVoid(JAVA_LONG));
    private static final MethodHandle SET_GRANULARITY =
            handle("fakecuda_set_granularity", FunctionDescriptor.ofVoid(JAVA_LONG));
    private static final MethodHandle SET_RECOMMENDED_GRANULARITY =
            handle("fakecuda_set_recommended_granularity", FunctionDescriptor.ofVoid(JAVA_LONG));
    private static final MethodHandle SET_VMM =
            handle("fakecuda_set_vmm_supported", FunctionDescriptor.ofVoid(JAVA_INT));
    private static final MethodHandle HOLD_EVENTS = handle("fakecuda_hold_events", FunctionDescriptor.ofVoid(JAVA_INT));
    private static final MethodHandle FAIL_NTH =
            handle("fakecuda_fail_nth", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_INT));
    private static final MethodHandle DELAY =
            handle("fakecuda_delay", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT));
    private static final MethodHandle CALL_COUNT =
            handle("fakecuda_call_count", FunctionDescriptor.of(JAVA_LONG, ADDRESS));
    private static final MethodHandle COMPLETE_STREAM =
            handle("fakecuda_complete_stream", FunctionDescriptor.of(JAVA_INT, JAVA_LONG));
    private static final MethodHandle COMPLETE_ALL = handle("fakecuda_complete_all", FunctionDescriptor.ofVoid());
    private static final MethodHandle CLASSIC_BYTES = getter("fakecuda_classic_bytes");
    private static final MethodHandle PHYSICAL_BYTES = getter("fakecuda_physical_bytes");
    private static final MethodHandle LIVE_HANDLES = getter("fakecuda_live_handles");
    private static final MethodHandle LIVE_MAPPINGS = getter("fakecuda_live_mappings");
    private static final MethodHandle LIVE_RESERVATIONS = getter("fakecuda_live_reservations");
    private static final MethodHandle LIVE_ALLOCATIONS = getter("fakecuda_live_allocations");
    private static final MethodHandle HOST_BYTES = getter("fakecuda_host_bytes");

    /** Driver error codes the tests inject. */
    public static final int INVALID_VALUE = 1;

    public static final int OUT_OF_MEMORY = 2;
    public static final int UNKNOWN = 999;

    private FakeCuda() {}

    private static String require(String property) {
        String value = System.getProperty(property);
        if (value == null || !Files.isRegularFile(Path.of(value))) {
            throw new IllegalStateException("system property " + property + " must name the compiled fake driver "
                    + "(the Maven build sets it); got " + value);
        }
        return value;
    }

    private static MethodHandle handle(String name, FunctionDescriptor descriptor) {
        return LINKER.downcallHandle(LOOKUP.findOrThrow(name), descriptor);
    }

    private static MethodHandle getter(String name) {
        return handle(name, FunctionDescriptor.of(JAVA_LONG));
    }

    /** Opens device 0 of the fake driver (the library path is explicit, whatever the property says). */
    public static CudaDevice open() {
        return CudaDevice.open(LIBRARY.toString(), 0);
    }

    /** Resets the fake to its defaults and sets its total memory; every earlier device becomes invalid. */
    public static void reset(long totalBytes) {
        reset();
        setTotal(totalBytes);
    }

    public static void reset() {
        invoke(RESET);
    }

    public static void setTotal(long bytes) {
        invoke(SET_TOTAL, bytes);
    }

    public static void setHeldOutside(long bytes) {
        invoke(SET_HELD_OUTSIDE, bytes);
    }

    public static void setGranularity(long bytes) {
        invoke(SET_GRANULARITY, bytes);
    }

    /** What the driver recommends (CU_MEM_ALLOC_GRANULARITY_RECOMMENDED); 0: the minimum, as after a reset. */
    public static void setRecommendedGranularity(long bytes) {
        invoke(SET_RECOMMENDED_GRANULARITY, bytes);
    }

    public static void setVirtualMemorySupported(boolean supported) {
        invoke(SET_VMM, supported ? 1 : 0);
    }

    public static void holdEvents(boolean hold) {
        invoke(HOLD_EVENTS, hold ? 1 : 0);
    }

    public static void completeAll() {
        invoke(COMPLETE_ALL);
    }

    /** Makes the {@code nth} next call of {@code function} (its exported name) return {@code result}. */
    public static void failNth(String function, long nth, int result) {
        try (Arena arena = Arena.ofConfined()) {
            int rc = (int) FAIL_NTH.invokeExact(arena.allocateFrom(function), nth, result);
            if (rc != 0) {
                throw new IllegalArgumentException("fakecuda_fail_nth rejected " + function + " " + nth);
            }
        } catch (Throwable t) {
            throw propagate(t);
        }
    }

    /** Makes every call of {@code function} (its exported name) sleep {@code micros} first; 0 turns it off. */
    public static void delay(String function, int micros) {
        try (Arena arena = Arena.ofConfined()) {
            int rc = (int) DELAY.invokeExact(arena.allocateFrom(function), micros);
            if (rc != 0) {
                throw new IllegalArgumentException("fakecuda_delay rejected " + function);
            }
        } catch (Throwable t) {
            throw propagate(t);
        }
    }

    /** Calls of the exported driver function {@code function} since the last reset. */
    public static long calls(String function) {
        try (Arena arena = Arena.ofConfined()) {
            return (long) CALL_COUNT.invokeExact(arena.allocateFrom(function));
        } catch (Throwable t) {
            throw propagate(t);
        }
    }

    /** Completes the work recorded so far on {@code stream}. */
    public static void completeStream(long stream) {
        try {
            int rc = (int) COMPLETE_STREAM.invokeExact(stream);
            if (rc != 0) {
                throw new IllegalArgumentException("unknown stream " + stream);
            }
        } catch (Throwable t) {
            throw propagate(t);
        }
    }

    public static long classicBytes() {
        return get(CLASSIC_BYTES);
    }

    public static long physicalBytes() {
        return get(PHYSICAL_BYTES);
    }

    public static long liveHandles() {
        return get(LIVE_HANDLES);
    }

    public static long liveMappings() {
        return get(LIVE_MAPPINGS);
    }

    public static long liveReservations() {
        return get(LIVE_RESERVATIONS);
    }

    public static long liveAllocations() {
        return get(LIVE_ALLOCATIONS);
    }

    public static long hostBytes() {
        return get(HOST_BYTES);
    }

    private static long get(MethodHandle getter) {
        try {
            return (long) getter.invokeExact();
        } catch (Throwable t) {
            throw propagate(t);
        }
    }

    private static void invoke(MethodHandle h) {
        try {
            h.invokeExact();
        } catch (Throwable t) {
            throw propagate(t);
        }
    }

    private static void invoke(MethodHandle h, long v) {
        try {
            h.invokeExact(v);
        } catch (Throwable t) {
            throw propagate(t);
        }
    }

    private static void invoke(MethodHandle h, int v) {
        try {
            h.invokeExact(v);
        } catch (Throwable t) {
            throw propagate(t);
        }
    }

    private static RuntimeException propagate(Throwable t) {
        return t instanceof RuntimeException r ? r : new IllegalStateException(t);
    }
}
