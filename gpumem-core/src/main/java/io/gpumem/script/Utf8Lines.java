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
 * Reads a script's bytes one line at a time and decodes each line as strict UTF-8, so that a byte that is not
 * UTF-8 is reported with its line and column ({@link ScriptException}) rather than as the JDK's bare
 * "Input length = 1". Line ends are {@code \n} or {@code \r\n}; memory is one line. The trace module's CSV readers,
 * which decode in bulk, ask {@link #firstBadByte} where their input went wrong once the decoder says it did.
 */
public final class Utf8Lines {
    private final InputStream in;
    private final CharsetDecoder decoder = StandardCharsets.UTF_8
            .newDecoder()
            .onMalformedInput(CodingErrorAction.REPORT)
            .onUnmappableCharacter(CodingErrorAction.REPORT);
    private byte[] buf = new byte[256];
    private int line;

    Utf8Lines(InputStream in) {
        this.in = in;
    }

    /**
     * Where the first byte that is not UTF-8 stands in {@code in}: the error a script of these bytes gets, its
     * {@link ScriptException#line() line} and its {@link ScriptException#detail() detail} {@code not UTF-8 text (byte
     * 0xXX at column C)}; null when every line decodes. Reads {@code in} up to that line.
     */
    public static @Nullable ScriptException firstBadByte(InputStream in) throws IOException {
        Utf8Lines lines = new Utf8Lines(in);
        try {
            while (lines.next() != null) {
                // decoding is the check
            }
            return null;
        } catch (ScriptException e) {
            return e;
        }
    }

    /** The next line without its end, or null at the end of the input. */
    @Nullable
    String next() throws IOException {
        int n = 0;
        int b;
        while ((b = in.read()) >= 0 && b != '\n') {
            if (n == buf.length) {
                buf = Arrays.copyOf(buf, 2 * n);
            }
            buf[n++] = (byte) b;
        }
        if (b < 0 && n == 0) {
            return null;
        }
        line++;
        if (n > 0 && buf[n - 1] == '\r') {
            n--;
        }
        ByteBuffer bytes = ByteBuffer.wrap(buf, 0, n);
        CharBuffer chars = CharBuffer.allocate(n); // n bytes of UTF-8 never make more than n chars
        CoderResult result = decoder.reset().decode(bytes, chars, true);
        if (!result.isError()) {
            result = decoder.flush(chars);
        }
        if (result.isError()) {
            // the decoder stops at the first byte of the sequence it cannot take: a lone continuation byte, or the
            // start of a sequence that a wrong byte or the end of the line cuts short
            int column = bytes.position();
            throw new ScriptException(
                    line,
                    "not UTF-8 text (byte 0x" + String.format("%02x", buf[column] & 0xff) + " at column " + (column + 1)
                            + ")");
        }
        return chars.flip().toString();
    }
}
