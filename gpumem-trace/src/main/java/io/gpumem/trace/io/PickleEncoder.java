package io.gpumem.trace.io;

import java.io.IOException;
import java.io.OutputStream;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * A small pickle (protocol 2) encoder for the plain data PyTorch snapshots hold: dicts, lists, tuples, str,
 * int, float, bool and None, as Java {@link Map}s, {@link List}s, {@code Object[]}, strings, numbers, booleans
 * and {@code null}; and, for the unknown keys a reader kept, every other value {@link PlainDataUnpickler} gives:
 * bytes ({@code byte[]}), sets ({@link HashSet}), frozensets (any other {@link Set}) and integers of any
 * length, so that whatever was read is written back.
 *
 * <p>Why not a general pickler: snapshots repeat the same strings and frame lists tens of thousands of times.
 * This encoder memoizes strings by value and containers by identity (a repeated object is written once and
 * referenced with {@code BINGET} after), and never memoizes numbers, which keeps files about the size of
 * PyTorch's own and writes them in one pass without per-value bookkeeping. Tuples are memoized by identity as
 * Python's pickler does (a tuple shared twice at each of forty levels is forty tuples, not 2^40), including its
 * way with a tuple reached again through its own items (the items are popped and the memoized tuple fetched).
 * Any other type is rejected, as is a value nested too deeply to encode.
 *
 * <p>Opcodes used: PROTO, EMPTY_DICT/MARK/SETITEMS, EMPTY_LIST/APPENDS, EMPTY_TUPLE/TUPLE1-3/TUPLE,
 * BININT1/BININT2/BININT/LONG1/LONG4, BINFLOAT, BINUNICODE, NEWTRUE/NEWFALSE, NONE, BINPUT/LONG_BINPUT,
 * BINGET/LONG_BINGET, POP/POP_MARK, STOP; for values no snapshot of PyTorch's holds, the later protocols'
 * SHORT_BINBYTES/BINBYTES (3) and EMPTY_SET/ADDITEMS/FROZENSET (4), which Python's unpickler reads whatever the
 * PROTO header says. Python's standard {@code pickle.load} reads the result.
 */
final class PickleEncoder {

    private static final int BATCH = 1000;

    private final OutputStream out;
    private final byte[] buf = new byte[1 << 16];
    private int pos;
    private final HashMap<String, Integer> strings = new HashMap<>();
    private final IdentityHashMap<Object, Integer> containers = new IdentityHashMap<>();
    private int nextMemo;

    /**
     * A list whose items are made as the encoder reaches them and never referred to again (a device trace's entry
     * dicts, made from its records): a dict among them gets its memo slot as any other (the bytes are the same) but
     * is not remembered, so the encoder holds none of them and a trace of millions of entries streams out.
     */
    interface FreshItems {}

    PickleEncoder(OutputStream out) {
        this.out = out;
    }

    /** Writes {@code root} as a complete pickle (PROTO 2 ... STOP) and flushes the buffer. */
    void dump(Object root) throws IOException {
        put(0x80);
        put(2);
        try {
            save(root);
        } catch (StackOverflowError e) {
            // a value read from a file (an unknown key's) can nest deeper than a recursive encoder goes
            throw new IllegalArgumentException("a value is nested too deeply to pickle");
        }
        put('.');
        flushBuffer();
    }

    private void save(Object o) throws IOException {
        switch (o) {
            case null -> put('N');
            case String s -> saveString(s);
            case Long l -> saveLong(l);
            case Integer i -> saveLong(i);
            case Short s -> saveLong(s);
            case Byte b -> saveLong(b);
            case Boolean b -> put(b ? 0x88 : 0x89);
            case Double d -> saveDouble(d);
            case Float f -> saveDouble(f);
            case BigInteger b -> saveBigInteger(b);
            case Map<?, ?> m -> saveMap(m);
            case List<?> l -> saveList(l);
            case Object[] t -> saveTuple(t);
            case byte[] b -> saveBytes(b);
            case Set<?> set -> saveSet(set);
            default ->
                throw new IllegalArgumentException(
                        "cannot pickle a " + o.getClass().getName());
        }
    }

    private boolean memoized(Object o) throws IOException {
        Integer id = containers.get(o);
        if (id == null) {
            return false;
        }
        get(id);
        return true;
    }

    private void remember(Object o) throws IOException {
        int id = nextMemo++;
        containers.put(o, id);
        memoPut(id);
    }

    private void saveMap(Map<?, ?> m) throws IOException {
        saveMap(m, true);
    }

    private void saveMap(Map<?, ?> m, boolean keep) throws IOException {
        if (keep && memoized(m)) {
            return;
        }
        put('}');
        if (keep) {
            remember(m);
        } else {
            memoPut(nextMemo++);
        }
        int n = 0;
        for (Map.Entry<?, ?> e : m.entrySet()) {
            if (n % BATCH == 0) {
                if (n > 0) {
                    put('u');
                }
                put('(');
            }
            save(e.getKey());
            save(e.getValue());
            n++;
        }
        if (n > 0) {
            put('u');
        }
    }

    private void saveList(List<?> l) throws IOException {
        if (memoized(l)) {
            return;
        }
        put(']');
        remember(l);
        boolean fresh = l instanceof FreshItems;
        int n = 0;
        for (Object v : l) {
            if (n % BATCH == 0) {
                if (n > 0) {
                    put('e');
                }
                put('(');
            }
            if (fresh && v instanceof Map<?, ?> m) {
                saveMap(m, false);
            } else {
                save(v);
            }
            n++;
        }
        if (n > 0) {
            put('e');
        }
    }

    /**
     * A tuple, memoized by identity after its items as Python's {@code save_tuple} does: when writing the items
     * memoized the tuple itself (it is reached again through one of them), the items are popped and the memoized
     * tuple fetched instead.
     */
    private void saveTuple(Object[] t) throws IOException {
        if (t.length == 0) {
            put(')');
            return;
        }
        if (memoized(t)) {
            return;
        }
        boolean small = t.length <= 3;
        if (!small) {
            put('(');
        }
        for (Object v : t) {
            save(v);
        }
        Integer id = containers.get(t);
        if (id != null) {
            if (small) {
                for (int i = 0; i < t.length; i++) {
                    put('0');
                }
            } else {
                put('1');
            }
            get(id);
            return;
        }
        put(small ? 0x84 + t.length : 't');
        remember(t);
    }

    /** Bytes: {@code SHORT_BINBYTES} or {@code BINBYTES} (protocol 3), not memoized. */
    private void saveBytes(byte[] b) throws IOException {
        if (b.length < 256) {
            put('C');
            put(b.length);
        } else {
            put('B');
            int32(b.length);
        }
        bytes(b);
    }

    /**
     * A set ({@link HashSet}: {@code EMPTY_SET} and {@code ADDITEMS}) or any other {@link Set}, the
     * decoder's frozensets ({@code FROZENSET}), memoized by identity (protocol 4 opcodes).
     */
    private void saveSet(Set<?> set) throws IOException {
        if (memoized(set)) {
            return;
        }
        if (set instanceof HashSet<?>) {
            put(0x8f);
            remember(set);
            int n = 0;
            for (Object v : set) {
                if (n % BATCH == 0) {
                    if (n > 0) {
                        put(0x90);
                    }
                    put('(');
                }
                save(v);
                n++;
            }
            if (n > 0) {
                put(0x90);
            }
            return;
        }
        put('(');
        for (Object v : set) {
            save(v);
        }
        put(0x91);
        remember(set);
    }

    private void saveString(String s) throws IOException {
        Integer id = strings.get(s);
        if (id != null) {
            get(id);
            return;
        }
        byte[] b = s.getBytes(StandardCharsets.UTF_8);
        put('X');
        int32(b.length);
        bytes(b);
        int memo = nextMemo++;
        strings.put(s, memo);
        memoPut(memo);
    }

    private void saveLong(long v) throws IOException {
        if (v >= 0 && v < 256) {
            put('K');
            put((int) v);
        } else if (v >= 0 && v < 65536) {
            put('M');
            put((int) (v & 0xff));
            put((int) (v >>> 8));
        } else if (v >= Integer.MIN_VALUE && v <= Integer.MAX_VALUE) {
            put('J');
            int32((int) v);
        } else {
            // LONG1: little-endian two's complement, as few bytes as keep the sign.
            int n = 8;
            while (n > 1) {
                long top = v >> ((n - 1) * 8 - 1);
                if (top == 0 || top == -1) {
                    n--;
                } else {
                    break;
                }
            }
            put(0x8a);
            put(n);
            for (int i = 0; i < n; i++) {
                put((int) ((v >>> (8 * i)) & 0xff));
            }
        }
    }

    private void saveBigInteger(BigInteger b) throws IOException {
        if (b.bitLength() < 64) {
            saveLong(b.longValue());
            return;
        }
        byte[] be = b.toByteArray();
        if (be.length > 255) {
            put(0x8b); // LONG4
            int32(be.length);
        } else {
            put(0x8a);
            put(be.length);
        }
        for (int i = be.length - 1; i >= 0; i--) {
            put(be[i] & 0xff);
        }
    }

    private void saveDouble(double d) throws IOException {
        put('G');
        long bits = Double.doubleToLongBits(d);
        for (int i = 7; i >= 0; i--) {
            put((int) ((bits >>> (8 * i)) & 0xff));
        }
    }

    private void memoPut(int id) throws IOException {
        if (id < 256) {
            put('q');
            put(id);
        } else {
            put('r');
            int32(id);
        }
    }

    private void get(int id) throws IOException {
        if (id < 256) {
            put('h');
            put(id);
        } else {
            put('j');
            int32(id);
        }
    }

    private void int32(int v) throws IOException {
        put(v & 0xff);
        put((v >>> 8) & 0xff);
        put((v >>> 16) & 0xff);
        put((v >>> 24) & 0xff);
    }

    private void bytes(byte[] b) throws IOException {
        if (b.length > buf.length - pos) {
            flushBuffer();
            if (b.length > buf.length) {
                out.write(b);
                return;
            }
        }
        System.arraycopy(b, 0, buf, pos, b.length);
        pos += b.length;
    }

    private void put(int b) throws IOException {
        if (pos == buf.length) {
            flushBuffer();
        }
        buf[pos++] = (byte) b;
    }

    private void flushBuffer() throws IOException {
        out.write(buf, 0, pos);
        pos = 0;
    }
}
