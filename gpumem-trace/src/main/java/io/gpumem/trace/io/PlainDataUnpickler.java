package io.gpumem.trace.io;

import java.io.IOException;
import java.io.InputStream;
import net.razorvine.pickle.PickleException;
import net.razorvine.pickle.Unpickler;

/**
 * razorvine's {@link Unpickler} made safe for files from other people's machines: it decodes plain data only
 * (dicts, lists, tuples, sets, strings, bytes, numbers, booleans, None) and never trusts a declared length.
 *
 * <p>Invariants, checked at each opcode before razorvine acts on it:
 * <ul>
 *   <li>No opcode that would look up or call Python code runs: {@code GLOBAL}, {@code STACK_GLOBAL},
 *       {@code INST}, {@code OBJ}, {@code REDUCE}, {@code BUILD}, {@code NEWOBJ(_EX)}, the extension-registry
 *       and persistent-id opcodes are refused with {@link Refused} ("the file asks to run code").</li>
 *   <li>A length prefix (strings, bytes, byte arrays, long integers, frames) is compared with the bytes left in
 *       the input before anything is allocated, so a few-byte file cannot make the reader allocate gigabytes.
 *       Text integers ({@code INT}, {@code LONG}) longer than {@link #MAX_TEXT_INTEGER} are refused (decimal
 *       parsing is quadratic).</li>
 *   <li>Any failure inside razorvine (a wrong value type on the stack, a missing mark, an unknown opcode) comes
 *       out as {@link Refused} naming the opcode and its byte offset, never as a Java class cast.</li>
 * </ul>
 */
final class PlainDataUnpickler extends Unpickler {

    /** Longest decimal integer accepted in protocol-0 text ({@code INT}, {@code LONG}); snapshots hold 64-bit values. */
    static final int MAX_TEXT_INTEGER = 64;
    /** Longest binary long ({@code LONG4}) accepted, in bytes. */
    static final int MAX_LONG4_BYTES = 1024;

    /** A pickle refused or found malformed; the message says why and where, without the file name. */
    static final class Refused extends RuntimeException {
        private final boolean runsCode;

        Refused(String message) {
            this(message, false);
        }

        Refused(String message, boolean runsCode) {
            super(message, null, false, false);
            this.runsCode = runsCode;
        }

        /** Whether the file was refused for asking to run code (else it is truncated or corrupt). */
        boolean runsCode() {
            return runsCode;
        }
    }

    /** Reads and decodes a whole pickle whose size is known; the input is wrapped in a position counter. */
    static Object load(InputStream raw, long size) throws IOException {
        PlainDataUnpickler u = new PlainDataUnpickler(new CountingInput(raw, size));
        try {
            return u.loadCounted();
        } finally {
            u.close();
        }
    }

    private final CountingInput in;

    private PlainDataUnpickler(CountingInput in) {
        this.in = in;
    }

    private Object loadCounted() throws IOException {
        return load(in);
    }

    @Override
    protected Object dispatch(short op) throws IOException {
        long at = in.position() - 1;
        switch (op) {
            case 'c', 'i' -> throw runsCode(op, at, globalName());
            case 0x93 -> throw runsCode(op, at, stackGlobalName());
            case 'o', 'R', 'b', 0x81, 0x92, 0x82, 0x83, 0x84, 'P', 'Q' -> throw runsCode(op, at, null);
            case 'X', 'B', 'T' -> checkLength(op, at, in.peekLittleEndian(4, op == 'T'), 4);
            case 0x8d, 0x8e, 0x96 -> checkLength(op, at, in.peekLittleEndian(8, true), 8);
            case 0x95 -> checkLength(op, at, in.peekLittleEndian(8, true), 8);
            case 0x8b -> {
                long n = in.peekLittleEndian(4, true);
                checkLength(op, at, n, 4);
                if (n > MAX_LONG4_BYTES) {
                    throw new Refused("opcode LONG4 at byte " + at + " declares a " + n
                            + "-byte integer (snapshots hold 64-bit integers)");
                }
            }
            case 'I', 'L' -> {
                if (in.peekLine(MAX_TEXT_INTEGER + 2) == null) {
                    throw new Refused("opcode " + opName(op) + " at byte " + at + " holds an integer of more than "
                            + MAX_TEXT_INTEGER + " digits (snapshots hold 64-bit integers)");
                }
            }
            default -> { }
        }
        try {
            return super.dispatch(op);
        } catch (PickleException | IOException e) {
            throw new Refused("opcode " + opName(op) + " at byte " + at + ": " + message(e));
        } catch (RuntimeException e) {
            // A class cast, an empty stack or a missing mark inside razorvine: the opcode does not fit what precedes it.
            throw new Refused("opcode " + opName(op) + " at byte " + at
                    + " does not fit the values before it (" + kind(e) + ")");
        }
    }

    private static String message(Exception e) {
        return e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
    }

    private static String kind(RuntimeException e) {
        if (e instanceof ClassCastException) {
            return "wrong type of value";
        }
        if (e instanceof IndexOutOfBoundsException) {
            return "too few values";
        }
        return "malformed";
    }

    private String globalName() throws IOException {
        String module = in.peekLine(256);
        return module == null ? null : module + "." + in.peekLineAfterFirst(256);
    }

    private String stackGlobalName() {
        try {
            Object name = stack.pop();
            Object module = stack.pop();
            if (module instanceof String m && name instanceof String n && m.length() < 256 && n.length() < 256) {
                return m + "." + n;
            }
        } catch (RuntimeException ignored) {
            // fall through: the refusal does not need the name
        }
        return null;
    }

    private void checkLength(short op, long at, long declared, int prefixBytes) {
        long left = in.remaining() - prefixBytes;
        if (declared < 0) {
            throw new Refused("opcode " + opName(op) + " at byte " + at + " declares a negative length " + declared);
        }
        if (declared > left) {
            throw new Refused("opcode " + opName(op) + " at byte " + at + " declares " + declared
                    + " bytes but only " + Math.max(0, left) + " are left in the file");
        }
    }

    private static Refused runsCode(short op, long at, String what) {
        String name = opName(op) + (what == null ? "" : " " + what.replace('\n', ' '));
        return new Refused("the file asks to run code (" + name + " at byte " + at
                + "); only plain data is accepted", true);
    }

    /** The pickletools name of an opcode, for messages. */
    static String opName(short op) {
        return switch (op) {
            case '(' -> "MARK";
            case '.' -> "STOP";
            case '0' -> "POP";
            case '1' -> "POP_MARK";
            case '2' -> "DUP";
            case 'F' -> "FLOAT";
            case 'I' -> "INT";
            case 'J' -> "BININT";
            case 'K' -> "BININT1";
            case 'L' -> "LONG";
            case 'M' -> "BININT2";
            case 'N' -> "NONE";
            case 'P' -> "PERSID";
            case 'Q' -> "BINPERSID";
            case 'R' -> "REDUCE";
            case 'S' -> "STRING";
            case 'T' -> "BINSTRING";
            case 'U' -> "SHORT_BINSTRING";
            case 'V' -> "UNICODE";
            case 'X' -> "BINUNICODE";
            case 'a' -> "APPEND";
            case 'b' -> "BUILD";
            case 'c' -> "GLOBAL";
            case 'd' -> "DICT";
            case '}' -> "EMPTY_DICT";
            case 'e' -> "APPENDS";
            case 'g' -> "GET";
            case 'h' -> "BINGET";
            case 'i' -> "INST";
            case 'j' -> "LONG_BINGET";
            case 'l' -> "LIST";
            case ']' -> "EMPTY_LIST";
            case 'o' -> "OBJ";
            case 'p' -> "PUT";
            case 'q' -> "BINPUT";
            case 'r' -> "LONG_BINPUT";
            case 's' -> "SETITEM";
            case 't' -> "TUPLE";
            case ')' -> "EMPTY_TUPLE";
            case 'u' -> "SETITEMS";
            case 'G' -> "BINFLOAT";
            case 'B' -> "BINBYTES";
            case 'C' -> "SHORT_BINBYTES";
            case 0x80 -> "PROTO";
            case 0x81 -> "NEWOBJ";
            case 0x82 -> "EXT1";
            case 0x83 -> "EXT2";
            case 0x84 -> "EXT4";
            case 0x85 -> "TUPLE1";
            case 0x86 -> "TUPLE2";
            case 0x87 -> "TUPLE3";
            case 0x88 -> "NEWTRUE";
            case 0x89 -> "NEWFALSE";
            case 0x8a -> "LONG1";
            case 0x8b -> "LONG4";
            case 0x8c -> "SHORT_BINUNICODE";
            case 0x8d -> "BINUNICODE8";
            case 0x8e -> "BINBYTES8";
            case 0x8f -> "EMPTY_SET";
            case 0x90 -> "ADDITEMS";
            case 0x91 -> "FROZENSET";
            case 0x92 -> "NEWOBJ_EX";
            case 0x93 -> "STACK_GLOBAL";
            case 0x94 -> "MEMOIZE";
            case 0x95 -> "FRAME";
            case 0x96 -> "BYTEARRAY8";
            case 0x97 -> "NEXT_BUFFER";
            case 0x98 -> "READONLY_BUFFER";
            default -> String.format("0x%02x", op);
        };
    }

    /**
     * The input as razorvine reads it, counting the bytes consumed so the bytes left are always known, with a
     * look-ahead of a few bytes (length prefixes, text lines) that does not consume them.
     */
    private static final class CountingInput extends InputStream {
        private final InputStream in;
        private final long size;
        private long position;
        private final byte[] ahead = new byte[600];
        private int aheadStart;
        private int aheadEnd;

        CountingInput(InputStream in, long size) {
            this.in = in;
            this.size = size;
        }

        long position() {
            return position;
        }

        long remaining() {
            return size - position;
        }

        @Override
        public int read() throws IOException {
            if (aheadStart < aheadEnd) {
                position++;
                return ahead[aheadStart++] & 0xff;
            }
            int b = in.read();
            if (b >= 0) {
                position++;
            }
            return b;
        }

        @Override
        public int read(byte[] b, int off, int len) throws IOException {
            if (len == 0) {
                return 0;
            }
            int n;
            if (aheadStart < aheadEnd) {
                n = Math.min(len, aheadEnd - aheadStart);
                System.arraycopy(ahead, aheadStart, b, off, n);
                aheadStart += n;
            } else {
                n = in.read(b, off, len);
            }
            if (n > 0) {
                position += n;
            }
            return n;
        }

        /** Makes at least {@code n} bytes (fewer at end of input) available in the look-ahead buffer. */
        private int fill(int n) throws IOException {
            if (aheadStart > 0) {
                System.arraycopy(ahead, aheadStart, ahead, 0, aheadEnd - aheadStart);
                aheadEnd -= aheadStart;
                aheadStart = 0;
            }
            while (aheadEnd < n) {
                int r = in.read(ahead, aheadEnd, n - aheadEnd);
                if (r < 0) {
                    break;
                }
                aheadEnd += r;
            }
            return aheadEnd;
        }

        /** The next {@code n} bytes as a little-endian integer, not consumed; 0 when the input ends first. */
        long peekLittleEndian(int n, boolean signed) throws IOException {
            if (fill(n) < n) {
                return 0; // razorvine reports the truncation itself
            }
            long v = 0;
            for (int i = n - 1; i >= 0; i--) {
                v = (v << 8) | (ahead[aheadStart + i] & 0xff);
            }
            if (n == 4 && signed) {
                v = (int) v;
            }
            return v;
        }

        /** The next line (without its newline) if one ends within {@code max} bytes, else null; not consumed. */
        String peekLine(int max) throws IOException {
            int got = fill(max);
            for (int i = 0; i < got; i++) {
                if (ahead[i] == '\n') {
                    return new String(ahead, 0, i, java.nio.charset.StandardCharsets.ISO_8859_1);
                }
            }
            return got < max ? "" : null;
        }

        /** The line after the next one, for GLOBAL's "module\nname\n"; "" when not within reach. */
        String peekLineAfterFirst(int max) throws IOException {
            int got = fill(2 * max);
            int first = -1;
            for (int i = 0; i < got; i++) {
                if (ahead[i] == '\n') {
                    if (first < 0) {
                        first = i;
                    } else {
                        return new String(ahead, first + 1, i - first - 1,
                                java.nio.charset.StandardCharsets.ISO_8859_1);
                    }
                }
            }
            return "";
        }
    }
}
