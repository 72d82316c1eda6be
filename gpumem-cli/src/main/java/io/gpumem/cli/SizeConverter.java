package io.gpumem.cli;

import io.gpumem.size.ByteSize;
import picocli.CommandLine.ITypeConverter;
import picocli.CommandLine.TypeConversionException;

/**
 * Reads every SIZE option of every command with core's one size vocabulary ({@link ByteSize}: bytes, or
 * B / KiB / MiB / GiB / TiB), so that all commands accept the same units. A bad value becomes picocli's
 * "Invalid value for option" error, which {@link GpumemCli} prints as {@code gpumem COMMAND: ...} with exit 2.
 */
public final class SizeConverter implements ITypeConverter<Long> {

    @Override
    public Long convert(String value) {
        return read(value, true);
    }

    /** For sizes that may be zero (e.g. memory held outside the allocator). */
    public static final class OrZero implements ITypeConverter<Long> {
        @Override
        public Long convert(String value) {
            return read(value, false);
        }
    }

    private static long read(String value, boolean positive) {
        try {
            return positive ? ByteSize.parsePositive(value) : ByteSize.parse(value);
        } catch (IllegalArgumentException e) {
            // core says "bad size 'X': why"; picocli prefixes the option, so the value is quoted once.
            String why = e.getMessage().replaceFirst("^bad size '.*?': ", "");
            throw new TypeConversionException("'" + value + "' is not a size: " + why);
        }
    }
}
