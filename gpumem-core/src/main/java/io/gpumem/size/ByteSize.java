package io.gpumem.size;

import java.math.BigDecimal;
import java.math.RoundingMode;
import java.util.Locale;

/**
 * The project's one vocabulary for byte sizes: how every command, script and configuration reads a size
 * ({@link #parse}, {@link #parsePositive}) and how sizes are printed ({@link #format}, PyTorch's {@code format_size}).
 *
 * <h2>Reading</h2>
 * A whole number of bytes in the ASCII digits {@code 0-9} (other scripts' digits, which {@link Long#parseLong} would
 * take, are refused like every other number the project reads), optionally with {@code _} between digits, optionally followed (without a space) by a
 * binary unit {@code B}, {@code KiB}, {@code MiB}, {@code GiB} or {@code TiB} (powers of 1024; units are
 * case-sensitive). Decimal and bare units ({@code KB}, {@code MB}, {@code GB}, {@code K}, {@code M}, {@code G},
 * ...) are rejected with a hint, on purpose: PyTorch's own "MB" (as in {@code max_split_size_mb}) means MiB while
 * the SI prefix means 10^6, so either reading would surprise someone, and a size that is off by 5% silently
 * changes rounding, pools and segment sizes. Fractions ({@code 1.5GiB}) are rejected too: write
 * {@code 1536MiB}. Negative sizes and sizes above {@link Long#MAX_VALUE} are errors.
 *
 * <h2>Printing</h2>
 * {@link #format} is PyTorch's {@code format_size}, used by the OOM message and every report: up to 1024 bytes
 * {@code "n bytes"}; up to 1 MiB, KiB with two decimals; up to 1 GiB, MiB; above, GiB. The bounds are inclusive
 * ("≤"), so 1,048,576 prints {@code "1024.00 KiB"}. The C++ code divides a {@code double} and prints it with
 * {@code std::fixed} and precision 2, which rounds the exact binary value half-to-even on a true tie (1.125 →
 * "1.12"); Java's {@code %.2f} rounds half-up, so the value is rounded through {@link BigDecimal} instead.
 */
public final class ByteSize {
    private static final long KIB = 1024;
    private static final long MIB = 1024 * 1024;
    private static final long GIB = 1024 * 1024 * 1024;

    private ByteSize() {}

    /**
     * Parses a size (see the class comment); zero is allowed.
     *
     * @throws IllegalArgumentException with a message that quotes the text and says what is wrong
     */
    public static long parse(String text) {
        int end = 0;
        while (end < text.length() && isDigitOrUnderscore(text.charAt(end))) {
            end++;
        }
        String digits = text.substring(0, end).replace("_", "");
        String unit = text.substring(end);
        if (digits.isEmpty()
                || text.startsWith("_")
                || text.substring(0, end).endsWith("_")
                || text.substring(0, end).contains("__")) {
            throw new IllegalArgumentException("bad size '" + text + "': expected a whole number of bytes"
                    + " (digits 0-9), optionally with a unit B, KiB, MiB, GiB or TiB");
        }
        int shift = switch (unit) {
            case "", "B" -> 0;
            case "KiB" -> 10;
            case "MiB" -> 20;
            case "GiB" -> 30;
            case "TiB" -> 40;
            default -> {
                String upper = unit.toUpperCase(Locale.ROOT);
                boolean decimal = upper.matches("[KMGT]B?") || upper.matches("[KMGT]IB");
                throw new IllegalArgumentException("bad size '" + text + "': "
                        + (decimal
                                ? "unit '" + unit
                                        + "' is not accepted; write KiB, MiB, GiB or TiB (powers of 1024) or plain bytes"
                                : "unknown unit '" + unit + "' (use B, KiB, MiB, GiB or TiB)"));
            }
        };
        long value;
        try {
            value = Long.parseLong(digits);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("bad size '" + text + "': too large");
        }
        if (value > (Long.MAX_VALUE >> shift)) {
            throw new IllegalArgumentException("bad size '" + text + "': too large");
        }
        return value << shift;
    }

    private static boolean isDigitOrUnderscore(char c) {
        return (c >= '0' && c <= '9') || c == '_';
    }

    /**
     * Parses a size that must be above zero.
     *
     * @throws IllegalArgumentException as {@link #parse}, and for zero
     */
    public static long parsePositive(String text) {
        long bytes = parse(text);
        if (bytes == 0) {
            throw new IllegalArgumentException("bad size '" + text + "': must be more than 0 bytes");
        }
        return bytes;
    }

    /**
     * Formats a byte count like PyTorch's {@code format_size}.
     *
     * @throws IllegalArgumentException if {@code n} is negative (PyTorch's argument is unsigned)
     */
    public static String format(long n) {
        if (n < 0) {
            throw new IllegalArgumentException("size must not be negative: " + n);
        }
        if (n <= KIB) {
            return n + " bytes";
        } else if (n <= MIB) {
            return twoDecimals((double) n / 1024.0) + " KiB";
        } else if (n <= GIB) {
            return twoDecimals((double) n / 1048576.0) + " MiB";
        }
        return twoDecimals((double) n / 1073741824.0) + " GiB";
    }

    /** {@link #format} for a difference that may be negative: a leading minus, then the magnitude. */
    public static String formatSigned(long n) {
        return n < 0 ? "-" + format(-n) : format(n);
    }

    /** {@link #format} for a change: a leading plus or minus, then the magnitude ({@code +0 bytes} for none). */
    public static String formatChange(long n) {
        return (n < 0 ? "-" : "+") + format(Math.abs(n));
    }

    private static String twoDecimals(double v) {
        return new BigDecimal(v).setScale(2, RoundingMode.HALF_EVEN).toPlainString();
    }
}
