package io.gpumem.cuda.check;

import static io.gpumem.testing.TestSizes.MiB;
import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.cuda.CudaDevice;
import io.gpumem.cuda.fake.FakeCuda;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/** The GPU check end to end on the fake driver: every section runs, and on the fake the numbers agree exactly. */
class GpuCheckTest {

    private static String run(boolean virtualMemory, long[] passed) {
        FakeCuda.reset(4L << 30);
        FakeCuda.setVirtualMemorySupported(virtualMemory);
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (CudaDevice device = FakeCuda.open();
                PrintStream out = new PrintStream(bytes, true, StandardCharsets.UTF_8)) {
            passed[0] = new GpuCheck(device, out, 512 * MiB, 42).run() ? 1 : 0;
        }
        return bytes.toString(StandardCharsets.UTF_8);
    }

    @Test
    void everySectionRunsAndPassesOnTheFake() {
        long[] passed = new long[1];
        String out = run(true, passed);
        System.out.println(out);
        assertThat(passed[0]).as(out).isEqualTo(1);
        assertThat(out)
                .contains(
                        "device:          gpumem fake CUDA device",
                        "virtual memory:  supported",
                        "-- training-like workload, native segments --",
                        "-- training-like workload, expandable_segments:True --",
                        "-- expandable segments: growing and being returned --",
                        "cuMemAlloc+cuMemFree",
                        "result: PASS")
                .doesNotContain("FAIL");
        // The fake's cuMemGetInfo moves by exactly what the allocator reserves: every "Δ - reserved" is zero.
        assertThat(out.lines().filter(l -> l.startsWith("step ")))
                .hasSize(12)
                .allSatisfy(l -> assertThat(l).endsWith(" 0.0 MiB"));
    }

    @Test
    void withoutVirtualMemoryTheExpandableSectionSaysItIsSkipped() {
        long[] passed = new long[1];
        String out = run(false, passed);
        assertThat(passed[0]).as(out).isEqualTo(1);
        assertThat(out).contains("NOT supported", "skipped: the device has no virtual memory management");
    }

    @Test
    void memoryThatIsNotGivenBackFailsTheCheck() {
        // Memory taken behind the allocator's back during the workload looks like a leak: the check says FAIL.
        FakeCuda.reset(4L << 30);
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        boolean ok;
        try (CudaDevice device = FakeCuda.open();
                PrintStream out = new PrintStream(bytes, true, StandardCharsets.UTF_8)) {
            ok = new GpuCheck(device, out, 256 * MiB, 7)
                    .afterWeights(() -> FakeCuda.setHeldOutside(100 * MiB))
                    .run();
        }
        String out = bytes.toString(StandardCharsets.UTF_8);
        assertThat(ok).as(out).isFalse();
        assertThat(out)
                .contains(
                        "FAIL: after emptyCache the allocator reserves 0.0 MiB and the driver still shows 100.0 MiB in use",
                        "result: FAIL");
    }

    @Test
    void aDriverCallFailingMidCheckIsOneLineAndStatus3NotAStackTraceAndStatus1() {
        FakeCuda.reset(4L << 30);
        FakeCuda.failNth("cuMemAlloc_v2", 3, FakeCuda.UNKNOWN); // during the first workload's weights
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        int status;
        try (PrintStream o = new PrintStream(out, true, StandardCharsets.UTF_8);
                PrintStream e = new PrintStream(err, true, StandardCharsets.UTF_8)) {
            status = GpuCheck.exitStatus(new String[] {"--budget-mib", "256"}, o, e);
        }
        String error = err.toString(StandardCharsets.UTF_8);
        assertThat(status).as(error).isEqualTo(3);
        assertThat(error)
                .startsWith("gpu-check: a driver call failed during the check, which stopped there: ")
                .contains("cuMemAlloc_v2")
                .doesNotContain("\tat ");
        assertThat(out.toString(StandardCharsets.UTF_8)).contains("device:          gpumem fake CUDA device");
    }

    @Test
    void badOptionsAreStatus2NamingTheOption() {
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        try (PrintStream e = new PrintStream(err, true, StandardCharsets.UTF_8)) {
            assertThat(GpuCheck.exitStatus(new String[] {"--budget-mib", "8"}, System.out, e))
                    .isEqualTo(2);
            assertThat(GpuCheck.exitStatus(new String[] {"--seed"}, System.out, e))
                    .isEqualTo(2);
            assertThat(GpuCheck.exitStatus(new String[] {"--colour"}, System.out, e))
                    .isEqualTo(2);
        }
        assertThat(err.toString(StandardCharsets.UTF_8))
                .contains("gpu-check: --budget-mib takes a whole number from 16 to 1073741824, got '8'")
                .contains("gpu-check: --seed needs a value")
                .contains("gpu-check: unknown argument '--colour'");
    }
}
