package io.gpumem.trace.io;

import static io.gpumem.trace.io.PickleBytes.bytes;
import static io.gpumem.trace.io.PickleBytes.le;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.trace.TestTraces;
import java.io.ByteArrayInputStream;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import net.razorvine.pickle.Pickler;
import net.razorvine.pickle.Unpickler;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The project's pickle decoder against razorvine's, which it replaced on the read path: the same value tree
 * (types included, shared lists shared) for every shared trace and for seeded random values, and the refusals
 * razorvine did not make (unhashable dict keys).
 */
class PlainDataUnpicklerTest {

    @ParameterizedTest
    @ValueSource(
            strings = {
                "tiny-forward.pickle",
                "lm2.7b-train-step.pickle",
                "llama-offload-10-streams.pickle",
                "gnn-train-expandable-oom.pickle",
                "nca-train-empty-cache.pickle",
                "opt1.3b-state-only.pickle",
                "lm-medium-train-ctx128.pickle"
            })
    void decodesEverySharedTraceAsRazorvineDoes(String name) throws Exception {
        byte[] b = Files.readAllBytes(TestTraces.file(name));
        Object ours = PlainDataUnpickler.load(b, b.length);
        Object theirs = new Unpickler().load(new ByteArrayInputStream(b));
        assertSame(ours, theirs, "root", new IdentityHashMap<>());
    }

    @Test
    void decodesRandomValuesAsRazorvineDoes() throws Exception {
        long seed = System.nanoTime();
        System.out.println("seed=" + seed);
        Random rnd = new Random(seed);
        for (int round = 0; round < 200; round++) {
            Object value = randomValue(rnd, 4);
            for (boolean memo : new boolean[] {true, false}) {
                byte[] b = new Pickler(memo, false).dumps(value);
                Object ours = PlainDataUnpickler.load(b, b.length);
                Object theirs = new Unpickler().load(new ByteArrayInputStream(b));
                assertSame(ours, theirs, "seed " + seed + " round " + round, new IdentityHashMap<>());
            }
        }
    }

    private static Object randomValue(Random rnd, int depth) {
        int kind = rnd.nextInt(depth <= 0 ? 6 : 9);
        return switch (kind) {
            case 0 -> rnd.nextInt(300) - 50;
            case 1 -> rnd.nextLong();
            case 2 -> new BigInteger(70 + rnd.nextInt(60), rnd).negate();
            case 3 -> "s\u00e9" + rnd.nextInt(1000) + (rnd.nextBoolean() ? "\u4e2d" : "");
            case 4 -> rnd.nextBoolean() ? null : rnd.nextBoolean();
            case 5 -> rnd.nextDouble();
            case 6 -> {
                List<Object> l = new ArrayList<>();
                for (int i = rnd.nextInt(5); i > 0; i--) {
                    l.add(randomValue(rnd, depth - 1));
                }
                yield l;
            }
            case 7 -> {
                Map<Object, Object> m = new HashMap<>();
                for (int i = rnd.nextInt(5); i > 0; i--) {
                    m.put("k" + rnd.nextInt(20), randomValue(rnd, depth - 1));
                }
                yield m;
            }
            default -> new Object[] {randomValue(rnd, depth - 1), randomValue(rnd, depth - 1)};
        };
    }

    /** Deep equality with identical classes; a container met again must be met again at the same place. */
    private static void assertSame(Object ours, Object theirs, String where, IdentityHashMap<Object, Object> seen) {
        if (ours == null || theirs == null) {
            assertThat(ours).as(where).isEqualTo(theirs);
            return;
        }
        assertThat(ours.getClass()).as(where).isEqualTo(theirs.getClass());
        if (ours instanceof List<?> || ours instanceof Map<?, ?> || ours instanceof Object[]) {
            Object before = seen.put(ours, theirs);
            if (before != null) {
                assertThat(before).as(where + " (shared)").isSameAs(theirs);
                return;
            }
        }
        switch (ours) {
            case List<?> a -> {
                List<?> b = (List<?>) theirs;
                assertThat(a.size()).as(where).isEqualTo(b.size());
                for (int i = 0; i < a.size(); i++) {
                    assertSame(a.get(i), b.get(i), where + "[" + i + "]", seen);
                }
            }
            case Map<?, ?> a -> {
                Map<?, ?> b = (Map<?, ?>) theirs;
                assertThat(a.keySet()).as(where).isEqualTo(b.keySet());
                assertThat(List.copyOf(a.keySet()))
                        .as(where + " iteration order")
                        .isEqualTo(List.copyOf(b.keySet()));
                for (Object k : a.keySet()) {
                    assertSame(a.get(k), b.get(k), where + "." + k, seen);
                }
            }
            case Object[] a -> {
                Object[] b = (Object[]) theirs;
                assertThat(a.length).as(where).isEqualTo(b.length);
                for (int i = 0; i < a.length; i++) {
                    assertSame(a[i], b[i], where + "(" + i + ")", seen);
                }
            }
            case byte[] a -> assertThat(a).as(where).isEqualTo((byte[]) theirs);
            default -> assertThat(ours).as(where).isEqualTo(theirs);
        }
    }

    @Test
    void snapshotKeysAreDecodedAsTheReadersLiterals() {
        // {'filename': 1, 'filenamx': 2}, then the same key again through the memo: the snapshot key comes back as
        // the literal's own object (the reader's lookups then match by identity), any other string as decoded
        byte[] p = bytes(
                0x80,
                2,
                ']',
                '(',
                '}',
                '(',
                0x8c,
                8,
                "filename",
                'q',
                0,
                'K',
                1,
                0x8c,
                8,
                "filenamx",
                'K',
                2,
                'u',
                '}',
                'h',
                0,
                'K',
                3,
                's',
                'e',
                '.');
        @SuppressWarnings("unchecked")
        List<Map<Object, Object>> decoded = (List<Map<Object, Object>>) PlainDataUnpickler.load(p, p.length);
        assertThat(decoded).containsExactly(Map.of("filename", 1, "filenamx", 2), Map.of("filename", 3));
        for (Map<Object, Object> m : decoded) {
            Object key =
                    m.keySet().stream().filter("filename"::equals).findFirst().orElseThrow();
            assertThat(key).isSameAs("filename");
        }
    }

    @Test
    void aListOrDictAsADictKeyIsRefusedNamingTheFileAndOpcode() {
        // {[]: 1} through SETITEM, and {{}: 1} through SETITEMS: Python cannot hash either.
        byte[] setitem = bytes(0x80, 2, '}', ']', 'K', 1, 's', '.');
        assertThatThrownBy(() -> new PytorchSnapshotReader().read(new ByteArrayInputStream(setitem), "k.pickle"))
                .isInstanceOf(TraceFormatException.class)
                .hasMessage("k.pickle: not a readable pickle (truncated or corrupt): opcode SETITEM at byte 6:"
                        + " a dict key of type list (unhashable in Python)");
        byte[] setitems = bytes(0x80, 2, '}', '(', '}', 'K', 1, 'u', '.');
        assertThatThrownBy(() -> new PytorchSnapshotReader().read(new ByteArrayInputStream(setitems), "k.pickle"))
                .isInstanceOf(TraceFormatException.class)
                .hasMessageEndingWith("opcode SETITEMS at byte 7: a dict key of type dict (unhashable in Python)");
        // A list that holds itself, used as a key, used to overflow the stack while being hashed.
        byte[] selfKey = bytes(0x80, 2, '}', ']', 0x94, 'h', 0, 'a', 'K', 1, 's', '.');
        assertThatThrownBy(() -> new PytorchSnapshotReader().read(new ByteArrayInputStream(selfKey), "k.pickle"))
                .hasMessageEndingWith("opcode SETITEM at byte 10: a dict key of type list (unhashable in Python)");
    }

    @Test
    void tuplesStringsAndNumbersAreHashableKeys() {
        // {(1, 2): 'a', 'b': None, 7: True}
        byte[] ok =
                bytes(0x80, 2, '}', '(', 'K', 1, 'K', 2, 0x86, 0x8c, 1, "a", 0x8c, 1, "b", 'N', 'K', 7, 0x88, 'u', '.');
        @SuppressWarnings("unchecked")
        Map<Object, Object> m = (Map<Object, Object>) PlainDataUnpickler.load(ok, ok.length);
        assertThat(m).hasSize(3).containsEntry("b", null).containsEntry(7, true);
        assertThat(m.keySet().stream()
                        .filter(k -> k instanceof Object[])
                        .findFirst()
                        .map(k -> (Object[]) k))
                .hasValueSatisfying(t -> assertThat(t).containsExactly(1, 2));
    }

    @Test
    void protocolZeroTextOpcodesDecode() {
        // (dp0\nVkey\np1\nI42\nsS'x\\n'\np2\nL12345678901234567890L\ns.  -> {'key': 42, 'x\n': 12345678901234567890}
        byte[] p0 = bytes("(dp0\nVkey\\u00e9\np1\nI42\nsS'x\\n'\np2\nL12345678901234567890L\nsg1\nI01\ns.");
        @SuppressWarnings("unchecked")
        Map<Object, Object> m = (Map<Object, Object>) PlainDataUnpickler.load(p0, p0.length);
        assertThat(m).containsEntry("key\u00e9", true).containsEntry("x\n", new BigInteger("12345678901234567890"));
        assertThat(Set.copyOf(m.keySet())).hasSize(2);

        byte[] floats = bytes("(F1.5\nI-7\nL5L\nI2147483648\nl.");
        @SuppressWarnings("unchecked")
        List<Object> decoded = (List<Object>) PlainDataUnpickler.load(floats, floats.length);
        assertThat(decoded).containsExactly(1.5, -7, 5L, 2147483648L);
        for (String bad : new String[] {"Iabc\n.", "F1,5\n.", "S'open\n.", "V\\u12\n."}) {
            byte[] b = bytes(bad);
            assertThatThrownBy(() -> PlainDataUnpickler.load(b, b.length))
                    .as(bad)
                    .isInstanceOf(PlainDataUnpickler.Refused.class)
                    .hasMessageContaining("at byte 0");
        }
    }

    /** One of every plain-data opcode of protocols 0 to 5 inside a list; what each decodes to is {@link #EVERY_VALUE}. */
    private static final byte[] EVERY_OPCODE = bytes(
            0x80,
            4, // PROTO 4
            0x95,
            le(1, 8), // FRAME of 1 byte (ignored, length checked)
            ']',
            0x94,
            '(', // EMPTY_LIST, MEMOIZE, MARK
            0x8b,
            le(9, 4),
            le(0, 8),
            1, // LONG4: 2^64
            0x8a,
            2,
            0x00,
            0x80, // LONG1: -32768 (two's complement)
            0x8a,
            0, // LONG1 of no bytes: 0
            'C',
            3,
            "abc", // SHORT_BINBYTES
            'B',
            le(2, 4),
            "xy", // BINBYTES
            0x8e,
            le(1, 8),
            "z", // BINBYTES8
            0x96,
            le(1, 8),
            "w", // BYTEARRAY8
            'U',
            2,
            "hi", // SHORT_BINSTRING (Latin-1)
            'T',
            le(3, 4),
            "h\u00e9!", // BINSTRING
            0x8d,
            le(3, 8),
            0xe4,
            0xb8,
            0xad, // BINUNICODE8 (UTF-8)
            0x8f,
            '(',
            'K',
            1,
            'K',
            2,
            0x90, // EMPTY_SET, MARK, ADDITEMS
            '(',
            'K',
            3,
            0x91, // FROZENSET
            '(',
            'K',
            4,
            'K',
            5,
            't', // TUPLE
            '(',
            'K',
            6,
            'l', // LIST
            '(',
            0x8c,
            1,
            "k",
            'K',
            7,
            'd', // DICT
            'K',
            8,
            '2', // DUP
            'K',
            9,
            '0', // POP
            '(',
            'K',
            10,
            '1', // POP_MARK
            'K',
            11,
            'p',
            "5\n",
            'g',
            "5\n", // PUT and GET in text
            'K',
            12,
            'r',
            le(70_000, 4),
            'j',
            le(70_000, 4), // LONG_BINPUT, LONG_BINGET past the dense memo
            'I',
            "-3\n",
            'I',
            "01\n",
            'L',
            "7L\n",
            'F',
            "2.5\n", // INT, INT True, LONG, FLOAT
            'S',
            "'q\\x41\\n'\n",
            'V',
            "\\u00e9t\n", // STRING, UNICODE
            'J',
            le(-2, 4),
            'M',
            le(0x1234, 2),
            'G',
            be(Double.doubleToLongBits(1.25)), // BININT, BININT2, BINFLOAT
            'N',
            0x88,
            0x89, // NONE, NEWTRUE, NEWFALSE
            ')',
            'K',
            1,
            0x85,
            'K',
            1,
            'K',
            2,
            0x86,
            'K',
            1,
            'K',
            2,
            'K',
            3,
            0x87, // EMPTY_TUPLE, TUPLE1-3
            'e',
            '.'); // APPENDS, STOP

    private static final List<Object> EVERY_VALUE = Arrays.asList(
            BigInteger.ONE.shiftLeft(64),
            -32768L,
            0L,
            "abc".getBytes(StandardCharsets.US_ASCII),
            "xy".getBytes(StandardCharsets.US_ASCII),
            "z".getBytes(StandardCharsets.US_ASCII),
            "w".getBytes(StandardCharsets.US_ASCII),
            "hi",
            "h\u00e9!",
            "\u4e2d",
            Set.of(1, 2),
            Set.of(3),
            new Object[] {4, 5},
            List.of(6),
            Map.of("k", 7),
            8,
            8,
            11,
            11,
            12,
            12,
            -3,
            true,
            7L,
            2.5,
            "qA\n",
            "\u00e9t",
            -2,
            0x1234,
            1.25,
            null,
            true,
            false,
            new Object[0],
            new Object[] {1},
            new Object[] {1, 2},
            new Object[] {1, 2, 3});

    private static byte[] be(long v) {
        byte[] b = le(v, 8);
        for (int i = 0; i < 4; i++) {
            byte t = b[i];
            b[i] = b[7 - i];
            b[7 - i] = t;
        }
        return b;
    }

    @Test
    void everyPlainDataOpcodeDecodesToItsValue() {
        Object decoded = PlainDataUnpickler.load(EVERY_OPCODE, EVERY_OPCODE.length);
        assertThat(decoded).isInstanceOf(ArrayList.class);
        @SuppressWarnings("unchecked")
        List<Object> list = (List<Object>) decoded;
        assertThat(list).containsExactlyElementsOf(EVERY_VALUE);
        assertThat(list.get(10)).isInstanceOf(HashSet.class);
        assertThat(list.get(11)).isNotInstanceOf(HashSet.class); // a frozenset cannot be changed
    }

    /**
     * The decoder reading a channel in chunks of 1 to 16 bytes (a buffer boundary inside every kind of value) gives
     * what it gives from the whole input, for every opcode, for seeded random values and for two shared traces; a
     * file cut short or asking to run code is refused with the same message.
     */
    @Test
    void decodesInChunksExactlyAsFromTheWholeInput() throws Exception {
        long seed = System.nanoTime();
        System.out.println("seed=" + seed);
        Random rnd = new Random(seed);
        List<byte[]> pickles = new ArrayList<>();
        pickles.add(EVERY_OPCODE);
        for (int round = 0; round < 40; round++) {
            pickles.add(new Pickler(rnd.nextBoolean(), false).dumps(randomValue(rnd, 4)));
        }
        for (byte[] b : pickles) {
            Object whole = PlainDataUnpickler.load(b, b.length);
            for (int chunk = 1; chunk <= 16; chunk++) {
                Object chunked = PlainDataUnpickler.load(PickleBytes.channel(b), b.length, null, chunk);
                assertSame(chunked, whole, "seed " + seed + ", chunk " + chunk, new IdentityHashMap<>());
            }
            Object stuttered = PlainDataUnpickler.load(PickleBytes.stutteringChannel(b), b.length, null, 64);
            assertSame(stuttered, whole, "seed " + seed + ", a stuttering channel", new IdentityHashMap<>());
        }
        for (String name : new String[] {"tiny-forward.pickle", "opt1.3b-state-only.pickle"}) {
            byte[] b = Files.readAllBytes(TestTraces.file(name));
            Object whole = PlainDataUnpickler.load(b, b.length);
            for (int chunk : new int[] {7, 4093}) {
                Object chunked = PlainDataUnpickler.load(PickleBytes.channel(b), b.length, null, chunk);
                assertSame(chunked, whole, name + ", chunk " + chunk, new IdentityHashMap<>());
            }
        }
        byte[] global = bytes("(lp0\ncposix\nsystem\np1\na.");
        byte[] cut = Arrays.copyOf(EVERY_OPCODE, 120);
        byte[] longText = bytes("(I", "9".repeat(70), "\nl.");
        for (byte[] b : new byte[][] {global, cut, longText}) {
            String expected = refusal(() -> PlainDataUnpickler.load(b, b.length));
            assertThat(expected).isNotEmpty();
            for (int chunk = 1; chunk <= 16; chunk++) {
                int c = chunk;
                assertThat(refusal(() -> PlainDataUnpickler.load(PickleBytes.channel(b), b.length, null, c)))
                        .as("chunk " + chunk)
                        .isEqualTo(expected);
            }
        }
    }

    private static String refusal(Runnable decode) {
        try {
            decode.run();
        } catch (PlainDataUnpickler.Refused e) {
            return e.getMessage();
        }
        return "";
    }

    @SuppressWarnings("unchecked")
    private static List<Object> decodedList(byte[] pickle, int length) {
        return (List<Object>) PlainDataUnpickler.load(pickle, length);
    }

    @Test
    void protocolZeroTextEdgesDecodeAsPythonDoes() {
        // I00 is False; a trailing backslash stays; \U takes eight hex digits; an unescaped line is kept as it is.
        byte[] p = bytes("(I00\nS'a\\'\nS\"d\"\nV\\U0001F600!\nVplain\nl.");
        assertThat(decodedList(p, p.length)).containsExactly(false, "a\\", "d", "\uD83D\uDE00!", "plain");
        String fortyX = "x".repeat(40);
        String[][] refused = {
            {"S'\n.", "not a quoted string"},
            {"S'ab\"\n.", "not a quoted string"},
            {"Sab\n.", "not a quoted string"},
            {"V\\u12\n.", "a short escape"},
            {"V\\U00110000\n.", "not a code point"},
            {"I" + fortyX + "\n.", "not an integer: " + "x".repeat(32) + "...)"},
            {"I" + "x".repeat(32) + "\n.", "not an integer: " + "x".repeat(32) + ")"},
        };
        for (String[] r : refused) {
            byte[] b = bytes(r[0]);
            assertThatThrownBy(() -> PlainDataUnpickler.load(b, b.length))
                    .as(r[0])
                    .isInstanceOf(PlainDataUnpickler.Refused.class)
                    .hasMessageEndingWith(r[1] + (r[1].endsWith(")") ? "" : ")"));
        }
    }

    @Test
    void stackAndMemoEdgesAreDecodedOrRefusedExactly() {
        // POP of a mark removes the mark: the list then takes the 1 appended after it.
        byte[] popMark = bytes(0x80, 2, ']', '(', '0', 'K', 1, 'a', '.');
        assertThat(decodedList(popMark, popMark.length)).containsExactly(1);
        // LONG4 of exactly 1,024 bytes is read; one more byte is refused.
        byte[] max = new byte[PlainDataUnpickler.MAX_LONG4_BYTES];
        max[max.length - 1] = 0x40;
        byte[] long4 = bytes(0x80, 2, 0x8b, le(max.length, 4), max, '.');
        assertThat(PlainDataUnpickler.load(long4, long4.length)).isEqualTo(BigInteger.ONE.shiftLeft(8 * 1024 - 2));
        byte[] over = bytes(0x80, 2, 0x8b, le(max.length + 1, 4), max, 0, '.');
        assertThatThrownBy(() -> PlainDataUnpickler.load(over, over.length))
                .hasMessage("opcode LONG4 at byte 2 declares a 1025-byte integer (snapshots hold 64-bit integers)");
        // MEMOIZE stores at the number of slots stored so far, sparse ones included, each counted once.
        byte[] memoize = bytes(
                0x80,
                4,
                ']',
                'r',
                le(70_000, 4),
                'r',
                le(70_000, 4),
                'K',
                5,
                0x94,
                'a',
                'h',
                1,
                'a',
                'j',
                le(70_000, 4),
                '0',
                '.');
        assertThat(decodedList(memoize, memoize.length)).containsExactly(5, 5);
        // A slot just past the memo's array was never stored.
        byte[] past = bytes(0x80, 2, 'h', 64, '.');
        assertThatThrownBy(() -> PlainDataUnpickler.load(past, past.length))
                .hasMessage(
                        "opcode BINGET at byte 2 does not fit the values before it (memo slot 64 was never stored)");
        // A value that ends exactly where the file does is read; the missing STOP is what is refused.
        byte[] noStop = bytes(0x80, 2, 'K', 5);
        assertThatThrownBy(() -> PlainDataUnpickler.load(noStop, noStop.length))
                .hasMessage("the file ends at byte 4 before its STOP opcode");
    }

    @Test
    void stackGlobalNamesItsTargetWhenBothNamesAreShortStrings() {
        for (int length : new int[] {255, 256}) {
            String module = "m".repeat(length);
            byte[] p = bytes(0x80, 4, 'X', le(length, 4), module, 0x8c, 1, "f", 0x93, '.');
            String named = length < 256 ? "STACK_GLOBAL " + module + ".f at byte " : "STACK_GLOBAL at byte ";
            assertThatThrownBy(() -> PlainDataUnpickler.load(p, p.length))
                    .isInstanceOfSatisfying(
                            PlainDataUnpickler.Refused.class,
                            e -> assertThat(e.runsCode()).isTrue())
                    .hasMessageContaining("the file asks to run code (" + named);
        }
        byte[] one = bytes(0x80, 4, 0x8c, 1, "f", 0x93, '.');
        assertThatThrownBy(() -> PlainDataUnpickler.load(one, one.length))
                .hasMessageContaining("(STACK_GLOBAL at byte 5)");
        byte[] corrupt = bytes(0x80, 2, 'a', '.');
        assertThatThrownBy(() -> PlainDataUnpickler.load(corrupt, corrupt.length))
                .isInstanceOfSatisfying(
                        PlainDataUnpickler.Refused.class,
                        e -> assertThat(e.runsCode()).isFalse());
    }
}
