package io.gpumem.script;

import java.util.Map;

/**
 * Byte sizes as ops scripts write them: a whole number of bytes, optionally with {@code _} between digits,
 * optionally followed (without a space) by a binary unit {@code B}, {@code KiB}, {@code MiB}, {@code GiB} or
 * {@code TiB}. Decimal units ({@code KB}, {@code MB}, {@code GB}, {@code K}, {@code M}, {@code G}, ...) are
 * rejected on purpose: PyTorch's "MB" means MiB, so either reading would surprise someone, and a size that is
 * off by 5% silently changes rounding, pools and segment sizes.
 */
public final class ByteSize {
    private static final Map<String, Integer> SHIFTS = Map.of("", 0, "B", 0, "KiB", 10, "MiB", 20, "GiB", 30,
            "TiB", 40);

    private ByteSize() {
    }

    /**
     * Parses a size.
     *
     * @throws IllegalArgumentException with a message saying what is wrong (no digits, unknown or ambiguous
     *                                  unit, overflow)
     */
    public static long parse(String text) {
        int end = 0;
        while (end < text.length() && (Character.isDigit(text.charAt(end)) || text.charAt(end) == '_')) {
            end++;
        }
        String digits = text.substring(0, end).replace("_", "");
        String unit = text.substring(end);
        if (digits.isEmpty() || text.startsWith("_") || text.substring(0, end).endsWith("_")) {
            throw new IllegalArgumentException("bad size '" + text + "': expected a whole number of bytes,"
                    + " optionally with a unit B, KiB, MiB, GiB or TiB");
        }
        Integer shift = SHIFTS.get(unit);
        if (shift == null) {
            String upper = unit.toUpperCase(java.util.Locale.ROOT);
            boolean decimal = upper.matches("[KMGT]B?") || upper.matches("[KMGT]IB");
            throw new IllegalArgumentException("bad size '" + text + "': "
                    + (decimal ? "unit '" + unit + "' is not accepted; write KiB, MiB, GiB or TiB (powers of 1024)"
                            + " or plain bytes" : "unknown unit '" + unit + "' (use B, KiB, MiB, GiB or TiB)"));
        }
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
}
