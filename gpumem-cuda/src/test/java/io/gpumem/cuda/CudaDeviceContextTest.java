package io.gpumem.cuda;

import static io.gpumem.testing.TestSizes.GiB;
import static io.gpumem.testing.TestSizes.MiB;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpumem.cuda.driver.CudaDriver;
import io.gpumem.cuda.fake.FakeCuda;
import io.gpumem.device.DeviceException;
import io.gpumem.device.DeviceOp;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Which context a call runs in: its own device's, even right after a call on another GPU's device on the same thread
 * (the device only remembered that it had bound its context once, and ran in the other GPU's); and a failure to bind
 * it names the operation that asked.
 */
class CudaDeviceContextTest {

    @Test
    void aFailedContextBindFailsTheOperationThatAsked() throws Exception {
        FakeCuda.reset(GiB);
        try (CudaDevice device = FakeCuda.open()) {
            AtomicReference<Throwable> thrown = new AtomicReference<>();
            Thread fresh = new Thread(
                    () -> { // a thread that has no context current yet
                        FakeCuda.failNth("cuCtxSetCurrent", 1, FakeCuda.UNKNOWN);
                        try {
                            device.malloc(MiB);
                        } catch (Throwable e) {
                            thrown.set(e);
                        }
                    });
            fresh.start();
            fresh.join();
            assertThat(thrown.get()).isInstanceOf(DeviceException.class);
            assertThat(((DeviceException) thrown.get()).op())
                    .as(thrown.get().getMessage())
                    .isEqualTo(DeviceOp.MALLOC);
            assertThat(thrown.get().getMessage()).contains("cuCtxSetCurrent");
        }
    }

    /** The fake driver built with two devices (a copy of its source with DEVICE_COUNT 2), as a multi-GPU machine. */
    @Test
    void aCallRunsInItsOwnDevicesContextAfterACallOnAnotherGpu(@TempDir Path dir) throws Exception {
        String library = twoDeviceFake(dir);
        CudaDriver driver = CudaDriver.load(library);
        try (Arena arena = Arena.ofConfined();
                CudaDevice gpu0 = CudaDevice.open(library, 0);
                CudaDevice gpu1 = CudaDevice.open(library, 1)) {
            MemorySegment out = arena.allocate(JAVA_LONG);
            gpu0.freeMemory();
            assertThat(driver.ctxGetCurrent(out)).isZero();
            long gpu0Context = out.get(JAVA_LONG, 0);
            gpu1.freeMemory();
            assertThat(driver.ctxGetCurrent(out)).isZero();
            long gpu1Context = out.get(JAVA_LONG, 0);
            assertThat(gpu1Context).isNotEqualTo(gpu0Context);
            gpu0.freeMemory();
            assertThat(driver.ctxGetCurrent(out)).isZero();
            assertThat(out.get(JAVA_LONG, 0))
                    .as("the context current after a call on gpu0")
                    .isEqualTo(gpu0Context);
        }
    }

    /**
     * Opening a device makes its context current on the opening thread; a device already in use on that thread must
     * bind its own again on its next call, not run in the new GPU's context.
     */
    @Test
    void aCallRunsInItsOwnDevicesContextAfterAnotherGpuWasOpenedOnTheThread(@TempDir Path dir) throws Exception {
        String library = twoDeviceFake(dir);
        CudaDriver driver = CudaDriver.load(library);
        try (Arena arena = Arena.ofConfined();
                CudaDevice gpu0 = CudaDevice.open(library, 0)) {
            MemorySegment out = arena.allocate(JAVA_LONG);
            gpu0.freeMemory();
            assertThat(driver.ctxGetCurrent(out)).isZero();
            long gpu0Context = out.get(JAVA_LONG, 0);
            try (CudaDevice gpu1 = CudaDevice.open(library, 1)) {
                assertThat(driver.ctxGetCurrent(out)).isZero();
                assertThat(out.get(JAVA_LONG, 0))
                        .as("opening gpu1 made its context current")
                        .isNotEqualTo(gpu0Context);
                gpu0.freeMemory();
                assertThat(driver.ctxGetCurrent(out)).isZero();
                assertThat(out.get(JAVA_LONG, 0))
                        .as("the context current after a call on gpu0")
                        .isEqualTo(gpu0Context);
                assertThat(gpu1.totalMemory()).isPositive();
            }
        }
    }

    /**
     * Virtual threads: the driver's current context belongs to the carrier (an OS thread), which a virtual thread may
     * change each time it parks. A call on gpu0 must run in gpu0's context whichever carrier it resumed on, even one
     * where a call on gpu1 from another virtual thread just made gpu1's context current.
     */
    @Test
    void aVirtualThreadsCallRunsInItsOwnDevicesContextWhateverCarrierItResumesOn(@TempDir Path dir) throws Exception {
        String library = twoDeviceFake(dir);
        CudaDriver driver = CudaDriver.load(library);
        try (CudaDevice gpu0 = CudaDevice.open(library, 0);
                CudaDevice gpu1 = CudaDevice.open(library, 1)) {
            long gpu0Context = contextOfACallOn(driver, gpu0);
            int rounds = 60;
            int wrong = 0;
            for (int r = 0; r < rounds; r++) {
                CountDownLatch otherCalled = new CountDownLatch(1);
                AtomicLong seen = new AtomicLong();
                Thread v = Thread.ofVirtual().start(() -> {
                    gpu0.freeMemory();
                    try {
                        otherCalled.await(); // parks: the thread may resume on another carrier
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                    seen.set(contextOfACallOn(driver, gpu0));
                });
                Thread w = Thread.ofVirtual().start(gpu1::freeMemory);
                w.join();
                otherCalled.countDown();
                v.join();
                if (seen.get() != gpu0Context) {
                    wrong++;
                }
            }
            assertThat(wrong)
                    .as("calls on gpu0 that ran in another context, of %d", rounds)
                    .isZero();
        }
    }

    /** Makes a call on {@code device} and returns the context current right after it, on the same carrier. */
    private static long contextOfACallOn(CudaDriver driver, CudaDevice device) {
        device.freeMemory();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(JAVA_LONG);
            assertThat(driver.ctxGetCurrent(out)).isZero();
            return out.get(JAVA_LONG, 0);
        }
    }

    /** Builds the fake with two devices into {@code dir} (each test its own copy: dlopen caches by path). */
    private static String twoDeviceFake(Path dir) throws Exception {
        Path source = Path.of("src/test/c/fakecuda.c");
        assumeTrue(Files.exists(source), "the fake driver's source is not here (run from gpumem-cuda)");
        Path copy = dir.resolve("fakecuda2.c");
        Path library = dir.resolve("libfakecuda2.so");
        String text = Files.readString(source);
        assertThat(text).contains("#define DEVICE_COUNT 1");
        Files.writeString(copy, text.replace("#define DEVICE_COUNT 1", "#define DEVICE_COUNT 2"));
        Process gcc = new ProcessBuilder(
                        "gcc", "-shared", "-fPIC", "-O2", "-o", library.toString(), copy.toString(), "-lpthread")
                .inheritIO()
                .start();
        assertThat(gcc.waitFor()).as("gcc builds the two-device fake").isZero();
        return library.toString();
    }
}
