package io.gpumem.trace.io;

import java.math.BigInteger;
import java.nio.channels.ReadableByteChannel;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.jspecify.annotations.Nullable;

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
 * <p>With a {@link TraceSink}, the items of each device trace list go to the sink as they are appended instead of
 * into the list, and a plain entry among them is decoded straight into a {@link PlainEntryDecoder.PlainEntry}
 * without a dict ({@link PlainEntryDecoder}, which shares this decoder's memo). Once such an entry is handed over,
 * the memo slot of its own frame list holds the stack the sink made of it instead (see {@link #handOver}): with a
 * sink, a value named again is not always what razorvine would give, which is what keeps a recording's lists from
 * outliving the reading.
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
 *   <li>No declared length is trusted: the input ({@link PickleInput}) checks each against the bytes left before
 *       anything is allocated.</li>
 *   <li>A dict key or set member that Python could not hash (a list, dict or set) is refused at the opcode that
 *       inserts it: Java would hash it by content, endlessly when it contains itself.</li>
 *   <li>Every failure (a wrong value type on the stack, a missing mark, a memo slot never stored, an unknown
 *       opcode, the end of the input) is a {@link Refused} naming the opcode and its byte offset.</li>
 * </ul>
 * Not thread-safe; one instance decodes one input.
 */
final class PlainDataUnpickler extends PickleInput {

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
    static final class Misfit extends RuntimeException {
        Misfit(String kind) {
            super(kind, null, false, false);
        }
    }

    /**
     * Where the entries of a snapshot's device traces go as they are decoded. A list is recognised as
     * {@code device_traces[d]} when values are appended to it while it is pending, as the value of the key
     * {@code device_traces} (possibly behind other device lists), among the items of the top-level dict being
     * built; its entries are then handed over one by one instead of being added to it, so that no file-sized tree of
     * entry dicts is ever held (the list itself stays empty).
     */
    interface TraceSink {
        /** Opens the list recognised as {@code device_traces[device]}; what it returns takes its entries, in order. */
        EntrySink open(Object list, int device);
    }

    /** Takes the values appended to one device trace list. */
    interface EntrySink {
        /** The {@code index}-th value appended (counting from 0). */
        void entry(Object value, int index);
    }

    /** Decodes the whole pickle in {@code bytes[0, length)}. */
    static Object load(byte[] bytes, int length) {
        return new PlainDataUnpickler(bytes, length, null, null).run();
    }

    /** Decodes the whole pickle in {@code bytes[0, length)}, handing device trace entries to {@code sink}. */
    static Object load(byte[] bytes, int length, TraceSink sink) {
        return new PlainDataUnpickler(bytes, length, null, sink).run();
    }

    /**
     * Decodes the pickle of {@code length} bytes read from {@code source} in chunks of {@code chunk} bytes (the file
     * is never held whole; the buffer grows only for a longer value), handing device trace entries to {@code sink}
     * (none: a null sink keeps every value). A source that ends early is a truncated file. The readers use
     * {@link #CHUNK}; the tests use small chunks, which put a buffer boundary inside every kind of value.
     */
    static Object load(ReadableByteChannel source, long length, @Nullable TraceSink sink, int chunk) {
        return new PlainDataUnpickler(new byte[(int) Math.min(length, chunk)], length, source, sink).run();
    }

    /** Bytes the readers read a file in at a time (the buffer grows past it only for a longer value). */
    static final int CHUNK = 1 << 20;

    /**
     * Whether {@code a} is the very object {@code b}. The memo's sentinels ({@link #ABSENT}, {@link #CONSUMED},
     * {@link #NOT_DENSE}) and the file's lists are told apart by identity, which is what they mean: a sentinel equals
     * nothing else, and two equal lists from two places in the file are two objects. Error Prone's ReferenceEquality
     * cannot know that; this is the one place of the reader that says so.
     */
    @SuppressWarnings("ReferenceEquality")
    static boolean same(@Nullable Object a, @Nullable Object b) {
        return a == b;
    }

    /** Marks the memo slots never stored (null is a value). */
    static final Object ABSENT = new Object();
    /** Marks the memo slots of trace entries handed to the sink (a snapshot never refers to an entry twice). */
    static final Object CONSUMED = new Object();
    /** What {@link #storeDenseMemo} gives for a slot it did not store. */
    static final Object NOT_DENSE = new Object();

    private Object[] stack = new Object[64];
    /** The memo slot each stack value was stored under while on the stack, or -1 (what {@link #handOver} frees). */
    private int[] stackMemo = new int[64];

    private int top;
    private int[] marks = new int[16];
    private int markCount;
    private Object[] memo;
    private Map<Long, Object> sparseMemo;
    private final TraceSink sink;
    private final IdentityHashMap<Object, DeviceList> deviceLists = new IdentityHashMap<>();

    /** A recognised device trace list: where its entries go and how many it has had. */
    private static final class DeviceList {
        final EntrySink sink;
        int count;

        DeviceList(EntrySink sink) {
            this.sink = sink;
        }
    }

    private PlainDataUnpickler(byte[] in, long length, ReadableByteChannel source, TraceSink sink) {
        super(in, length, source);
        this.sink = sink;
        this.memo = new Object[64];
        Arrays.fill(memo, ABSENT);
        this.plain = sink == null ? null : new PlainEntryDecoder(this);
    }

    private Object run() {
        while (base + pos < end) {
            if (pos == limit) {
                fill(1);
            }
            long at = base + pos;
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

    private void dispatch(int op, long at) {
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
                List<Object> list = asList(peek());
                DeviceList device = deviceList(list, top - 1);
                if (device == null) {
                    list.add(v);
                } else {
                    handOver(device, v, stackMemo[top]);
                }
            }
            case 'e' -> { // APPENDS
                int from = popMark();
                if (from == 0) {
                    throw new Misfit("too few values");
                }
                List<Object> list = asList(stack[from - 1]);
                DeviceList device = deviceList(list, from - 1);
                if (device != null) {
                    for (int i = from; i < top; i++) {
                        handOver(device, stack[i], stackMemo[i]);
                    }
                    clearTo(from);
                } else {
                    if (list instanceof ArrayList<Object> al) {
                        al.ensureCapacity(al.size() + top - from);
                    }
                    addRange(list, from);
                }
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
            case '}' -> { // EMPTY_DICT
                if (!(inDeviceList() && plainEntry())) {
                    push(new HashMap<>(0));
                }
            }
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
    private void rare(int op, long at) {
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
                push(ProtocolZeroText.floating(line(op, at, 256)));
            }
            case 0x8d -> push(utf8(op, at, lengthPrefix(op, at, 8, true))); // BINUNICODE8
            case 'V' -> push(ProtocolZeroText.rawUnicodeEscape(line(op, at, remaining()))); // UNICODE
            case 'U' -> push(latin1(op, at, u8(op, at))); // SHORT_BINSTRING
            case 'T' -> push(latin1(op, at, lengthPrefix(op, at, 4, true))); // BINSTRING
            case 'S' -> push(ProtocolZeroText.quoted(line(op, at, remaining()))); // STRING
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
            stackMemo = Arrays.copyOf(stackMemo, top * 2);
        }
        stackMemo[top] = -1;
        stack[top++] = v;
    }

    // ---------------------------------------------------------------- device traces

    /**
     * The device trace list {@code list} (at stack height {@code at}) is, or {@code null}. A list is one when it is
     * pending in a run of lists that follows the key {@code device_traces} among the pending items of the top-level
     * dict (no mark between the dict's own and the lists'): {@code [root, k1, v1, ..., "device_traces",
     * traces, device0, device1, ...]}. Its device number is the trace list's length plus the lists pending before it.
     */
    private DeviceList deviceList(Object list, int at) {
        if (sink == null) {
            return null;
        }
        DeviceList known = deviceLists.get(list);
        if (known != null || at < 3 || !(stack[0] instanceof HashMap<?, ?>)) {
            return known;
        }
        int k = at - 1;
        while (k > 0 && stack[k] instanceof List<?>) {
            k--;
        }
        if (k == 0 || k + 1 >= at || (k & 1) == 0 || !"device_traces".equals(stack[k])) {
            return null;
        }
        for (int m = 0; m < markCount; m++) {
            if (marks[m] > 1 && marks[m] <= k) {
                return null;
            }
        }
        int device = ((List<?>) stack[k + 1]).size() + at - (k + 2);
        DeviceList opened = new DeviceList(sink.open(list, device));
        deviceLists.put(list, opened);
        return opened;
    }

    // ---------------------------------------------------------------- plain entries

    /** Decodes the plain entries of device trace lists ({@link PlainEntryDecoder}); null without a sink. */
    private final PlainEntryDecoder plain;

    /**
     * Whether an {@code EMPTY_DICT} opens an item of a device trace list already recognised: the list is on top of
     * the stack (the first item of a batch, or a single {@code APPEND}), or the items since the innermost mark
     * follow such a list.
     */
    private boolean inDeviceList() {
        if (deviceLists.isEmpty() || top == 0) {
            return false;
        }
        Object last = stack[top - 1];
        if (last instanceof PlainEntryDecoder.PlainEntry || deviceLists.containsKey(last)) {
            return true;
        }
        if (markCount == 0) {
            return false;
        }
        int m = marks[markCount - 1];
        return m > 0 && m < top && last instanceof HashMap<?, ?> && deviceLists.containsKey(stack[m - 1]);
    }

    /**
     * Decodes the dict an {@code EMPTY_DICT} opens as a {@link PlainEntryDecoder.PlainEntry} when it is a plain
     * entry, else reads nothing and returns false (the dict is then decoded as any other).
     */
    private boolean plainEntry() {
        int window = (int) Math.min(remaining(), PlainEntryDecoder.WINDOW_BYTES);
        ensure(window); // may move the buffered bytes: positions are taken after it
        PlainEntryDecoder.PlainEntry e = new PlainEntryDecoder.PlainEntry();
        int after = plain.decode(e, in, pos, pos + window);
        if (after < 0) {
            return false;
        }
        pos = after;
        push(e);
        return true;
    }

    /** The value of dense memo slot {@code index}, or null past the dense memo (for {@link PlainEntryDecoder}). */
    Object denseMemo(long index) {
        return index < memo.length ? memo[(int) index] : null;
    }

    /** How many memo slots hold a value: the index {@code MEMOIZE} stores at. */
    long memoSize() {
        return memoSize;
    }

    /**
     * Stores {@code v} in memo slot {@code index} as {@code BINPUT} or {@code MEMOIZE} would, when the slot is dense
     * (growing the memo as they do): the value it held ({@link #ABSENT} if none), or {@link #NOT_DENSE} when the
     * slot is not dense and nothing was stored (for {@link PlainEntryDecoder}, which leaves those to the general path).
     */
    Object storeDenseMemo(long index, Object v) {
        growMemo(index);
        if (index >= memo.length) {
            return NOT_DENSE;
        }
        Object before = memo[(int) index];
        if (before == ABSENT) {
            memoSize++;
        }
        memo[(int) index] = v;
        return before;
    }

    /** Puts back what dense slot {@code index} held before a {@link #storeDenseMemo}. */
    void restoreDenseMemo(long index, Object before) {
        memo[(int) index] = before;
    }

    /** Puts back the memo's size as it was before a {@link PlainEntryDecoder} gave up. */
    void resetMemoSize(long size) {
        memoSize = size;
    }

    /**
     * Gives one entry to its device's sink and forgets it: the memo slot it was stored under ({@link #stackMemo}, -1
     * when none) no longer holds it.
     */
    private void handOver(DeviceList device, Object value, int memoSlot) {
        device.sink.entry(value, device.count++);
        if (memoSlot >= 0 && memoSlot < memo.length) {
            memo[memoSlot] = CONSUMED;
        }
        // An entry's own frame list stays in the memo (the file may name it again), but as the stack the sink made
        // of it: a recording in PyTorch's format has one such list per entry, and the lists would otherwise outlive
        // the reading (some 1.4 GB on a 1 GB file), where the stacks are shared.
        if (value instanceof PlainEntryDecoder.PlainEntry p
                && p.converted != null
                && p.ownFramesSlot >= 0
                && p.ownFramesSlot < memo.length
                && same(memo[p.ownFramesSlot], p.frames)) {
            memo[p.ownFramesSlot] = p.converted;
        }
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

    private void putRange(int op, long at, Map<Object, Object> m, int from) {
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
    private void setItems(int op, long at, Map<Object, Object> target, int from) {
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
        // only the lists this decoder built (a stack the sink left in the memo, immutable, is not one to append to)
        if (!(o instanceof ArrayList<?>)) {
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
    private static Object hashable(int op, long at, Object k, String what) {
        if (k instanceof List<?> || k instanceof Map<?, ?> || k instanceof HashSet<?>) {
            throw new Refused("opcode " + opName((short) op) + " at byte " + at + ": a " + what + " of type "
                    + SnapshotTreeConverter.typeName(k).replace("HashSet", "set") + " (unhashable in Python)");
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
        if (v == CONSUMED) {
            throw new Misfit("memo slot " + index + " holds a trace entry already read: a snapshot does not share"
                    + " its entries");
        }
        return v;
    }

    private void memoPut(long index, Object v) {
        if (index < 0) {
            throw new Misfit("negative memo index");
        }
        growMemo(index);
        if (index < memo.length) {
            if (memo[(int) index] == ABSENT) {
                memoSize++;
            }
            memo[(int) index] = v;
            stackMemo[top - 1] = (int) index;
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

    /** Makes {@code index} a slot of the dense memo when it belongs there (below the input's length or 65,536). */
    private void growMemo(long index) {
        if (index >= memo.length && (index < DENSE_MEMO || index < end)) {
            int old = memo.length;
            memo = Arrays.copyOf(memo, (int) Math.max(index + 1, Math.min((long) old * 2, Integer.MAX_VALUE - 8)));
            Arrays.fill(memo, old, memo.length, ABSENT);
        }
    }

    private long memoIndexLine(int op, long at) {
        String line = line(op, at, 32);
        try {
            return Long.parseLong(line.strip());
        } catch (NumberFormatException e) {
            throw new Misfit("not a memo index: " + ProtocolZeroText.shorten(line));
        }
    }

    // ---------------------------------------------------------------- refusals

    private String globalName() {
        ensure((int) Math.min(remaining(), 2 * 257)); // both lines stay in the buffer, so pos can be restored
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

    private static Refused runsCode(int op, long at, String what) {
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
