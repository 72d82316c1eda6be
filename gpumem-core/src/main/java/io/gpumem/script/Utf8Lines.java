package io.gpumem.script;

import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import org.jspecify.annotations.Nullable;

/**
 * Reads a script's bytes one line at a time and decodes each line as strict UTF-8, so that a byte that is not
 * UTF-8 is reported with its line and column ({@link ScriptException}) rather than as the JDK's bare
 * "Input length = 1". Line ends are {@code \n} or {@code \r\n}; memory is one line.
 */
final class Utf8Lines {
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
        try {
            CharBuffer chars = decoder.reset().decode(ByteBuffer.wrap(buf, 0, n));
            return chars.toString();
        } catch (CharacterCodingException e) {
            int column = firstBadByte(n);
            throw new ScriptException(
                    line,
                    "not UTF-8 text (byte 0x" + String.format("%02x", buf[column] & 0xff) + " at column " + (column + 1)
                            + ")");
        }
    }

    /** Index of the first byte where decoding fails (the line is known to contain one). */
    private int firstBadByte(int n) {
        for (int end = 1; end <= n; end++) {
            try {
                decoder.reset().decode(ByteBuffer.wrap(buf, 0, end));
            } catch (CharacterCodingException e) {
                // A truncated sequence at the cut also fails: only count it when more bytes cannot complete it.
                if (end == n || !incompleteAt(end)) {
                    return Math.max(0, Math.min(n - 1, lastSequenceStart(end)));
                }
            }
        }
        return 0;
    }

    private boolean incompleteAt(int end) {
        return (buf[end] & 0xc0) == 0x80; // the next byte continues the sequence cut here
    }

    private int lastSequenceStart(int end) {
        int i = end - 1;
        while (i > 0 && (buf[i] & 0xc0) == 0x80) {
            i--;
        }
        return i;
    }
}
