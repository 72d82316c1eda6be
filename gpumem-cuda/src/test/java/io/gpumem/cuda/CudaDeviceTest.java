package io.gpumem.cuda;

import static io.gpumem.testing.TestSizes.GiB;
import static io.gpumem.testing.TestSizes.MiB;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.cuda.driver.CudaUnavailableException;
import io.gpumem.cuda.fake.FakeCuda;
import io.gpumem.device.Device;
import io.gpumem.device.DeviceError;
import io.gpumem.device.DeviceException;
import io.gpumem.device.DeviceOp;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.stream.IntStream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** {@link CudaDevice} over the fake driver: the mapping of each Device operation to the driver and back. */
class CudaDeviceTest {
    private static final long PAGE = 2 * MiB;

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

    @Test
    void reportsIdentityMemoryAndCapabilities() {
        assertThat(device.name()).isEqualTo("gpumem fake CUDA device");
        assertThat(device.index()).isZero();
        assertThat(device.totalMemory()).isEqualTo(GiB);
        assertThat(device.freeMemory()).isEqualTo(GiB);
        assertThat(device.supportsVirtualMemory()).isTrue();
        assertThat(device.allocationGranularity()).isEqualTo(PAGE);
        assertThat(device.driverVersion()).isEqualTo(13000);
        assertThat(FakeCuda.calls("cuDevicePrimaryCtxRetain")).isEqualTo(1);
    }

    @Test
    void propertyNamesTheLibraryTheBuildCompiled() {
        // The build passes the fake through gpumem.cuda.library, so CudaDevice.open() with no argument finds it.
        assertThat(CudaDevice.configuredLibrary()).isEqualTo(FakeCuda.LIBRARY.toString());
        try (CudaDevice viaProperty = CudaDevice.open()) {
            assertThat(viaProperty.library()).isEqualTo(FakeCuda.LIBRARY.toString());
        }
    }

    @Test
    void mallocUsesTheVersionedExportAndFreeMemoryMoves() {
        long a = device.malloc(100 * MiB);
        assertThat(a).isNotZero();
        assertThat(device.freeMemory()).isEqualTo(GiB - 100 * MiB);
        device.free(a);
        assertThat(device.freeMemory()).isEqualTo(GiB);
        assertThat(FakeCuda.calls("cuMemAlloc_v2")).isEqualTo(1);
        assertThat(FakeCuda.calls("cuMemFree_v2")).isEqualTo(1);
        assertThat(FakeCuda.calls("cuMemAlloc")).isZero();
        assertThat(device.callCount(DeviceOp.MALLOC)).isEqualTo(1);
        assertThat(device.callCount(DeviceOp.FREE)).isEqualTo(1);
        assertThat(device.callCount(DeviceOp.MEM_GET_INFO)).isEqualTo(2);
    }

    @Test
    void outOfMemoryIsNullNotAnException() {
        FakeCuda.setHeldOutside(GiB - 10 * MiB);
        assertThat(device.malloc(11 * MiB)).isEqualTo(Device.NULL);
        assertThat(device.createPhysical(12 * MiB)).isEqualTo(Device.NULL);
        long a = device.malloc(10 * MiB);
        assertThat(a).isNotZero();
        assertThat(device.freeMemory()).isZero();
        assertThat(device.callCount(DeviceOp.MALLOC)).isEqualTo(2);
        assertThat(device.callCount(DeviceOp.CREATE_PHYSICAL)).isEqualTo(1);
    }

    @Test
    void badFreeThrowsWithTheDriversErrorName() {
        long a = device.malloc(MiB);
        assertThatThrownBy(() -> device.free(a + 64))
                .isInstanceOfSatisfying(DeviceException.class, e -> {
                    assertThat(e.op()).isEqualTo(DeviceOp.FREE);
                    assertThat(e.error()).isEqualTo(DeviceError.CUDA_ERROR_INVALID_VALUE);
                })
                .hasMessageContaining("cuMemFree_v2")
                .hasMessageContaining("CUDA_ERROR_INVALID_VALUE");
        device.free(a);
        assertThatThrownBy(() -> device.free(a)).isInstanceOf(DeviceException.class); // double free
        assertThatThrownBy(() -> device.free(Device.NULL)).isInstanceOf(DeviceException.class);
        assertThatThrownBy(() -> device.malloc(0)).isInstanceOf(DeviceException.class);
        assertThat(device.callCount(DeviceOp.FREE)).isEqualTo(4);
    }

    @Test
    void injectedDriverErrorsSurfaceAsDeviceExceptions() {
        FakeCuda.failNth("cuMemAlloc_v2", 2, FakeCuda.UNKNOWN);
        long a = device.malloc(MiB);
        assertThatThrownBy(() -> device.malloc(MiB))
                .isInstanceOfSatisfying(
                        DeviceException.class, e -> assertThat(e.error()).isEqualTo(DeviceError.CUDA_ERROR_UNKNOWN))
                .hasMessageContaining("CUDA_ERROR_UNKNOWN (999)");
        long b = device.malloc(MiB); // the fault was one-shot
        assertThat(b).isNotEqualTo(a).isNotZero();
        assertThat(FakeCuda.liveAllocations()).isEqualTo(2);
    }

    @Test
    @SuppressWarnings("restricted")
    void bytesWrittenThroughAMappedPageReadBack() {
        long base = device.reserveAddressRange(4 * PAGE);
        long h0 = device.createPhysical(PAGE);
        long h1 = device.createPhysical(PAGE);
        device.map(base, PAGE, h0);
        device.map(base + PAGE, PAGE, h1);
        device.setAccess(base, 2 * PAGE);
        assertThat(device.freeMemory()).isEqualTo(GiB - 2 * PAGE);

        long seed = System.nanoTime();
        System.out.println("seed=" + seed);
        byte[] data = new byte[(int) (PAGE + MiB)]; // straddles the two pages
        new Random(seed).nextBytes(data);
        device.copyToDevice(base + MiB, MemorySegment.ofArray(data), data.length);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment back = arena.allocate(data.length);
            device.copyToHost(back, base + MiB, data.length);
            assertThat(back.toArray(JAVA_BYTE)).isEqualTo(data);
            // Device-to-device moves the bytes too.
            device.copyDeviceToDevice(base, base + MiB, MiB);
            MemorySegment first = arena.allocate(MiB);
            device.copyToHost(first, base, MiB);
            assertThat(first.toArray(JAVA_BYTE)).isEqualTo(Arrays.copyOf(data, (int) MiB));
        }
        // The device address is host memory in the fake: the bytes are really there.
        MemorySegment direct = MemorySegment.ofAddress(base + MiB).reinterpret(8);
        assertThat(direct.get(JAVA_BYTE, 0)).isEqualTo(data[0]);

        device.unmap(base, PAGE);
        device.unmap(base + PAGE, PAGE);
        device.releasePhysical(h0);
        device.releasePhysical(h1);
        device.freeAddressRange(base, 4 * PAGE);
        assertThat(device.freeMemory()).isEqualTo(GiB);
        assertThat(FakeCuda.liveHandles()).isZero();
        assertThat(FakeCuda.liveReservations()).isZero();
    }

    @Test
    void releasedHandlesKeepTheirPagesUntilUnmapped() {
        long base = device.reserveAddressRange(PAGE);
        long h = device.createPhysical(PAGE);
        device.map(base, PAGE, h);
        device.setAccess(base, PAGE);
        device.releasePhysical(h); // allowed right after mapping, as on a GPU
        assertThat(FakeCuda.physicalBytes()).isEqualTo(PAGE);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment v = arena.allocate(JAVA_LONG);
            v.set(JAVA_LONG, 0, 0x1234_5678_9abcL);
            device.copyToDevice(base, v, 8);
            v.set(JAVA_LONG, 0, 0);
            device.copyToHost(v, base, 8);
            assertThat(v.get(JAVA_LONG, 0)).isEqualTo(0x1234_5678_9abcL);
        }
        device.unmap(base, PAGE);
        assertThat(FakeCuda.physicalBytes()).isZero();
        assertThatThrownBy(() -> device.releasePhysical(h)).isInstanceOf(DeviceException.class); // double release
        device.freeAddressRange(base, PAGE);
    }

    @Test
    void theDriversVirtualMemoryRulesAreEnforced() {
        long base = device.reserveAddressRange(4 * PAGE);
        long big = device.createPhysical(2 * PAGE);
        // Not a multiple of the granularity.
        assertThatThrownBy(() -> device.createPhysical(PAGE + 4096))
                .isInstanceOfSatisfying(
                        DeviceException.class,
                        e -> assertThat(e.error()).isEqualTo(DeviceError.CUDA_ERROR_INVALID_VALUE));
        assertThatThrownBy(() -> device.reserveAddressRange(PAGE + 1)).isInstanceOf(DeviceException.class);
        device.map(base, 2 * PAGE, big);
        // Copies before access is set are refused.
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment b = arena.allocate(16);
            assertThatThrownBy(() -> device.copyToDevice(base, b, 16)).isInstanceOf(DeviceException.class);
        }
        device.setAccess(base, 2 * PAGE);
        // Mapping over an existing mapping, or outside the reservation, is refused.
        long other = device.createPhysical(PAGE);
        assertThatThrownBy(() -> device.map(base + PAGE, PAGE, other))
                .isInstanceOfSatisfying(
                        DeviceException.class, e -> assertThat(e.op()).isEqualTo(DeviceOp.MAP))
                .hasMessageContaining("cuMemMap");
        assertThatThrownBy(() -> device.map(base + 4 * PAGE, PAGE, other)).isInstanceOf(DeviceException.class);
        // A sub-range of one mapping cannot be unmapped; the whole mapping can.
        assertThatThrownBy(() -> device.unmap(base, PAGE))
                .isInstanceOfSatisfying(
                        DeviceException.class, e -> assertThat(e.op()).isEqualTo(DeviceOp.UNMAP))
                .hasMessageContaining("cuMemUnmap");
        // The range cannot be freed while something is mapped in it.
        assertThatThrownBy(() -> device.freeAddressRange(base, 4 * PAGE)).isInstanceOf(DeviceException.class);
        device.unmap(base, 2 * PAGE);
        // Freeing with a size other than the reserved one is refused.
        assertThatThrownBy(() -> device.freeAddressRange(base, 2 * PAGE)).isInstanceOf(DeviceException.class);
        device.freeAddressRange(base, 4 * PAGE);
        device.releasePhysical(big);
        device.releasePhysical(other);
        assertThat(FakeCuda.liveHandles()).isZero();
        assertThat(FakeCuda.liveMappings()).isZero();
    }

    @Test
    void unmapCanCoverSeveralWholeMappingsAtOnce() {
        long base = device.reserveAddressRange(3 * PAGE);
        long[] h = new long[3];
        for (int i = 0; i < 3; i++) {
            h[i] = device.createPhysical(PAGE);
            device.map(base + i * PAGE, PAGE, h[i]);
            device.releasePhysical(h[i]);
        }
        device.setAccess(base, 3 * PAGE);
        device.unmap(base + PAGE, 2 * PAGE);
        assertThat(FakeCuda.liveMappings()).isEqualTo(1);
        assertThat(FakeCuda.physicalBytes()).isEqualTo(PAGE);
        device.unmap(base, PAGE);
        device.freeAddressRange(base, 3 * PAGE);
        assertThat(FakeCuda.physicalBytes()).isZero();
    }

    @Test
    void physicalMemoryIsFreedWhateverTheOrderOfUnmapAndRelease() {
        // Regression: releasing after unmapping, page by page in shuffled order, must free every page.
        long seed = System.nanoTime();
        System.out.println("seed=" + seed);
        Random random = new Random(seed);
        int pages = 12;
        long base = device.reserveAddressRange(pages * PAGE);
        long[] handles = new long[pages];
        for (int i = 0; i < pages; i++) {
            handles[i] = device.createPhysical(PAGE);
            device.map(base + i * PAGE, PAGE, handles[i]);
            device.setAccess(base + i * PAGE, PAGE);
        }
        assertThat(device.freeMemory()).isEqualTo(GiB - pages * PAGE);
        List<Integer> order = new ArrayList<>(IntStream.range(0, pages).boxed().toList());
        Collections.shuffle(order, random);
        for (int k = 0; k < pages; k++) {
            int i = order.get(k);
            if (random.nextBoolean()) {
                device.unmap(base + i * PAGE, PAGE);
                device.releasePhysical(handles[i]);
            } else {
                device.releasePhysical(handles[i]);
                device.unmap(base + i * PAGE, PAGE);
            }
            assertThat(device.freeMemory()).isEqualTo(GiB - (pages - k - 1) * PAGE);
        }
        device.freeAddressRange(base, pages * PAGE);
        assertThat(FakeCuda.liveHandles()).isZero();
        assertThat(FakeCuda.physicalBytes()).isZero();
    }

    @Test
    void theGranularityIsTheMinimumTheDriverRequiresNotTheOneItRecommends() {
        // cuMemCreate and cuMemMap need multiples of the minimum; a GPU may recommend more, and taking that would
        // have refused 2 MiB expandable-segment pages the driver accepts
        device.close();
        FakeCuda.reset(GiB);
        FakeCuda.setRecommendedGranularity(4 * MiB);
        device = FakeCuda.open();
        assertThat(device.allocationGranularity()).isEqualTo(PAGE);
        long h = device.createPhysical(PAGE);
        long va = device.reserveAddressRange(2 * PAGE);
        device.map(va + PAGE, PAGE, h); // a 2 MiB page at a 2 MiB offset: what the driver accepts
        device.setAccess(va + PAGE, PAGE);
        device.unmap(va + PAGE, PAGE);
        device.releasePhysical(h);
        device.freeAddressRange(va, 2 * PAGE);
    }

    @Test
    void withoutVirtualMemoryTheFamilyIsRefusedBeforeReachingTheDriver() {
        device.close();
        FakeCuda.reset(GiB);
        FakeCuda.setVirtualMemorySupported(false);
        device = FakeCuda.open();
        assertThat(device.supportsVirtualMemory()).isFalse();
        assertThat(device.allocationGranularity()).isEqualTo(PAGE);
        assertThatThrownBy(() -> device.reserveAddressRange(PAGE))
                .isInstanceOfSatisfying(
                        DeviceException.class,
                        e -> assertThat(e.error()).isEqualTo(DeviceError.CUDA_ERROR_NOT_SUPPORTED))
                .hasMessageContaining("attribute 102");
        assertThatThrownBy(() -> device.createPhysical(PAGE)).isInstanceOf(DeviceException.class);
        assertThat(FakeCuda.calls("cuMemAddressReserve")).isZero();
        assertThat(FakeCuda.calls("cuMemCreate")).isZero();
        assertThat(device.callCount(DeviceOp.RESERVE_ADDRESS)).isEqualTo(1);
        long a = device.malloc(PAGE); // classic allocation still works
        device.free(a);
    }

    @Test
    void virtualMemoryCanBeTurnedOffOnADeviceThatHasIt() {
        try (CudaDevice classic = CudaDevice.open(FakeCuda.LIBRARY.toString(), 0, false)) {
            assertThat(classic.supportsVirtualMemory()).isFalse();
        }
    }

    @Test
    void eventsCompleteWhenTheirStreamsWorkHas() {
        FakeCuda.holdEvents(true);
        long s = device.createStream();
        assertThat(s).isNotZero();
        long e = device.createEvent();
        assertThat(device.queryEvent(e)).isTrue(); // never recorded
        device.recordEvent(e, s);
        assertThat(device.queryEvent(e)).isFalse();
        FakeCuda.completeStream(s);
        assertThat(device.queryEvent(e)).isTrue();

        device.recordEvent(e, Device.DEFAULT_STREAM);
        assertThat(device.queryEvent(e)).isFalse();
        device.synchronizeEvent(e);
        assertThat(device.queryEvent(e)).isTrue();

        device.recordEvent(e, s);
        device.synchronizeStream(s);
        assertThat(device.queryEvent(e)).isTrue();
        device.recordEvent(e, s);
        device.synchronizeDevice();
        assertThat(device.queryEvent(e)).isTrue();

        device.destroyEvent(e);
        device.destroyStream(s);
        assertThatThrownBy(() -> device.queryEvent(e))
                .isInstanceOfSatisfying(
                        DeviceException.class,
                        ex -> assertThat(ex.error()).isEqualTo(DeviceError.CUDA_ERROR_INVALID_HANDLE));
        assertThatThrownBy(() -> device.destroyStream(Device.DEFAULT_STREAM)).isInstanceOf(DeviceException.class);
        assertThat(device.callCount(DeviceOp.QUERY_EVENT)).isEqualTo(8);
        assertThat(FakeCuda.calls("cuEventDestroy_v2")).isEqualTo(1);
        assertThat(FakeCuda.calls("cuStreamDestroy_v2")).isEqualTo(1);
    }

    @Test
    void handlesItDidNotCreateNeverReachTheDriver() {
        long madeUp = 0x55d1_2345_6780L; // a real driver would dereference this as a pointer
        assertThatThrownBy(() -> device.synchronizeStream(madeUp))
                .isInstanceOfSatisfying(
                        DeviceException.class,
                        e -> assertThat(e.error()).isEqualTo(DeviceError.CUDA_ERROR_INVALID_HANDLE))
                .hasMessageContaining("0x55d123456780");
        long event = device.createEvent();
        assertThatThrownBy(() -> device.recordEvent(event, madeUp)).isInstanceOf(DeviceException.class);
        assertThatThrownBy(() -> device.queryEvent(madeUp)).isInstanceOf(DeviceException.class);
        assertThatThrownBy(() -> device.destroyStream(madeUp)).isInstanceOf(DeviceException.class);
        assertThat(FakeCuda.calls("cuStreamSynchronize")).isZero();
        assertThat(FakeCuda.calls("cuEventRecord")).isZero();
        assertThat(FakeCuda.calls("cuEventQuery")).isZero();
        assertThat(FakeCuda.calls("cuStreamDestroy_v2")).isZero();

        // A stream made by someone else in the process can be registered and then used.
        long external;
        try (CudaDevice other = FakeCuda.open()) {
            external = other.createStream();
        }
        assertThatThrownBy(() -> device.recordEvent(event, external)).isInstanceOf(DeviceException.class);
        device.registerStream(external);
        device.recordEvent(event, external);
        assertThat(device.queryEvent(event)).isTrue();
        device.destroyStream(external);
        assertThatThrownBy(() -> device.synchronizeStream(external)).isInstanceOf(DeviceException.class);
        device.destroyEvent(event);
        assertThatThrownBy(() -> device.destroyEvent(event)).isInstanceOf(DeviceException.class);
        assertThat(FakeCuda.calls("cuEventDestroy_v2")).isEqualTo(1);
    }

    @Test
    void otherThreadsGetTheContextMadeCurrent() throws Exception {
        long fromOtherThread =
                CompletableFuture.supplyAsync(() -> device.malloc(MiB)).get();
        assertThat(fromOtherThread).isNotZero();
        device.free(fromOtherThread);
        assertThat(FakeCuda.calls("cuCtxSetCurrent")).isEqualTo(3); // open, this thread, the other thread
    }

    @Test
    void concurrentCallersEachGetTheirOwnResults() throws Exception {
        // Out-parameters live in per-thread scratch memory: results must never cross between threads.
        int threads = 4;
        int perThread = 300;
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        try {
            List<Future<long[]>> futures = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                long size = (t + 1) * 4096L;
                futures.add(pool.submit(() -> {
                    long[] addresses = new long[perThread];
                    for (int i = 0; i < perThread; i++) {
                        addresses[i] = device.malloc(size);
                        device.freeMemory();
                    }
                    return addresses;
                }));
            }
            Set<Long> seen = new HashSet<>();
            long expectedBytes = 0;
            for (int t = 0; t < threads; t++) {
                for (long a : futures.get(t).get()) {
                    assertThat(seen.add(a))
                            .as("address 0x%x handed out twice", a)
                            .isTrue();
                }
                expectedBytes += 4096L * perThread * (t + 1);
            }
            assertThat(FakeCuda.classicBytes()).isEqualTo(expectedBytes);
            assertThat(device.freeMemory()).isEqualTo(GiB - expectedBytes);
            List<Future<?>> frees = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                long[] mine = futures.get(t).get();
                frees.add(pool.submit(() -> {
                    for (long a : mine) {
                        device.free(a);
                    }
                }));
            }
            for (var f : frees) {
                f.get();
            }
        } finally {
            pool.shutdown();
        }
        assertThat(FakeCuda.liveAllocations()).isZero();
        assertThat(device.callCount(DeviceOp.MALLOC)).isEqualTo((long) threads * perThread);
        assertThat(device.callCount(DeviceOp.FREE)).isEqualTo((long) threads * perThread);
    }

    @Test
    void copiesAreBoundsChecked() {
        long a = device.malloc(MiB);
        byte[] small = new byte[16];
        assertThatThrownBy(() -> device.copyToDevice(a, MemorySegment.ofArray(small), 32))
                .isInstanceOf(DeviceException.class);
        // Past the end of the allocation: the driver refuses.
        assertThatThrownBy(() -> device.copyToDevice(a + MiB - 8, MemorySegment.ofArray(small), 16))
                .isInstanceOfSatisfying(
                        DeviceException.class, e -> assertThat(e.op()).isEqualTo(DeviceOp.COPY));
        device.free(a);
    }

    @Test
    void pinnedHostMemoryIsUsableAndFreed() {
        MemorySegment pinned = device.allocatePinnedHost(3 * MiB);
        assertThat(FakeCuda.hostBytes()).isEqualTo(3 * MiB);
        pinned.fill((byte) 7);
        long a = device.malloc(3 * MiB);
        device.copyToDevice(a, pinned, 3 * MiB);
        byte[] back = new byte[(int) (3 * MiB)];
        device.copyToHost(MemorySegment.ofArray(back), a, back.length);
        assertThat(back).containsOnly((byte) 7);
        MemorySegment slice = pinned.asSlice(MiB, 16);
        device.freePinnedHost(pinned);
        assertThat(FakeCuda.hostBytes()).isZero();
        // freed memory is no longer reachable through the segment or its slices (it was a use after free)
        assertThatThrownBy(() -> pinned.get(ValueLayout.JAVA_BYTE, 0)).isInstanceOf(IllegalStateException.class);
        assertThatThrownBy(() -> slice.fill((byte) 1)).isInstanceOf(IllegalStateException.class);
        assertThatThrownBy(() -> device.copyToDevice(a, pinned, MiB)).isInstanceOf(IllegalStateException.class);
        assertThatThrownBy(() -> device.freePinnedHost(pinned)).isInstanceOf(DeviceException.class);
        device.free(a);
    }

    @Test
    void aClosedDeviceRefusesEveryCallEvenWhileAnotherKeepsTheContextAlive() {
        long stream = device.createStream();
        try (CudaDevice other = FakeCuda.open()) { // retains the same primary context
            device.close();
            long allocs = FakeCuda.calls("cuMemAlloc_v2");
            List<Runnable> calls = List.of(
                    () -> device.malloc(MiB),
                    () -> device.free(other.malloc(MiB)),
                    device::freeMemory,
                    () -> device.reserveAddressRange(PAGE),
                    () -> device.synchronizeStream(stream),
                    () -> device.destroyStream(stream),
                    () -> device.allocatePinnedHost(MiB));
            for (Runnable call : calls) {
                assertThatThrownBy(call::run)
                        .isInstanceOfSatisfying(
                                DeviceException.class,
                                e -> assertThat(e.error()).isEqualTo(DeviceError.CUDA_ERROR_INVALID_CONTEXT))
                        .hasMessageContaining("was closed");
            }
            assertThat(FakeCuda.calls("cuMemAlloc_v2") - allocs)
                    .as("only the other device's allocation reached the driver")
                    .isEqualTo(1);
            assertThat(FakeCuda.calls("cuStreamDestroy_v2")).isZero();
            assertThat(FakeCuda.calls("cuMemAddressReserve")).isZero();
            assertThat(FakeCuda.liveAllocations()).isEqualTo(1); // the other's, which the refused free left alone
            assertThat(device.callCount(DeviceOp.MALLOC)).isEqualTo(1); // a refused call still counts
        }
    }

    /**
     * Two threads destroying the same stream (or event) at once: one destroy reaches the driver, the other is refused
     * before it, as any handle already destroyed is; the driver never sees a handle twice.
     */
    @Test
    void aHandleDestroyedByTwoThreadsAtOnceReachesTheDriverOnce() throws Exception {
        int rounds = 40;
        java.util.concurrent.CyclicBarrier barrier = new java.util.concurrent.CyclicBarrier(2);
        ExecutorService pool = Executors.newFixedThreadPool(2);
        try {
            for (boolean stream : new boolean[] {true, false}) {
                String destroy = stream ? "cuStreamDestroy_v2" : "cuEventDestroy_v2";
                FakeCuda.delay(destroy, 3000); // the first destroy is still in the driver when the second arrives
                long before = FakeCuda.calls(destroy);
                int refused = 0;
                for (int r = 0; r < rounds; r++) {
                    long handle = stream ? device.createStream() : device.createEvent();
                    Runnable call = stream ? () -> device.destroyStream(handle) : () -> device.destroyEvent(handle);
                    List<Future<?>> both = new ArrayList<>();
                    for (int t = 0; t < 2; t++) {
                        both.add(pool.submit(() -> {
                            barrier.await();
                            call.run();
                            return null;
                        }));
                    }
                    for (Future<?> f : both) {
                        try {
                            f.get();
                        } catch (java.util.concurrent.ExecutionException e) {
                            assertThat(e.getCause())
                                    .isInstanceOfSatisfying(
                                            DeviceException.class,
                                            d -> assertThat(d.error()).isEqualTo(DeviceError.CUDA_ERROR_INVALID_HANDLE))
                                    .hasMessageContaining("was not created by this device");
                            refused++;
                        }
                    }
                }
                assertThat(refused).as("second destroys refused").isEqualTo(rounds);
                assertThat(FakeCuda.calls(destroy) - before)
                        .as("%s calls for %d handles", destroy, rounds)
                        .isEqualTo(rounds);
            }
        } finally {
            pool.shutdownNow();
        }
    }

    @Test
    void aMissingDriverIsReportedClearly() {
        assertThatThrownBy(() -> CudaDevice.open("/no/such/dir/libcuda.so.1", 0))
                .isInstanceOf(CudaUnavailableException.class)
                .hasMessageContaining("/no/such/dir/libcuda.so.1");
        assertThatThrownBy(() -> CudaDevice.open(FakeCuda.LIBRARY.toString(), 1))
                .isInstanceOf(CudaUnavailableException.class)
                .hasMessageContaining("no CUDA device 1");
    }

    @Test
    void aFailingInitIsReportedWithTheDriversErrorName() {
        FakeCuda.failNth("cuInit", 1, 100);
        assertThatThrownBy(FakeCuda::open)
                .isInstanceOf(CudaUnavailableException.class)
                .hasMessageContaining("cuInit")
                .hasMessageContaining("CUDA_ERROR_NO_DEVICE");
    }
}
