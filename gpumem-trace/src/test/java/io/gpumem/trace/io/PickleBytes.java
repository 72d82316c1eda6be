package io.gpumem.trace.io;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.channels.Channels;
import java.nio.channels.ReadableByteChannel;
import java.nio.charset.StandardCharsets;

/** Hand-written pickles for the decoder's tests: opcodes and their arguments, byte by byte. */
final class PickleBytes {

    private PickleBytes() {}

    /**
     * The bytes of {@code parts} in order: an {@link Integer} or {@link Character} is one byte, a {@link String} its
     * Latin-1 bytes, a {@code byte[]} itself.
     */
    static byte[] bytes(Object... parts) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        for (Object p : parts) {
            switch (p) {
                case String s -> out.writeBytes(s.getBytes(StandardCharsets.ISO_8859_1));
                case Integer i -> out.write(i);
                case Character c -> out.write(c);
                case byte[] b -> out.writeBytes(b);
                default -> throw new IllegalArgumentException("not a pickle part: " + p);
            }
        }
        return out.toByteArray();
    }

    /** {@code v} as {@code n} little-endian bytes (a length prefix, a memo index, a binary integer). */
    static byte[] le(long v, int n) {
        byte[] b = new byte[n];
        for (int i = 0; i < n; i++) {
            b[i] = (byte) (v >>> (8 * i));
        }
        return b;
    }

    /** {@code SHORT_BINUNICODE} of {@code s} (at most 255 bytes of UTF-8). */
    static byte[] unicode(String s) {
        byte[] b = s.getBytes(StandardCharsets.UTF_8);
        if (b.length > 255) {
            throw new IllegalArgumentException("too long for SHORT_BINUNICODE: " + s);
        }
        return bytes(0x8c, b.length, b);
    }

    /** A channel over {@code pickle}, as the file reader's. */
    static ReadableByteChannel channel(byte[] pickle) {
        return Channels.newChannel(new ByteArrayInputStream(pickle));
    }

    /**
     * A channel over {@code pickle} that gives nothing on every other read and at most three bytes on the others, as
     * a slow or non-blocking source may: a reader must keep asking until it has what it needs.
     */
    static ReadableByteChannel stutteringChannel(byte[] pickle) {
        return new ReadableByteChannel() {
            private int at;
            private boolean idle;

            @Override
            public int read(ByteBuffer dst) {
                if (at == pickle.length) {
                    return -1;
                }
                idle = !idle;
                if (idle) {
                    return 0;
                }
                int n = Math.min(Math.min(3, dst.remaining()), pickle.length - at);
                dst.put(pickle, at, n);
                at += n;
                return n;
            }

            @Override
            public boolean isOpen() {
                return true;
            }

            @Override
            public void close() {}
        };
    }
}
