package io.gpumem.cli.device;

import io.gpumem.cli.GpumemCommand;
import io.gpumem.cuda.CudaDevice;
import io.gpumem.device.Device;
import io.gpumem.device.SimulatedDevice;
import java.io.PrintWriter;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;

/**
 * {@code gpumem device}: opens the selected device and prints what the allocator will see (name, memory,
 * virtual memory support, granularity). With {@code --device cuda} it is the quickest way to check that the
 * driver loads and a GPU answers; without one it fails with the reason and a non-zero exit.
 */
@Command(
        name = "device",
        mixinStandardHelpOptions = true,
        description = "Show the device gpumem would run on (--device sim|cuda): name, memory, virtual memory support.")
public final class DeviceCommand extends GpumemCommand {

    @Mixin
    DeviceOptions device;

    @Override
    public Integer call() {
        Device d = device.open(() -> SimulatedDevice.builder().build());
        try {
            PrintWriter out = out();
            out.printf("device:          %s (%s, index %d)%n", d.name(), device.kind(), d.index());
            if (d instanceof CudaDevice cuda) {
                out.printf(
                        "driver:          %s (CUDA %d.%d)%n",
                        cuda.library(), cuda.driverVersion() / 1000, cuda.driverVersion() % 1000 / 10);
            }
            out.printf(
                    "total memory:    %,d bytes (%.2f GiB)%n", d.totalMemory(), d.totalMemory() / (double) (1L << 30));
            long free = d.freeMemory(); // read once: on a GPU two reads can differ, and the line would too
            out.printf("free memory:     %,d bytes (%.2f GiB)%n", free, free / (double) (1L << 30));
            out.printf(
                    "virtual memory:  %s%n",
                    d.supportsVirtualMemory()
                            ? "supported (expandable segments map pages)"
                            : "not supported (expandable segments fall back to cuMemAlloc)");
            out.printf("granularity:     %,d bytes%n", d.allocationGranularity());
            out.flush();
        } catch (RuntimeException | Error e) {
            try {
                d.close();
            } catch (RuntimeException closing) {
                e.addSuppressed(closing); // the first failure is the one to report
            }
            throw e;
        }
        try {
            d.close();
        } catch (RuntimeException e) {
            throw new IllegalStateException("closing " + d.name() + ": " + e.getMessage(), e);
        }
        return 0;
    }
}
