package io.gpumem.trace.io;

import static io.gpumem.trace.io.PlainDataUnpickler.opName;

import io.gpumem.trace.io.PlainDataUnpickler.Refused;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.nio.channels.ReadableByteChannel;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * The input {@link PlainDataUnpickler} decodes: the bytes of one pickle, whole in an array or read from a channel in
 * chunks, and the reading of its opcodes' arguments (fixed-width integers, length prefixes, strings, bytes,
 * protocol 0's text lines, long integers). Each read takes the opcode and its byte offset only to name them when it
 * fails.
 *
 * <p>Invariants:
 * <ul>
 *   <li>{@code in[0, limit)} are the file's bytes from offset {@code base}, and {@code pos} is within them; the
 *       buffer grows only for a value longer than it.</li>
 *   <li>A length prefix (strings, bytes, byte arrays, long integers, frames) is compared with the bytes left in
 *       the input before anything is allocated. Text integers ({@code INT}, {@code LONG}) longer than
 *       {@link #MAX_TEXT_INTEGER} digits are refused (decimal parsing is quadratic).</li>
 *   <li>A read past the end of the input, or a source that ends before the length it had when reading began, is a
 *       {@link Refused}.</li>
 * </ul>
 * The decoder's superclass rather than an object it holds: its opcode switch reads {@code in[pos]} itself, and
 * through a field every opcode would cost one more load.
 */
abstract class PickleInput {

    /** Longest decimal integer accepted in protocol-0 text ({@code INT}, {@code LONG}); snapshots hold 64-bit values. */
    static final int MAX_TEXT_INTEGER = 64;

    /** The buffered part of the input: {@code in[0, limit)} are the file's bytes from offset {@code base}. */
    byte[] in;

    int limit;
    long base;
    final long end;
    private final ReadableByteChannel source;
    int pos;

    /**
     * The input of {@code length} bytes: all of them already in {@code in} when {@code source} is null, else read
     * from {@code source} into {@code in} (the first chunk's buffer) as they are needed.
     */
    PickleInput(byte[] in, long length, ReadableByteChannel source) {
        this.in = in;
        this.end = length;
        this.limit = source == null ? (int) length : 0;
        this.source = source;
    }

    /**
     * Makes at least {@code n} bytes available at {@code pos} (the caller has checked that the file has them): the
     * unread bytes move to the front of the buffer, which grows only for a value longer than it.
     */
    final void fill(int n) {
        if (source == null) {
            throw new Refused("the file ends at byte " + (base + limit) + " inside a value");
        }
        int left = limit - pos;
        if (n > in.length) {
            byte[] bigger = new byte[Math.max(n, Math.min(in.length * 2, Integer.MAX_VALUE - 8))];
            System.arraycopy(in, pos, bigger, 0, left);
            in = bigger;
        } else {
            System.arraycopy(in, pos, in, 0, left);
        }
        base += pos;
        pos = 0;
        limit = left;
        int want = (int) Math.min(in.length, end - base);
        try {
            while (limit < want) {
                int r = source.read(ByteBuffer.wrap(in, limit, want - limit));
                if (r < 0) {
                    throw new Refused("the file ends at byte " + (base + limit) + ", before the " + end
                            + " bytes it had when reading began");
                }
                limit += r;
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Makes {@code n} bytes available at {@code pos} (the caller has checked that the file has them). */
    final void ensure(int n) {
        if (limit - pos < n) {
            fill(n);
        }
    }

    /** The bytes of the file after {@code pos}. */
    final long remaining() {
        return end - base - pos;
    }

    /** Checks that {@code n} bytes follow the opcode (else the file is truncated). */
    final void need(int op, long at, long n) {
        if (n > remaining()) {
            throw new Refused("opcode " + opName((short) op) + " at byte " + at + ": the file ends inside it");
        }
        ensure((int) n);
    }

    final int u8(int op, long at) {
        need(op, at, 1);
        return in[pos++] & 0xff;
    }

    /** The next {@code n} bytes as a little-endian integer, not consumed. */
    final long littleEndian(int op, long at, int n, boolean signed) {
        need(op, at, n);
        long v = 0;
        for (int i = n - 1; i >= 0; i--) {
            v = (v << 8) | (in[pos + i] & 0xff);
        }
        if (n == 4 && signed) {
            return (int) v; // sign-extends the 32-bit value
        }
        return v;
    }

    final long littleEndianConsumed(int op, long at, int n, boolean signed) {
        long v = littleEndian(op, at, n, signed);
        pos += n;
        return v;
    }

    /** Reads an {@code n}-byte length prefix, checks the length against the bytes left, and consumes the prefix. */
    final int lengthPrefix(int op, long at, int n, boolean signed) {
        long declared = littleEndian(op, at, n, signed);
        checkLength(op, at, declared, n);
        pos += n;
        return (int) declared;
    }

    final void checkLength(int op, long at, long declared, int prefixBytes) {
        long left = remaining() - prefixBytes;
        if (declared < 0) {
            throw new Refused(
                    "opcode " + opName((short) op) + " at byte " + at + " declares a negative length " + declared);
        }
        if (declared > left) {
            throw new Refused("opcode " + opName((short) op) + " at byte " + at + " declares " + declared
                    + " bytes but only " + Math.max(0, left) + " are left in the file");
        }
    }

    final String utf8(int op, long at, int n) {
        need(op, at, n);
        String s = SnapshotKeys.canonical(new String(in, pos, n, StandardCharsets.UTF_8));
        pos += n;
        return s;
    }

    final String latin1(int op, long at, int n) {
        need(op, at, n);
        String s = new String(in, pos, n, StandardCharsets.ISO_8859_1);
        pos += n;
        return s;
    }

    final byte[] bytes(int op, long at, int n) {
        need(op, at, n);
        byte[] b = Arrays.copyOfRange(in, pos, pos + n);
        pos += n;
        return b;
    }

    /** A protocol-0 text argument: the bytes up to the next newline (within {@code max}), consumed with it. */
    final String line(int op, long at, long max) {
        long left = remaining();
        int scan = (int) Math.min(Math.min(left, max + 1), Integer.MAX_VALUE - 16);
        ensure(scan);
        for (int i = pos; i < pos + scan; i++) {
            if (in[i] == '\n') {
                String s = new String(in, pos, i - pos, StandardCharsets.ISO_8859_1);
                pos = i + 1;
                return s;
            }
        }
        if (scan < left) {
            throw new Refused(
                    "opcode " + opName((short) op) + " at byte " + at + " holds a line of more than " + max + " bytes");
        }
        throw new Refused("opcode " + opName((short) op) + " at byte " + at + ": the file ends inside it");
    }

    /** {@code LONG1}/{@code LONG4}: {@code n} bytes of two's complement, little-endian. */
    final Number decodeLong(int op, long at, int n) {
        need(op, at, n);
        if (n == 0) {
            pos += n;
            return 0L;
        }
        if (n <= 8) {
            long v = 0;
            for (int i = n - 1; i >= 0; i--) {
                v = (v << 8) | (in[pos + i] & 0xff);
            }
            int unused = 64 - 8 * n;
            v = (v << unused) >> unused; // sign-extend
            pos += n;
            return v;
        }
        byte[] be = new byte[n];
        for (int i = 0; i < n; i++) {
            be[n - 1 - i] = in[pos + i];
        }
        pos += n;
        BigInteger b = new BigInteger(be);
        return b.bitLength() < 64 ? (Number) b.longValue() : b;
    }

    /** {@code INT} ("I01" and "I00" are protocol 0's True and False) and {@code LONG} (with a trailing 'L'). */
    final Object textInteger(int op, long at, boolean isLong) {
        long left = remaining();
        int scan = (int) Math.min(left, MAX_TEXT_INTEGER + 2);
        ensure(scan);
        boolean lineEnds = false;
        for (int i = pos; i < pos + scan; i++) {
            if (in[i] == '\n') {
                lineEnds = true;
                break;
            }
        }
        if (!lineEnds && scan < left) {
            throw new Refused("opcode " + opName((short) op) + " at byte " + at + " holds an integer of more than "
                    + MAX_TEXT_INTEGER + " digits (snapshots hold 64-bit integers)");
        }
        return ProtocolZeroText.integer(line(op, at, MAX_TEXT_INTEGER + 2), isLong);
    }
}
