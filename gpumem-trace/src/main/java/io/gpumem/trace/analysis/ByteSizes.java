package io.gpumem.trace.analysis;

import io.gpumem.size.ByteSize;
import java.util.Locale;

/**
 * Byte figures as the reports print them and as users type them.
 *
 * <p>{@link #format} follows PyTorch's {@code format_size} (allocator.md §7.1) so that figures match the OOM
 * message a user already has: "≤ 1024 → bytes, ≤ 1 MiB → KiB, ≤ 1 GiB → MiB, else GiB", two decimals.
 */
public final class ByteSizes {
    private static final long KIB = 1L << 10;
    private static final long MIB = 1L << 20;
    private static final long GIB = 1L << 30;

    private ByteSizes() {
    }

    /** PyTorch's {@code format_size} (core's {@link ByteSize#format}); negative values get a leading minus. */
    public static String format(long bytes) {
        return ByteSize.formatSigned(bytes);
    }

    /**
     * Parses a size: a plain byte count or a number with a unit B, K/KB/KiB, M/MB/MiB, G/GB/GiB, T/TB/TiB
     * (all binary: 1 KB = 1024 bytes, as GPU tools mean it); case-insensitive, fractions allowed ("1.5GiB").
     *
     * @throws IllegalArgumentException naming the text when it is not a size
     */
    public static long parse(String text) {
        long bytes = parseNonNegative(text);
        if (bytes == 0) {
            throw new IllegalArgumentException("'" + text + "' is out of range (must be positive)");
        }
        return bytes;
    }

    /** Like {@link #parse} but also accepts zero ("0", "0GiB"). */
    public static long parseNonNegative(String text) {
        String t = text.trim().toLowerCase(Locale.ROOT);
        int i = 0;
        while (i < t.length() && (Character.isDigit(t.charAt(i)) || t.charAt(i) == '.')) {
            i++;
        }
        if (i == 0) {
            throw new IllegalArgumentException("'" + text + "' is not a size (expected e.g. 24GiB, 512MiB or 1073741824)");
        }
        String unit = t.substring(i).trim();
        long scale = switch (unit) {
            case "", "b" -> 1L;
            case "k", "kb", "kib" -> KIB;
            case "m", "mb", "mib" -> MIB;
            case "g", "gb", "gib" -> GIB;
            case "t", "tb", "tib" -> GIB * 1024;
            default -> throw new IllegalArgumentException("'" + text + "' has an unknown unit '" + unit + "' (use B, KiB, MiB, GiB or TiB)");
        };
        double value;
        try {
            value = Double.parseDouble(t.substring(0, i));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("'" + text + "' is not a size (expected e.g. 24GiB, 512MiB or 1073741824)", e);
        }
        double bytes = value * scale;
        if (bytes < 0 || bytes >= Long.MAX_VALUE / 2.0) {
            throw new IllegalArgumentException("'" + text + "' is out of range");
        }
        return Math.round(bytes);
    }

    /** A ratio as a percentage with one decimal. */
    public static String percent(double ratio) {
        return String.format(Locale.ROOT, "%.1f%%", ratio * 100);
    }
}
