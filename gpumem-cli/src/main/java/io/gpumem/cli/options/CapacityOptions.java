package io.gpumem.cli.options;

import io.gpumem.cli.SizeConverter;
import io.gpumem.size.ByteSize;
import io.gpumem.trace.analysis.DeviceAnalysis;
import io.gpumem.trace.analysis.MemoryState;
import java.nio.file.Path;
import picocli.CommandLine.Option;

/**
 * The {@code --capacity SIZE} option of the commands that judge a trace against a device's memory ({@code compare},
 * {@code predict}, {@code analyze}, {@code report}): one name, one size vocabulary ({@link SizeConverter}: a positive
 * size, the option blamed for a bad one) and one description that says each command's default. ({@code replay}'s
 * and {@code demo}'s {@code --capacity} mean other things: the memory that sizes expandable reservations, and the
 * simulated device's size.)
 */
public final class CapacityOptions {

    @Option(
            names = "--capacity",
            paramLabel = "SIZE",
            converter = SizeConverter.class,
            description = "Device capacity, e.g. 80GiB: the limit of the OOM column and what memory held outside the"
                    + " allocator is measured against (default: compare, the recorded capacity: the trace's peak"
                    + " reserved, or reserved + free at a recorded oom; predict, the predicted recording's own, its"
                    + " peak reserved; analyze and report, unknown).")
    Long bytes;

    /** The capacity given, or null when the option is absent. */
    public Long given() {
        return bytes;
    }

    /** The capacity given, or {@link MemoryState#UNKNOWN} when the option is absent. */
    public long orUnknown() {
        return bytes == null ? MemoryState.UNKNOWN : bytes;
    }

    /**
     * Why the capacity given cannot be the analysed device's memory, or null when it can (or none was given): the
     * analysed state of {@code file} already has more reserved, so the recording could not have run on it, and every
     * share of the capacity would be nonsense. The sentence says what is wrong; the caller says what it does.
     */
    public String problemWith(DeviceAnalysis result, Path file) {
        long reserved = result.analysis().all().reserved();
        if (bytes == null || reserved <= bytes) {
            return null;
        }
        return "--capacity " + bytes + " (" + ByteSize.format(bytes) + ") is less than the " + ByteSize.format(reserved)
                + " device " + result.device() + " of " + file + " has reserved";
    }
}
