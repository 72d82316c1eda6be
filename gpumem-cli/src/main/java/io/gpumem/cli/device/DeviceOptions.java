package io.gpumem.cli.device;

import io.gpumem.cuda.CudaDevice;
import io.gpumem.cuda.driver.CudaUnavailableException;
import io.gpumem.device.Device;
import java.util.Locale;
import java.util.function.Supplier;
import picocli.CommandLine;
import picocli.CommandLine.Option;

/**
 * The {@code --device sim|cuda} choice, as a picocli mixin any command can include:
 *
 * <pre>
 * &#64;Mixin DeviceOptions device;
 * ...
 * Device d = device.open(() -&gt; SimulatedDevice.builder().capacity(capacity).build());
 * </pre>
 *
 * {@code sim} (the default) uses the simulated device the command builds, with its own settings;
 * {@code cuda} opens a real GPU through the CUDA driver ({@link CudaDevice}), from the library given by
 * {@code --cuda-library}, else the {@code gpumem.cuda.library} system property, else the
 * {@code GPUMEM_CUDA_LIBRARY} environment variable, else {@code libcuda.so.1}. When the driver cannot be
 * used, {@link #open} throws {@link DeviceUnavailableException} with a message saying why, which the CLI
 * prints before exiting non-zero.
 */
public final class DeviceOptions {

    /** Where allocations go. */
    public enum DeviceKind {
        SIM,
        CUDA;

        @Override
        public String toString() {
            return name().toLowerCase(Locale.ROOT);
        }
    }

    /** Accepts {@code sim} and {@code cuda} (any case) and names both choices when the value is neither. */
    static final class DeviceKindConverter implements CommandLine.ITypeConverter<DeviceKind> {
        @Override
        public DeviceKind convert(String value) {
            for (DeviceKind k : DeviceKind.values()) {
                if (k.name().equalsIgnoreCase(value.trim())) {
                    return k;
                }
            }
            throw new CommandLine.TypeConversionException("expected sim or cuda, got '" + value + "'");
        }
    }

    @Option(
            names = "--device",
            paramLabel = "sim|cuda",
            defaultValue = "sim",
            converter = DeviceKindConverter.class,
            description =
                    "Device to run on: sim (simulated GPU, default) or cuda (a real NVIDIA GPU through the CUDA driver).")
    DeviceKind kind = DeviceKind.SIM;

    @Option(
            names = "--cuda-library",
            paramLabel = "PATH",
            description =
                    "CUDA driver library for --device cuda (default: -Dgpumem.cuda.library, else $GPUMEM_CUDA_LIBRARY, else libcuda.so.1).")
    String cudaLibrary;

    @Option(
            names = "--cuda-device",
            paramLabel = "N",
            defaultValue = "0",
            description = "GPU ordinal for --device cuda (default: ${DEFAULT-VALUE}).")
    int cudaOrdinal;

    /** The selected kind. */
    public DeviceKind kind() {
        return kind;
    }

    /** Whether a real GPU was asked for. */
    public boolean isCuda() {
        return kind == DeviceKind.CUDA;
    }

    /** The driver library {@code --device cuda} loads. */
    public String cudaLibrary() {
        return cudaLibrary != null && !cudaLibrary.isBlank() ? cudaLibrary : CudaDevice.configuredLibrary();
    }

    /**
     * Opens the selected device.
     *
     * @param simulated builds the simulated device, with the calling command's settings
     * @throws DeviceUnavailableException if {@code cuda} was chosen and the driver or GPU cannot be used
     */
    public Device open(Supplier<? extends Device> simulated) {
        if (kind == DeviceKind.SIM) {
            return simulated.get();
        }
        if (cudaOrdinal < 0) {
            throw new DeviceUnavailableException("--cuda-device must be 0 or more, got " + cudaOrdinal);
        }
        try {
            return CudaDevice.open(cudaLibrary(), cudaOrdinal);
        } catch (CudaUnavailableException e) {
            throw new DeviceUnavailableException("--device cuda: no usable CUDA driver: " + e.getMessage(), e);
        }
    }
}
