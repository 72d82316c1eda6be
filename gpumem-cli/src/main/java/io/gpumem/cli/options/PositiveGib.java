package io.gpumem.cli.options;

import picocli.CommandLine.ITypeConverter;
import picocli.CommandLine.TypeConversionException;

/**
 * Converts a {@code GIB} option value (a device memory size in GiB, fractions allowed) at parse time: a finite
 * number above zero and at most {@link #MAX_GIB}, so that {@code NaN}, {@code Infinity}, zero, negatives and
 * sizes whose byte count overflows are refused where they are typed, with the option named by picocli.
 */
public final class PositiveGib implements ITypeConverter<Double> {

    /** 16 PiB in GiB: far above any device, and its byte count fits in a long with room to spare. */
    public static final double MAX_GIB = 16 * 1024 * 1024;

    @Override
    public Double convert(String value) {
        double gib;
        try {
            gib = Double.parseDouble(value.strip());
        } catch (NumberFormatException e) {
            throw new TypeConversionException("'" + value + "' is not a number of GiB");
        }
        if (Double.isNaN(gib) || Double.isInfinite(gib) || gib <= 0) {
            throw new TypeConversionException("'" + value + "' is not a positive, finite number of GiB");
        }
        if (gib > MAX_GIB) {
            throw new TypeConversionException("'" + value + "' GiB is over the largest device gpumem models ("
                    + (long) MAX_GIB + " GiB)");
        }
        if (gib * (1L << 30) < 1) {
            throw new TypeConversionException("'" + value + "' GiB is less than one byte");
        }
        return gib;
    }

    /** The byte count of a value this converter accepted. */
    public static long bytes(double gib) {
        return (long) (gib * (1L << 30));
    }
}
