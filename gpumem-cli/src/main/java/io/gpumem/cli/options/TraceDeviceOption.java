package io.gpumem.cli.options;

import java.util.function.IntSupplier;
import org.jspecify.annotations.Nullable;
import picocli.CommandLine.Option;

/**
 * The {@code --trace-device N} option of the commands that read a file's device traces ({@code analyze},
 * {@code report}, {@code compare}, {@code diff}, {@code predict}, {@code plan}): one name, one check (a device index
 * is 0 or more) and one description that says each command's default. ({@code sim}'s and {@code device}'s
 * {@code --device} is the backend, {@code sim} or {@code cuda}.)
 */
public final class TraceDeviceOption {

    @Option(
            names = "--trace-device",
            paramLabel = "N",
            description = "The device trace of the file to read, 0-based (default: analyze and report, every device;"
                    + " compare, plan, diff and predict, the device trace with the most allocs, in each file for"
                    + " diff and predict).")
    @Nullable
    Integer device;

    /**
     * The device given, or null when the option is absent.
     *
     * @throws BadInputException for a negative index
     */
    public @Nullable Integer given() {
        if (device != null && device < 0) {
            throw new BadInputException("--trace-device must be 0 or more, got " + device);
        }
        return device;
    }

    /**
     * The device given, or {@code otherwise}'s when the option is absent (the busiest device; or −1, which the
     * library's readers take to mean their busiest).
     *
     * @throws BadInputException for a negative index
     */
    public int orElse(IntSupplier otherwise) {
        Integer d = given();
        return d != null ? d : otherwise.getAsInt();
    }

    /** Sets the device as the option would (for an older name of the option, kept by a command). */
    public void set(int d) {
        device = d;
    }
}
