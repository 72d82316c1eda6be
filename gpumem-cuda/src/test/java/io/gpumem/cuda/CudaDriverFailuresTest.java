package io.gpumem.cuda;

import static io.gpumem.testing.TestSizes.GiB;
import static io.gpumem.testing.TestSizes.MiB;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.cuda.driver.CudaUnavailableException;
import io.gpumem.cuda.fake.FakeCuda;
import io.gpumem.device.DeviceError;
import io.gpumem.device.DeviceException;
import io.gpumem.device.DeviceOp;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.SplittableRandom;
import java.util.function.BiConsumer;
import java.util.function.Function;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Every driver call {@link CudaDevice} makes, failed by the fake driver: the failure reaches the caller as a
 * {@link DeviceException} of the operation, naming the driver function and its error, and the device goes on working
 * (a failed destroy keeps its handle). Opening a device fails as {@link CudaUnavailableException} naming the call,
 * and gives back the primary context it had retained. Beside them, the checks the device makes before the driver
 * sees a call, each at its bound, and the chunked copy of a heap segment. The mutation run over this module found
 * each of these paths unchecked: a removed check or a driver result replaced by success went unnoticed.
 */
class CudaDriverFailuresTest {

    private CudaDevice device;

    @BeforeEach
    void openFreshFake() {
        FakeCuda.reset(GiB);
        device = FakeCuda.open();
    }

    @AfterEach
    void close() {
        device.close();
    }

    /**
     * A Device operation that calls driver function {@code function}: {@code setUp} makes what it needs (a stream, an
     * event, two allocations) and returns their handles, {@code call} runs it on them.
     */
    record Call(String function, DeviceOp op, Function<CudaDevice, long[]> setUp, BiConsumer<CudaDevice, long[]> call) {
        @Override
        public String toString() {
            return function;
        }
    }

    static Stream<Call> operations() {
        Function<CudaDevice, long[]> nothing = d -> new long[0];
        Function<CudaDevice, long[]> stream = d -> new long[] {d.createStream()};
        Function<CudaDevice, long[]> event = d -> new long[] {d.createEvent()};
        Function<CudaDevice, long[]> two = d -> new long[] {d.malloc(MiB), d.malloc(MiB)};
        Function<CudaDevice, long[]> mapped = d -> {
            long page = d.allocationGranularity();
            long address = d.reserveAddressRange(page);
            d.map(address, page, d.createPhysical(page));
            return new long[] {address, page};
        };
        return Stream.of(
                new Call("cuMemGetInfo_v2", DeviceOp.MEM_GET_INFO, nothing, (d, h) -> d.freeMemory()),
                new Call("cuStreamCreate", DeviceOp.CREATE_STREAM, nothing, (d, h) -> d.createStream()),
                new Call(
                        "cuStreamSynchronize",
                        DeviceOp.SYNCHRONIZE_STREAM,
                        stream,
                        (d, h) -> d.synchronizeStream(h[0])),
                new Call("cuStreamDestroy_v2", DeviceOp.DESTROY_STREAM, stream, (d, h) -> d.destroyStream(h[0])),
                new Call("cuCtxSynchronize", DeviceOp.SYNCHRONIZE_DEVICE, nothing, (d, h) -> d.synchronizeDevice()),
                new Call("cuEventCreate", DeviceOp.CREATE_EVENT, nothing, (d, h) -> d.createEvent()),
                new Call("cuEventRecord", DeviceOp.RECORD_EVENT, event, (d, h) -> d.recordEvent(h[0], 0)),
                new Call("cuEventQuery", DeviceOp.QUERY_EVENT, event, (d, h) -> d.queryEvent(h[0])),
                new Call("cuEventSynchronize", DeviceOp.SYNCHRONIZE_EVENT, event, (d, h) -> d.synchronizeEvent(h[0])),
                new Call("cuEventDestroy_v2", DeviceOp.DESTROY_EVENT, event, (d, h) -> d.destroyEvent(h[0])),
                new Call("cuMemSetAccess", DeviceOp.SET_ACCESS, mapped, (d, h) -> d.setAccess(h[0], h[1])),
                new Call("cuMemcpyDtoD_v2", DeviceOp.COPY, two, (d, h) -> d.copyDeviceToDevice(h[1], h[0], MiB)),
                new Call("cuMemcpyDtoH_v2", DeviceOp.COPY, two, (d, h) -> {
                    try (Arena arena = Arena.ofConfined()) {
                        d.copyToHost(arena.allocate(MiB), h[0], MiB);
                    }
                }),
                new Call("cuMemcpyHtoD_v2", DeviceOp.COPY, two, (d, h) -> {
                    try (Arena arena = Arena.ofConfined()) {
                        d.copyToDevice(h[0], arena.allocate(MiB), MiB);
                    }
                }),
                // a heap segment is staged through the thread's native buffer: the same driver call, checked alike
                new Call(
                        "cuMemcpyDtoH_v2",
                        DeviceOp.COPY,
                        two,
                        (d, h) -> d.copyToHost(MemorySegment.ofArray(new byte[4096]), h[0], 4096)));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("operations")
    void aFailedDriverCallIsTheOperationsDeviceExceptionAndTheDeviceGoesOn(Call c) {
        long[] handles = c.setUp().apply(device);
        FakeCuda.failNth(c.function(), 1, FakeCuda.UNKNOWN);
        long before = FakeCuda.calls(c.function());
        assertThatThrownBy(() -> c.call().accept(device, handles))
                .isInstanceOfSatisfying(DeviceException.class, e -> {
                    assertThat(e.op()).isEqualTo(c.op());
                    assertThat(e.error()).isEqualTo(DeviceError.CUDA_ERROR_UNKNOWN);
                })
                .hasMessageContaining(c.function())
                .hasMessageContaining("CUDA_ERROR_UNKNOWN (999)");
        assertThat(FakeCuda.calls(c.function())).isEqualTo(before + 1);
        // the fault was one-shot and left nothing half done: the same call now succeeds
        c.call().accept(device, handles);
    }

    /** A failure message shows the call as it was made: its real arguments, sizes in bytes, addresses in hex. */
    @Test
    void aFailureShowsTheCallWithItsOwnArguments() {
        long a = device.malloc(MiB);
        long b = device.malloc(MiB);
        FakeCuda.failNth("cuMemAlloc_v2", 1, FakeCuda.UNKNOWN);
        assertThatThrownBy(() -> device.malloc(MiB))
                .hasMessageEndingWith("cuMemAlloc_v2(" + MiB + " bytes) returned CUDA_ERROR_UNKNOWN (999)");
        FakeCuda.failNth("cuMemFree_v2", 1, FakeCuda.UNKNOWN);
        assertThatThrownBy(() -> device.free(a))
                .hasMessageEndingWith("cuMemFree_v2(0x" + Long.toHexString(a) + ") returned CUDA_ERROR_UNKNOWN (999)");
        FakeCuda.failNth("cuCtxSynchronize", 1, FakeCuda.UNKNOWN);
        assertThatThrownBy(device::synchronizeDevice)
                .hasMessageEndingWith("cuCtxSynchronize() returned CUDA_ERROR_UNKNOWN (999)");
        FakeCuda.failNth("cuMemcpyDtoD_v2", 1, FakeCuda.UNKNOWN);
        assertThatThrownBy(() -> device.copyDeviceToDevice(b, a, MiB))
                .hasMessageEndingWith("cuMemcpyDtoD_v2(0x" + Long.toHexString(b) + ", 0x" + Long.toHexString(a) + ", "
                        + MiB + " bytes) returned CUDA_ERROR_UNKNOWN (999)");
        device.free(a);
        device.free(b);
    }

    @Test
    void aFailedDestroyKeepsItsHandleSoTheStreamStaysUsable() {
        long stream = device.createStream();
        FakeCuda.failNth("cuStreamDestroy_v2", 1, FakeCuda.INVALID_VALUE);
        assertThatThrownBy(() -> device.destroyStream(stream)).isInstanceOf(DeviceException.class);
        device.synchronizeStream(stream); // still known to the device
        device.destroyStream(stream);
        assertThatThrownBy(() -> device.synchronizeStream(stream))
                .isInstanceOfSatisfying(
                        DeviceException.class,
                        e -> assertThat(e.error()).isEqualTo(DeviceError.CUDA_ERROR_INVALID_HANDLE));
    }

    @Test
    void pinnedHostMemoryFailuresNameTheirCall() {
        FakeCuda.failNth("cuMemHostAlloc", 1, FakeCuda.OUT_OF_MEMORY);
        assertThatThrownBy(() -> device.allocatePinnedHost(MiB))
                .isInstanceOfSatisfying(
                        DeviceException.class, e -> assertThat(e.op()).isEqualTo(DeviceOp.MALLOC))
                .hasMessageContaining("cuMemHostAlloc(" + MiB + ")");
        MemorySegment pinned = device.allocatePinnedHost(MiB);
        assertThat(pinned.byteSize()).isEqualTo(MiB);
        FakeCuda.failNth("cuMemFreeHost", 1, FakeCuda.INVALID_VALUE);
        assertThatThrownBy(() -> device.freePinnedHost(pinned))
                .isInstanceOfSatisfying(
                        DeviceException.class, e -> assertThat(e.op()).isEqualTo(DeviceOp.FREE))
                .hasMessageContaining("cuMemFreeHost(0x");
        device.freePinnedHost(pinned);
        assertThat(FakeCuda.hostBytes()).isZero();
    }

    /** The checks CudaDevice makes before calling the driver, each at its boundary. */
    @Test
    void argumentsAreCheckedAtTheirBoundsBeforeTheDriverSeesThem() {
        assertThatThrownBy(() -> device.malloc(0))
                .isInstanceOfSatisfying(
                        DeviceException.class,
                        e -> assertThat(e.error()).isEqualTo(DeviceError.CUDA_ERROR_INVALID_VALUE));
        long one = device.malloc(1);
        long other = device.malloc(MiB);
        device.copyDeviceToDevice(other, one, 0); // nothing to copy is a copy
        assertThatThrownBy(() -> device.copyDeviceToDevice(other, one, -1)).isInstanceOf(DeviceException.class);
        byte[] bytes = new byte[4096];
        device.copyToHost(MemorySegment.ofArray(bytes), other, 0); // nothing to copy is a copy
        device.copyToHost(MemorySegment.ofArray(bytes), other, bytes.length); // the whole segment, and no more
        assertThatThrownBy(() -> device.copyToHost(MemorySegment.ofArray(bytes), other, bytes.length + 1))
                .isInstanceOf(DeviceException.class)
                .hasMessageContaining("host segment of 4096 bytes");
        assertThatThrownBy(() -> device.copyToHost(MemorySegment.ofArray(bytes).asReadOnly(), other, 16))
                .isInstanceOf(DeviceException.class)
                .hasMessageContaining("read-only");
        device.copyToDevice(other, MemorySegment.ofArray(bytes).asReadOnly(), 16); // a read-only source is fine
        assertThatThrownBy(() -> device.allocatePinnedHost(0)).isInstanceOf(IllegalArgumentException.class);
        device.freePinnedHost(device.allocatePinnedHost(1));
        assertThat(FakeCuda.calls("cuMemcpyDtoD_v2")).isEqualTo(1);
    }

    /**
     * A heap segment has no stable address, so a copy to or from one goes through the thread's native buffer of
     * 1 MiB a chunk at a time: a copy of two chunks and a part reads back byte for byte.
     */
    @Test
    void aHeapSegmentLargerThanTheBounceBufferRoundTripsByteForByte() {
        int n = (2 << 20) + 12_345;
        byte[] written = new byte[n];
        new SplittableRandom(7).nextBytes(written);
        long address = device.malloc(n);
        device.copyToDevice(address, MemorySegment.ofArray(written), n);
        byte[] read = new byte[n];
        device.copyToHost(MemorySegment.ofArray(read), address, n);
        assertThat(read).isEqualTo(written);
        assertThat(FakeCuda.calls("cuMemcpyHtoD_v2")).isEqualTo(3);
        assertThat(FakeCuda.calls("cuMemcpyDtoH_v2")).isEqualTo(3);
    }

    @Test
    void anOrdinalTheDriverDoesNotHaveIsRefusedWithTheDevicesItHas() {
        assertThatThrownBy(() -> CudaDevice.open(FakeCuda.LIBRARY.toString(), 1))
                .isInstanceOf(CudaUnavailableException.class)
                .hasMessage("no CUDA device 1: the driver reports 1 device(s), numbered 0 to 0");
        assertThatThrownBy(() -> CudaDevice.open(FakeCuda.LIBRARY.toString(), -1))
                .isInstanceOf(CudaUnavailableException.class)
                .hasMessageContaining("no CUDA device -1");
    }

    @Test
    void closingTwiceReleasesTheContextOnce() {
        long released = FakeCuda.calls("cuDevicePrimaryCtxRelease_v2");
        device.close();
        assertThat(FakeCuda.calls("cuDevicePrimaryCtxRelease_v2")).isEqualTo(released + 1);
        device.close();
        assertThat(FakeCuda.calls("cuDevicePrimaryCtxRelease_v2")).isEqualTo(released + 1);
    }

    @Test
    void aContextReleaseTheDriverRefusesAtCloseIsThrownAndTheDeviceIsClosedAllTheSame() {
        FakeCuda.failNth("cuDevicePrimaryCtxRelease_v2", 1, FakeCuda.UNKNOWN);
        assertThatThrownBy(device::close)
                .isInstanceOfSatisfying(DeviceException.class, e -> {
                    assertThat(e.op()).isEqualTo(DeviceOp.FREE);
                    assertThat(e.error()).isEqualTo(DeviceError.CUDA_ERROR_UNKNOWN);
                })
                .hasMessageContaining("cuDevicePrimaryCtxRelease_v2(device 0)")
                .hasMessageContaining("CUDA_ERROR_UNKNOWN (999)");
        long released = FakeCuda.calls("cuDevicePrimaryCtxRelease_v2");
        device.close(); // closed already: no second release, nothing thrown
        assertThat(FakeCuda.calls("cuDevicePrimaryCtxRelease_v2")).isEqualTo(released);
        assertThatThrownBy(device::freeMemory)
                .isInstanceOfSatisfying(
                        DeviceException.class,
                        e -> assertThat(e.error()).isEqualTo(DeviceError.CUDA_ERROR_INVALID_CONTEXT));
    }

    /**
     * The last release of the primary context destroys it with everything allocated in it, as the real driver does:
     * devices opened and closed in turn (sim --device cuda run many times in one JVM) never run out of memory,
     * however much each one left allocated.
     */
    @Test
    void theLastContextReleaseFreesWhatTheContextHeld() {
        device.close();
        FakeCuda.reset(64 * MiB);
        for (int i = 0; i < 8; i++) { // 8 x 40 MiB left allocated: five times the fake's 64 MiB
            try (CudaDevice d = FakeCuda.open()) {
                assertThat(d.malloc(40 * MiB)).as("device %d", i).isNotZero();
                long stream = d.createStream();
                d.recordEvent(d.createEvent(), stream);
                if (d.supportsVirtualMemory()) {
                    long range = d.reserveAddressRange(4 * MiB);
                    long page = d.createPhysical(2 * MiB);
                    d.map(range, 2 * MiB, page);
                }
            }
            assertThat(FakeCuda.classicBytes()).isZero();
            assertThat(FakeCuda.physicalBytes()).isZero();
            assertThat(FakeCuda.liveReservations()).isZero();
            assertThat(FakeCuda.liveMappings()).isZero();
        }
        // a context another device still holds keeps its memory
        device = FakeCuda.open();
        try (CudaDevice other = FakeCuda.open()) {
            assertThat(other.malloc(8 * MiB)).isNotZero();
        }
        assertThat(FakeCuda.classicBytes()).isEqualTo(8 * MiB);
    }

    static Stream<String> openingCalls() {
        return Stream.of(
                "cuInit",
                "cuDeviceGetCount",
                "cuDeviceGet",
                "cuDriverGetVersion",
                "cuDeviceGetName",
                "cuDeviceTotalMem_v2",
                "cuDeviceGetAttribute",
                "cuDevicePrimaryCtxRetain",
                "cuCtxSetCurrent",
                "cuMemGetAllocationGranularity");
    }

    /**
     * Opening fails at whichever call the driver refuses, naming it; a failure once the primary context is retained
     * releases it (the fake counts retains and releases).
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("openingCalls")
    void openingFailsAtTheCallTheDriverRefusesAndReleasesWhatItRetained(String function) {
        device.close();
        FakeCuda.reset(GiB);
        FakeCuda.failNth(function, 1, FakeCuda.UNKNOWN);
        assertThatThrownBy(FakeCuda::open)
                .isInstanceOf(CudaUnavailableException.class)
                .hasMessageContaining(function)
                .hasMessageContaining("CUDA_ERROR_UNKNOWN (999)");
        assertThat(FakeCuda.calls("cuDevicePrimaryCtxRelease_v2"))
                .as("contexts released after a failed open at %s", function)
                .isEqualTo(FakeCuda.calls("cuDevicePrimaryCtxRetain")
                        - (function.equals("cuDevicePrimaryCtxRetain") ? 1 : 0));
        device = FakeCuda.open(); // the fault was one-shot
        assertThat(device.totalMemory()).isEqualTo(GiB);
    }
}
