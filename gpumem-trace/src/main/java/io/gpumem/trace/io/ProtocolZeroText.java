package io.gpumem.trace.io;

import io.gpumem.trace.io.PlainDataUnpickler.Misfit;
import java.math.BigInteger;

/**
 * The arguments of pickle protocol 0's text opcodes, decoded from the line {@link PlainDataUnpickler} read for
 * them: {@code INT} and {@code LONG} (decimal), {@code FLOAT}, {@code STRING} (a quoted Python 2 literal) and
 * {@code UNICODE} (raw-unicode-escape). PyTorch writes its snapshots with protocol 2 or later, so these are rare in
 * practice and kept apart from the unpickler's hot paths; they are still decoded exactly, and refused with a
 * {@link Misfit} (whose message the unpickler completes with the opcode and its offset) when malformed.
 *
 * <p>Stateless; the unpickler bounds the lines it hands over ({@link PickleInput#MAX_TEXT_INTEGER} digits for
 * an integer, since decimal parsing is quadratic).
 */
final class ProtocolZeroText {

    private ProtocolZeroText() {}

    /**
     * {@code INT} ("I01" and "I00" are protocol 0's True and False; else an {@link Integer} when it fits, a
     * {@link Long}, or a {@link BigInteger}) and, with {@code isLong}, {@code LONG} (a trailing 'L' allowed).
     */
    static Object integer(String line, boolean isLong) {
        String s = line.strip();
        if (!isLong && s.equals("01")) {
            return true;
        }
        if (!isLong && s.equals("00")) {
            return false;
        }
        if (isLong && s.endsWith("L")) {
            s = s.substring(0, s.length() - 1);
        }
        BigInteger b;
        try {
            b = new BigInteger(s);
        } catch (NumberFormatException e) {
            throw new Misfit("not an integer: " + shorten(s));
        }
        if (!isLong && b.bitLength() < 32) {
            return b.intValue();
        }
        return b.bitLength() < 64 ? (Number) b.longValue() : b;
    }

    /** {@code FLOAT}'s argument: a decimal float as Python's {@code repr} writes it. */
    static Double floating(String line) {
        try {
            return Double.valueOf(line);
        } catch (NumberFormatException e) {
            throw new Misfit("not a float: " + shorten(line));
        }
    }

    /** {@code STRING}'s argument: a quoted Python 2 string literal with backslash escapes. */
    static String quoted(String s) {
        if (s.length() < 2 || (s.charAt(0) != '\'' && s.charAt(0) != '"') || s.charAt(s.length() - 1) != s.charAt(0)) {
            throw new Misfit("not a quoted string");
        }
        String body = s.substring(1, s.length() - 1);
        StringBuilder out = new StringBuilder(body.length());
        for (int i = 0; i < body.length(); i++) {
            char c = body.charAt(i);
            if (c != '\\' || i + 1 == body.length()) {
                out.append(c);
                continue;
            }
            char e = body.charAt(++i);
            switch (e) {
                case 'n' -> out.append('\n');
                case 't' -> out.append('\t');
                case 'r' -> out.append('\r');
                case '\\', '\'', '"' -> out.append(e);
                case 'x' -> {
                    out.append((char) hex(body, i + 1, 2));
                    i += 2;
                }
                default -> out.append('\\').append(e);
            }
        }
        return out.toString();
    }

    /** {@code UNICODE}'s argument: raw-unicode-escape ({@code \\uXXXX}, {@code \\UXXXXXXXX}, else Latin-1). */
    static String rawUnicodeEscape(String s) {
        if (s.indexOf('\\') < 0) {
            return s;
        }
        StringBuilder out = new StringBuilder(s.length());
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '\\' && i + 1 < s.length() && (s.charAt(i + 1) == 'u' || s.charAt(i + 1) == 'U')) {
                int digits = s.charAt(i + 1) == 'u' ? 4 : 8;
                int cp = hex(s, i + 2, digits);
                if (!Character.isValidCodePoint(cp)) {
                    throw new Misfit("not a code point");
                }
                out.appendCodePoint(cp);
                i += 1 + digits;
            } else {
                out.append(c);
            }
        }
        return out.toString();
    }

    private static int hex(String s, int from, int digits) {
        if (from + digits > s.length()) {
            throw new Misfit("a short escape");
        }
        try {
            return (int) Long.parseLong(s.substring(from, from + digits), 16);
        } catch (NumberFormatException e) {
            throw new Misfit("not a hex escape");
        }
    }

    /** {@code s}, cut to 32 characters for an error message. */
    static String shorten(String s) {
        return s.length() <= 32 ? s : s.substring(0, 32) + "...";
    }
}
