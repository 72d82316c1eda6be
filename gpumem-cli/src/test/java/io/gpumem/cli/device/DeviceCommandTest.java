package io.gpumem.cli.device;

import static io.gpumem.cli.CliRun.run;
import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpumem.cli.CliRun;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

/** {@code gpumem device} and the {@code --device} mixin: sim by default, cuda through the driver, clear failures. */
class DeviceCommandTest {

    /** The fake driver gpumem-cuda's build compiles (present when the reactor built that module's tests). */
    private static final Path FAKE = Path.of("../gpumem-cuda/target/test-classes/native/libfakecuda.so")
            .toAbsolutePath()
            .normalize();

    @Test
    void simulatedIsTheDefault() {
        CliRun r = run("device");
        assertThat(r.exit()).as(r.err()).isZero();
        assertThat(r.out()).contains("simulated (sim, index 0)").contains("virtual memory:  supported");
    }

    @Test
    void cudaWithoutADriverSaysSoAndExitsNonZero() {
        CliRun r = run("device", "--device", "cuda", "--cuda-library", "/nonexistent/libcuda.so.1");
        assertThat(r.exit()).isNotZero();
        assertThat(r.err()).contains("--device cuda: no usable CUDA driver").contains("/nonexistent/libcuda.so.1");
        assertThat(r.out()).isEmpty();
    }

    @Test
    void anUnknownDeviceKindNamesTheChoices() {
        CliRun r = run("device", "--device", "tpu");
        assertThat(r.exit()).isEqualTo(2);
        assertThat(r.err()).contains("expected sim or cuda, got 'tpu'");
    }

    @Test
    void cudaRunsOnTheFakeDriver() {
        assumeTrue(Files.isRegularFile(FAKE), "fake driver not built (build gpumem-cuda's tests first): " + FAKE);
        CliRun r = run("device", "--device", "CUDA", "--cuda-library", FAKE.toString());
        assertThat(r.exit()).as(r.err()).isZero();
        assertThat(r.out())
                .contains("gpumem fake CUDA device (cuda, index 0)")
                .contains("CUDA 13.0")
                .contains("granularity:     2,097,152 bytes");
        CliRun bad = run("device", "--device", "cuda", "--cuda-library", FAKE.toString(), "--cuda-device", "3");
        assertThat(bad.exit()).isNotZero();
        assertThat(bad.err()).contains("no CUDA device 3");
    }

    @Test
    void theMixinBuildsTheSimulatedDeviceOnlyWhenAskedFor() {
        class Command {
            @CommandLine.Mixin
            DeviceOptions options = new DeviceOptions();
        }
        Command command = new Command();
        new CommandLine(command).parseArgs("--device", "sim");
        DeviceOptions options = command.options;
        assertThat(options.isCuda()).isFalse();
        assertThat(options.open(() -> io.gpumem.device.SimulatedDevice.builder()
                                .name("mine")
                                .build())
                        .name())
                .isEqualTo("mine");
    }
}
