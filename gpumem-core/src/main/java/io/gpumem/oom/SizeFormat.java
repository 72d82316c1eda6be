package io.gpumem.oom;

import java.math.BigDecimal;
import java.math.RoundingMode;

/**
 * PyTorch's {@code format_size} (allocator.md §7.1): byte counts as the OOM message prints them.
 *
 * <p>Up to 1024 bytes prints {@code "n bytes"}; up to 1 MiB, KiB with two decimals; up to 1 GiB, MiB; above,
 * GiB. The bounds are inclusive ("≤"), so 1,048,576 prints {@code "1024.00 KiB"}. The C++ code divides a
 * {@code double} and prints it with {@code std::fixed} and precision 2, which rounds the exact binary value
 * half-to-even on a true tie (1.125 → "1.12"); Java's {@code %.2f} rounds half-up, so the value is rounded
 * through {@link BigDecimal} instead.
 */
public final class SizeFormat {
    private static final long KIB = 1024;
    private static final long MIB = 1024 * 1024;
    private static final long GIB = 1024 * 1024 * 1024;

    private SizeFormat() {
    }

    /**
     * Formats a byte count like PyTorch's OOM message.
     *
     * @throws IllegalArgumentException if {@code n} is negative (PyTorch's argument is unsigned)
     */
    public static String formatSize(long n) {
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

    private static String twoDecimals(double v) {
        return new BigDecimal(v).setScale(2, RoundingMode.HALF_EVEN).toPlainString();
    }
}
