package io.gpumem.script;

import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CoderResult;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import org.jspecify.annotations.Nullable;

/**
 * The one line splitter of ops scripts: reads bytes one line at a time and decodes each line as strict UTF-8, so
 * that a byte that is not UTF-8 is reported with its line and column ({@link ScriptException}) rather than as the
 * JDK's bare "Input length = 1". The trace module's CSV readers, which decode in bulk, ask {@link #firstBadByte}
 * where their input went wrong once the decoder says it did.
 *
 * <p>Rules, the same for every source of a script ({@link OpsScript#parse(String)} encodes its text and comes
 * here too): a line ends at {@code \n}, {@code \r\n} or a lone {@code \r} (the rule of
 * {@code BufferedReader.readLine}, which the CSV readers use, so line numbers agree); a UTF-8 byte-order mark at the
 * very start is no part of line 1 (format detection skips it too); a line may hold at most {@link #MAX_LINE_BYTES}
 * bytes, so memory is one bounded line and a runaway line is an error naming it rather than an exhausted heap.
 * Columns count bytes from the start of the line's text (after a byte-order mark).
 */
public final class Utf8Lines {
    private final InputStream in;
    private final CharsetDecoder decoder = StandardCharsets.UTF_8
            .newDecoder()
            .onMalformedInput(CodingErrorAction.REPORT)
            .onUnmappableCharacter(CodingErrorAction.REPORT);
    /**
     * The longest line, in bytes without its end, that a script may have: far above any real op or config line
     * (a few hundred bytes), far below the 2 GiB where a line buffer could no longer grow.
     */
    public static final int MAX_LINE_BYTES = 1 << 20;

    private static final int NOTHING_PENDING = -2;

    private byte[] buf = new byte[256];
    private int line;
    /** The byte read after a lone {@code \r} (the first of the next line, or -1 at the end), else NOTHING_PENDING. */
    private int pending = NOTHING_PENDING;
    /** Whether the last error was a line over {@link #MAX_LINE_BYTES}, which is not a byte that is not UTF-8. */
    private boolean overlong;

    Utf8Lines(InputStream in) {
        this.in = in;
    }

    /**
     * Where the first byte that is not UTF-8 stands in {@code in}: the error a script of these bytes gets, its
     * {@link ScriptException#line() line} and its {@link ScriptException#detail() detail} {@code not UTF-8 text (byte
     * 0xXX at column C)}; null when every line decodes, or when a line before the bad byte is longer than
     * {@link #MAX_LINE_BYTES} (the caller then knows only that the input is not UTF-8). Reads {@code in} up to that
     * line.
     */
    public static @Nullable ScriptException firstBadByte(InputStream in) throws IOException {
        Utf8Lines lines = new Utf8Lines(in);
        try {
            while (lines.next() != null) {
                // decoding is the check
            }
            return null;
        } catch (ScriptException e) {
            return lines.overlong ? null : e;
        }
    }

    /**
     * The next line without its end, or null at the end of the input.
     *
     * @throws ScriptException for a byte that is not UTF-8 or a line longer than {@link #MAX_LINE_BYTES}
     */
    @Nullable
    String next() throws IOException {
        int n = 0;
        int b = pending == NOTHING_PENDING ? in.read() : pending;
        pending = NOTHING_PENDING;
        while (b >= 0 && b != '\n' && b != '\r') {
            if (n == MAX_LINE_BYTES) {
                overlong = true;
                throw new ScriptException(
                        line + 1, "line longer than " + MAX_LINE_BYTES + " bytes (the limit for a script line)");
            }
            if (n == buf.length) {
                buf = Arrays.copyOf(buf, Math.min(2 * n, MAX_LINE_BYTES));
            }
            buf[n++] = (byte) b;
            b = in.read();
        }
        if (b < 0 && n == 0) {
            return null;
        }
        if (b == '\r') {
            int after = in.read();
            if (after != '\n') {
                pending = after;
            }
        }
        line++;
        int start = line == 1 && startsWithByteOrderMark(n) ? 3 : 0;
        ByteBuffer bytes = ByteBuffer.wrap(buf, start, n - start);
        CharBuffer chars = CharBuffer.allocate(n); // n bytes of UTF-8 never make more than n chars
        CoderResult result = decoder.reset().decode(bytes, chars, true);
        if (!result.isError()) {
            result = decoder.flush(chars);
        }
        if (result.isError()) {
            // the decoder stops at the first byte of the sequence it cannot take: a lone continuation byte, or the
            // start of a sequence that a wrong byte or the end of the line cuts short
            int at = bytes.position();
            throw new ScriptException(
                    line,
                    "not UTF-8 text (byte 0x" + String.format("%02x", buf[at] & 0xff) + " at column " + (at - start + 1)
                            + ")");
        }
        return chars.flip().toString();
    }

    /** Whether the line in {@code buf[0, n)} opens with the UTF-8 encoding of U+FEFF. */
    private boolean startsWithByteOrderMark(int n) {
        return n >= 3 && (buf[0] & 0xff) == 0xEF && (buf[1] & 0xff) == 0xBB && (buf[2] & 0xff) == 0xBF;
    }
}
