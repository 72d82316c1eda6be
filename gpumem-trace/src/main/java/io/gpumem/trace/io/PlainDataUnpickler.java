package io.gpumem.trace.io;

import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * A pickle decoder for files from other people's machines: it reads plain data only (dicts, lists, tuples, sets,
 * strings, bytes, numbers, booleans, None) straight from the file's bytes, and never trusts a declared length.
 *
 * <p>Values are what razorvine's {@code Unpickler} gives for the same opcodes (the converter and the snapshot
 * writer were built on those): dicts are {@link HashMap}s, lists {@link ArrayList}s, tuples {@code Object[]},
 * sets {@link HashSet}s (frozensets unmodifiable), {@code BININT*} {@link Integer}s, {@code LONG1/LONG4}
 * {@link Long}s or, past 64 bits, {@link BigInteger}s, bytes {@code byte[]}. A test replays every shared trace
 * through both and compares the trees.
 *
 * <p>Why not razorvine itself: it reads byte by byte through an {@code InputStream}, keeps the memo in a
 * {@code HashMap<Integer, Object>} (a boxed key and a hash lookup per {@code BINGET}, the most frequent opcode of a
 * snapshot) and copies every length-prefixed value through a temporary array. Here the input is one array, the
 * stack and the memo are arrays, and an opcode allocates only the value it produces.
 *
 * <p>Invariants:
 * <ul>
 *   <li>No opcode that would look up or call Python code runs: {@code GLOBAL}, {@code STACK_GLOBAL},
 *       {@code INST}, {@code OBJ}, {@code REDUCE}, {@code BUILD}, {@code NEWOBJ(_EX)}, the extension-registry
 *       and persistent-id opcodes are refused with {@link Refused} ("the file asks to run code").</li>
 *   <li>A length prefix (strings, bytes, byte arrays, long integers, frames) is compared with the bytes left in
 *       the input before anything is allocated. Text integers ({@code INT}, {@code LONG}) longer than
 *       {@link #MAX_TEXT_INTEGER} digits are refused (decimal parsing is quadratic).</li>
 *   <li>A dict key or set member that Python could not hash (a list, dict or set) is refused at the opcode that
 *       inserts it: Java would hash it by content, endlessly when it contains itself.</li>
 *   <li>Every failure (a wrong value type on the stack, a missing mark, a memo slot never stored, an unknown
 *       opcode, the end of the input) is a {@link Refused} naming the opcode and its byte offset.</li>
 * </ul>
 * Not thread-safe; one instance decodes one input.
 */
final class PlainDataUnpickler {

    /** Longest decimal integer accepted in protocol-0 text ({@code INT}, {@code LONG}); snapshots hold 64-bit values. */
    static final int MAX_TEXT_INTEGER = 64;
    /** Longest binary long ({@code LONG4}) accepted, in bytes. */
    static final int MAX_LONG4_BYTES = 1024;
    /** Memo indices below this (or below the input length) live in an array; others, if any, in a map. */
    private static final int DENSE_MEMO = 1 << 16;

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

    /** A failure of the opcode being decoded whose message the dispatcher completes ("does not fit ..."). */
    private static final class Misfit extends RuntimeException {
        Misfit(String kind) {
            super(kind, null, false, false);
        }
    }

    /** Decodes the whole pickle in {@code bytes[0, length)}. */
    static Object load(byte[] bytes, int length) {
        return new PlainDataUnpickler(bytes, length).run();
    }

    /** Marks the memo slots never stored (null is a value). */
    private static final Object ABSENT = new Object();

    private final byte[] in;
    private final int end;
    private int pos;
    private Object[] stack = new Object[64];
    private int top;
    private int[] marks = new int[16];
    private int markCount;
    private Object[] memo;
    private Map<Long, Object> sparseMemo;

    private PlainDataUnpickler(byte[] in, int length) {
        this.in = in;
        this.end = length;
        this.memo = new Object[64];
        Arrays.fill(memo, ABSENT);
    }

    private Object run() {
        while (pos < end) {
            int at = pos;
            int op = in[pos++] & 0xff;
            try {
                if (op == '.') {
                    if (top == 0) {
                        throw new Misfit("too few values");
                    }
                    return stack[--top];
                }
                dispatch(op, at);
            } catch (Misfit m) {
                throw new Refused("opcode " + opName((short) op) + " at byte " + at
                        + " does not fit the values before it (" + m.getMessage() + ")");
            } catch (ClassCastException e) {
                throw new Refused("opcode " + opName((short) op) + " at byte " + at
                        + " does not fit the values before it (wrong type of value)");
            }
        }
        throw new Refused("the file ends at byte " + end + " before its STOP opcode");
    }

    private void dispatch(int op, int at) {
        switch (op) {
            case 0x80 -> { // PROTO
                need(op, at, 1);
                pos++;
            }
            case 0x95 -> { // FRAME: ignored, length checked
                checkLength(op, at, littleEndian(op, at, 8, true), 8);
                pos += 8;
            }
            case '(' -> { // MARK
                if (markCount == marks.length) {
                    marks = Arrays.copyOf(marks, markCount * 2);
                }
                marks[markCount++] = top;
            }
            case 'N' -> push(null);
            case 0x88 -> push(true);
            case 0x89 -> push(false);
            case 'K' -> push(Integer.valueOf(u8(op, at))); // BININT1
            case 'M' -> { // BININT2
                need(op, at, 2);
                push(Integer.valueOf((in[pos] & 0xff) | (in[pos + 1] & 0xff) << 8));
                pos += 2;
            }
            case 'J' -> push(Integer.valueOf((int) littleEndianConsumed(op, at, 4, true))); // BININT
            case 0x8a -> push(decodeLong(op, at, u8(op, at))); // LONG1
            case 'G' -> { // BINFLOAT (big-endian)
                need(op, at, 8);
                long bits = 0;
                for (int i = 0; i < 8; i++) {
                    bits = bits << 8 | (in[pos + i] & 0xff);
                }
                pos += 8;
                push(Double.longBitsToDouble(bits));
            }
            case 0x8c -> push(utf8(op, at, u8(op, at))); // SHORT_BINUNICODE
            case 'X' -> push(utf8(op, at, lengthPrefix(op, at, 4, false))); // BINUNICODE
            case ']' -> push(new ArrayList<>()); // EMPTY_LIST
            case 'a' -> { // APPEND
                Object v = pop();
                asList(peek()).add(v);
            }
            case 'e' -> { // APPENDS
                int from = popMark();
                if (from == 0) {
                    throw new Misfit("too few values");
                }
                List<Object> list = asList(stack[from - 1]);
                if (list instanceof ArrayList<Object> al) {
                    al.ensureCapacity(al.size() + top - from);
                }
                addRange(list, from);
            }
            case ')' -> push(new Object[0]); // EMPTY_TUPLE
            case 0x85 -> push(new Object[] {pop()}); // TUPLE1
            case 0x86 -> { // TUPLE2
                Object b = pop();
                Object a = pop();
                push(new Object[] {a, b});
            }
            case 0x87 -> { // TUPLE3
                Object c = pop();
                Object b = pop();
                Object a = pop();
                push(new Object[] {a, b, c});
            }
            case '}' -> push(new HashMap<>(0)); // EMPTY_DICT
            case 's' -> { // SETITEM
                Object v = pop();
                Object k = pop();
                Map<Object, Object> m = asMap(peek());
                m.put(hashable(op, at, k, "dict key"), v);
            }
            case 'u' -> { // SETITEMS
                int from = popMark();
                if (from == 0) {
                    throw new Misfit("too few values");
                }
                setItems(op, at, asMap(stack[from - 1]), from);
            }
            case 'h' -> push(memoGet(u8(op, at))); // BINGET
            case 'j' -> push(memoGet(littleEndianConsumed(op, at, 4, false))); // LONG_BINGET
            case 'q' -> memoPut(u8(op, at), peek()); // BINPUT
            case 'r' -> memoPut(littleEndianConsumed(op, at, 4, false), peek()); // LONG_BINPUT
            case 0x94 -> memoPut(memoSize, peek()); // MEMOIZE: index len(memo)
            default -> rare(op, at);
        }
    }

    /** The opcodes a snapshot rarely or never holds (protocol 0 text, sets, bytes, refusals): kept out of the hot switch. */
    private void rare(int op, int at) {
        switch (op) {
            case '0' -> { // POP: a value, else the mark
                if (markCount > 0 && marks[markCount - 1] == top) {
                    markCount--;
                } else {
                    pop();
                }
            }
            case '1' -> top = popMark(); // POP_MARK
            case '2' -> push(peek()); // DUP
            case 0x8b -> { // LONG4
                long n = littleEndian(op, at, 4, true);
                checkLength(op, at, n, 4);
                if (n > MAX_LONG4_BYTES) {
                    throw new Refused("opcode LONG4 at byte " + at + " declares a " + n
                            + "-byte integer (snapshots hold 64-bit integers)");
                }
                pos += 4;
                push(decodeLong(op, at, (int) n));
            }
            case 'I' -> push(textInteger(op, at, false)); // INT
            case 'L' -> push(textInteger(op, at, true)); // LONG
            case 'F' -> { // FLOAT
                String line = line(op, at, 256);
                try {
                    push(Double.valueOf(line));
                } catch (NumberFormatException e) {
                    throw new Misfit("not a float: " + shorten(line));
                }
            }
            case 0x8d -> push(utf8(op, at, lengthPrefix(op, at, 8, true))); // BINUNICODE8
            case 'V' -> push(rawUnicodeEscape(line(op, at, end - pos))); // UNICODE
            case 'U' -> push(latin1(op, at, u8(op, at))); // SHORT_BINSTRING
            case 'T' -> push(latin1(op, at, lengthPrefix(op, at, 4, true))); // BINSTRING
            case 'S' -> push(quotedString(line(op, at, end - pos))); // STRING
            case 'C' -> push(bytes(op, at, u8(op, at))); // SHORT_BINBYTES
            case 'B' -> push(bytes(op, at, lengthPrefix(op, at, 4, false))); // BINBYTES
            case 0x8e, 0x96 -> push(bytes(op, at, lengthPrefix(op, at, 8, true))); // BINBYTES8, BYTEARRAY8
            case 'l' -> { // LIST
                int from = popMark();
                ArrayList<Object> list = new ArrayList<>(top - from);
                addRange(list, from);
                push(list);
            }
            case 't' -> { // TUPLE
                int from = popMark();
                Object[] t = Arrays.copyOfRange(stack, from, top);
                clearTo(from);
                push(t);
            }
            case 'd' -> { // DICT
                int from = popMark();
                HashMap<Object, Object> m = new HashMap<>(top - from);
                putRange(op, at, m, from);
                push(m);
            }
            case 0x8f -> push(new HashSet<>()); // EMPTY_SET
            case 0x90 -> { // ADDITEMS
                int from = popMark();
                if (from == 0) {
                    throw new Misfit("too few values");
                }
                Object target = stack[from - 1];
                if (!(target instanceof HashSet<?>)) {
                    throw new Misfit("wrong type of value");
                }
                @SuppressWarnings("unchecked")
                Set<Object> set = (Set<Object>) target;
                for (int i = from; i < top; i++) {
                    set.add(hashable(op, at, stack[i], "set member"));
                }
                clearTo(from);
            }
            case 0x91 -> { // FROZENSET
                int from = popMark();
                Set<Object> set = new HashSet<>();
                for (int i = from; i < top; i++) {
                    set.add(hashable(op, at, stack[i], "set member"));
                }
                clearTo(from);
                push(Collections.unmodifiableSet(set));
            }
            case 'g' -> push(memoGet(memoIndexLine(op, at))); // GET
            case 'p' -> memoPut(memoIndexLine(op, at), peek()); // PUT
            case 'c', 'i' -> throw runsCode(op, at, globalName()); // GLOBAL, INST
            case 0x93 -> throw runsCode(op, at, stackGlobalName()); // STACK_GLOBAL
            case 'o', 'R', 'b', 0x81, 0x92, 0x82, 0x83, 0x84, 'P', 'Q' -> throw runsCode(op, at, null);
            default ->
                throw new Refused("opcode " + opName((short) op) + " at byte " + at + ": not a plain-data opcode");
        }
    }

    /** How many memo slots are stored ({@code MEMOIZE} stores at this index, as Python's {@code len(memo)}). */
    private long memoSize;

    // ---------------------------------------------------------------- stack

    private void push(Object v) {
        if (top == stack.length) {
            stack = Arrays.copyOf(stack, top * 2);
        }
        stack[top++] = v;
    }

    private Object pop() {
        if (top == 0 || (markCount > 0 && marks[markCount - 1] == top)) {
            throw new Misfit("too few values");
        }
        Object v = stack[--top];
        stack[top] = null;
        return v;
    }

    private Object peek() {
        if (top == 0 || (markCount > 0 && marks[markCount - 1] == top)) {
            throw new Misfit("too few values");
        }
        return stack[top - 1];
    }

    /** Pops the innermost mark; returns the stack height it was set at (the values above it are the operands). */
    private int popMark() {
        if (markCount == 0) {
            throw new Misfit("no mark");
        }
        return marks[--markCount];
    }

    private void clearTo(int from) {
        Arrays.fill(stack, from, top, null);
        top = from;
    }

    private void addRange(List<Object> list, int from) {
        for (int i = from; i < top; i++) {
            list.add(stack[i]);
        }
        clearTo(from);
    }

    private void putRange(int op, int at, Map<Object, Object> m, int from) {
        if (((top - from) & 1) != 0) {
            throw new Misfit("a key without a value");
        }
        for (int i = from; i < top; i += 2) {
            m.put(hashable(op, at, stack[i], "dict key"), stack[i + 1]);
        }
        clearTo(from);
    }

    /**
     * {@code SETITEMS} as razorvine does it, so that a dict iterates in the same order as before: the pairs go
     * into a fresh map from the last to the first, which is then added to the target in one {@code putAll}
     * (a {@link HashMap}'s iteration order depends on its table size, which {@code putAll} chooses at once).
     */
    private void setItems(int op, int at, Map<Object, Object> target, int from) {
        if (((top - from) & 1) != 0) {
            throw new Misfit("a key without a value");
        }
        HashMap<Object, Object> pairs = new HashMap<>();
        for (int i = top - 2; i >= from; i -= 2) {
            pairs.put(hashable(op, at, stack[i], "dict key"), stack[i + 1]);
        }
        target.putAll(pairs);
        clearTo(from);
    }

    @SuppressWarnings("unchecked")
    private static List<Object> asList(Object o) {
        if (!(o instanceof List<?>)) {
            throw new Misfit("wrong type of value");
        }
        return (List<Object>) o;
    }

    @SuppressWarnings("unchecked")
    private static Map<Object, Object> asMap(Object o) {
        if (!(o instanceof HashMap<?, ?>)) {
            throw new Misfit("wrong type of value");
        }
        return (Map<Object, Object>) o;
    }

    /** {@code k} if Python could hash it; a list, dict or (mutable) set is refused. */
    private static Object hashable(int op, int at, Object k, String what) {
        if (k instanceof List<?> || k instanceof Map<?, ?> || k instanceof HashSet<?>) {
            throw new Refused("opcode " + opName((short) op) + " at byte " + at + ": a " + what + " of type "
                    + PytorchSnapshotReader.typeName(k).replace("HashSet", "set") + " (unhashable in Python)");
        }
        return k;
    }

    // ---------------------------------------------------------------- memo

    private Object memoGet(long index) {
        Object v;
        if (index >= 0 && index < memo.length) {
            v = memo[(int) index];
        } else {
            v = sparseMemo == null ? ABSENT : sparseMemo.getOrDefault(index, ABSENT);
        }
        if (v == ABSENT) {
            throw new Misfit("memo slot " + index + " was never stored");
        }
        return v;
    }

    private void memoPut(long index, Object v) {
        if (index < 0) {
            throw new Misfit("negative memo index");
        }
        if (index >= memo.length && (index < DENSE_MEMO || index < end)) {
            int old = memo.length;
            memo = Arrays.copyOf(memo, (int) Math.max(index + 1, Math.min((long) old * 2, Integer.MAX_VALUE - 8)));
            Arrays.fill(memo, old, memo.length, ABSENT);
        }
        if (index < memo.length) {
            if (memo[(int) index] == ABSENT) {
                memoSize++;
            }
            memo[(int) index] = v;
        } else {
            if (sparseMemo == null) {
                sparseMemo = new HashMap<>();
            }
            if (!sparseMemo.containsKey(index)) {
                memoSize++;
            }
            sparseMemo.put(index, v);
        }
    }

    private long memoIndexLine(int op, int at) {
        String line = line(op, at, 32);
        try {
            return Long.parseLong(line.strip());
        } catch (NumberFormatException e) {
            throw new Misfit("not a memo index: " + shorten(line));
        }
    }

    // ---------------------------------------------------------------- input

    /** Checks that {@code n} bytes follow the opcode (else the file is truncated). */
    private void need(int op, int at, long n) {
        if (n > end - pos) {
            throw new Refused("opcode " + opName((short) op) + " at byte " + at + ": the file ends inside it");
        }
    }

    private int u8(int op, int at) {
        need(op, at, 1);
        return in[pos++] & 0xff;
    }

    /** The next {@code n} bytes as a little-endian integer, not consumed. */
    private long littleEndian(int op, int at, int n, boolean signed) {
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

    private long littleEndianConsumed(int op, int at, int n, boolean signed) {
        long v = littleEndian(op, at, n, signed);
        pos += n;
        return v;
    }

    /** Reads an {@code n}-byte length prefix, checks the length against the bytes left, and consumes the prefix. */
    private int lengthPrefix(int op, int at, int n, boolean signed) {
        long declared = littleEndian(op, at, n, signed);
        checkLength(op, at, declared, n);
        pos += n;
        return (int) declared;
    }

    private void checkLength(int op, int at, long declared, int prefixBytes) {
        long left = (long) end - pos - prefixBytes;
        if (declared < 0) {
            throw new Refused(
                    "opcode " + opName((short) op) + " at byte " + at + " declares a negative length " + declared);
        }
        if (declared > left) {
            throw new Refused("opcode " + opName((short) op) + " at byte " + at + " declares " + declared
                    + " bytes but only " + Math.max(0, left) + " are left in the file");
        }
    }

    private String utf8(int op, int at, int n) {
        need(op, at, n);
        String s = new String(in, pos, n, StandardCharsets.UTF_8);
        pos += n;
        return s;
    }

    private String latin1(int op, int at, int n) {
        need(op, at, n);
        String s = new String(in, pos, n, StandardCharsets.ISO_8859_1);
        pos += n;
        return s;
    }

    private byte[] bytes(int op, int at, int n) {
        need(op, at, n);
        byte[] b = Arrays.copyOfRange(in, pos, pos + n);
        pos += n;
        return b;
    }

    /** A protocol-0 text argument: the bytes up to the next newline (within {@code max}), consumed with it. */
    private String line(int op, int at, int max) {
        int limit = (int) Math.min(end, (long) pos + max + 1);
        for (int i = pos; i < limit; i++) {
            if (in[i] == '\n') {
                String s = new String(in, pos, i - pos, StandardCharsets.ISO_8859_1);
                pos = i + 1;
                return s;
            }
        }
        if (limit < end) {
            throw new Refused(
                    "opcode " + opName((short) op) + " at byte " + at + " holds a line of more than " + max + " bytes");
        }
        throw new Refused("opcode " + opName((short) op) + " at byte " + at + ": the file ends inside it");
    }

    /** {@code LONG1}/{@code LONG4}: {@code n} bytes of two's complement, little-endian. */
    private Number decodeLong(int op, int at, int n) {
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
    private Object textInteger(int op, int at, boolean isLong) {
        int limit = (int) Math.min(end, (long) pos + MAX_TEXT_INTEGER + 2);
        boolean lineEnds = false;
        for (int i = pos; i < limit; i++) {
            if (in[i] == '\n') {
                lineEnds = true;
                break;
            }
        }
        if (!lineEnds && limit < end) {
            throw new Refused("opcode " + opName((short) op) + " at byte " + at + " holds an integer of more than "
                    + MAX_TEXT_INTEGER + " digits (snapshots hold 64-bit integers)");
        }
        String s = line(op, at, MAX_TEXT_INTEGER + 2).strip();
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

    /** {@code STRING}'s argument: a quoted Python 2 string literal with backslash escapes. */
    private static String quotedString(String s) {
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
    private static String rawUnicodeEscape(String s) {
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

    private static String shorten(String s) {
        return s.length() <= 32 ? s : s.substring(0, 32) + "...";
    }

    // ---------------------------------------------------------------- refusals

    private String globalName() {
        int save = pos;
        try {
            String module = line('c', 0, 256);
            String name = line('c', 0, 256);
            return module + "." + name;
        } catch (Refused e) {
            return null;
        } finally {
            pos = save;
        }
    }

    private String stackGlobalName() {
        if (top >= 2
                && stack[top - 2] instanceof String m
                && stack[top - 1] instanceof String n
                && m.length() < 256
                && n.length() < 256) {
            return m + "." + n;
        }
        return null;
    }

    private static Refused runsCode(int op, int at, String what) {
        String name = opName((short) op) + (what == null ? "" : " " + what.replace('\n', ' '));
        return new Refused(
                "the file asks to run code (" + name + " at byte " + at + "); only plain data is accepted", true);
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
}
