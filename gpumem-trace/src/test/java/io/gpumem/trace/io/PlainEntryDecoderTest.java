package io.gpumem.trace.io;

import static io.gpumem.trace.io.PickleBytes.le;
import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.history.TraceEntry;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * The decoder's fast path for device trace entries ({@link PlainEntryDecoder}) against its general path: on seeded
 * entries written in every encoding a pickler may choose for a plain entry (short or long strings, new or from the
 * memo by either index width; integers as one, two, four or LONG1 bytes; no memo store, BINPUT, LONG_BINPUT or
 * MEMOIZE after each value; frames absent, None, the entry's own list of zero, one or several frame dicts new or from
 * the memo, or another entry's list), every entry after its list is known is decoded without a dict, to exactly the
 * values its dict holds; one with a key the fast path does not know is left to the general path.
 */
class PlainEntryDecoderTest {

    private static final String[] ACTIONS = {"alloc", "free_requested", "free_completed", "segment_alloc", "oom"};
    private static final String[] INTEGER_KEYS = {"addr", "size", "stream", "time_us", "device_free"};

    @Test
    void everyPlainEncodingDecodesToWhatItsDictHolds() {
        long seed = System.nanoTime();
        System.out.println("seed=" + seed);
        Random rnd = new Random(seed);
        int[] decodedBy = new int[2]; // [general path, fast path]
        for (int round = 0; round < 300; round++) {
            Writer w = new Writer(rnd);
            w.op(0x80, 4)
                    .container('}')
                    .op('(')
                    .string("device_traces")
                    .container(']')
                    .container(']');
            int n = 1 + rnd.nextInt(12);
            boolean batched = rnd.nextBoolean();
            List<Map<String, Object>> expected = new ArrayList<>();
            List<Boolean> plain = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                if (batched && i == 1) {
                    w.op('(');
                }
                Map<String, Object> entry = w.randomEntry();
                expected.add(entry);
                // the first entry comes before the list is known to be a device's (its APPEND tells)
                plain.add(i > 0 && !entry.containsKey("extra"));
                if (!batched || i == 0) {
                    w.op('a');
                }
            }
            if (batched && n > 1) {
                w.op('e');
            }
            byte[] pickle = w.op('a', 'u', '.').bytes();

            List<Object> received = new ArrayList<>();
            PlainDataUnpickler.load(pickle, pickle.length, (list, device) -> (value, index) -> received.add(value));
            String where = "seed " + seed + ", round " + round;
            assertThat(received)
                    .as(where)
                    .extracting(v -> v instanceof PlainEntryDecoder.PlainEntry)
                    .isEqualTo(plain);
            assertThat(received)
                    .extracting(PlainEntryDecoderTest::normalised)
                    .as(where)
                    .isEqualTo(expected);
            received.forEach(v -> decodedBy[v instanceof PlainEntryDecoder.PlainEntry ? 1 : 0]++);
        }
        assertThat(Math.min(decodedBy[0], decodedBy[1]))
                .as("entries by the general path, by the fast path: %s", Arrays.toString(decodedBy))
                .isGreaterThan(200);
    }

    /** An entry as a map of its keys, numbers as longs, whichever path decoded it. */
    private static Map<String, Object> normalised(Object value) {
        Map<String, Object> m = new LinkedHashMap<>();
        if (value instanceof PlainEntryDecoder.PlainEntry p) {
            m.put("action", p.action);
            long[] values = {p.addr, p.size, p.stream, p.timeUs, p.deviceFree};
            int[] bits = {
                TraceEntry.ADDR, TraceEntry.SIZE, TraceEntry.STREAM, TraceEntry.TIME_US, TraceEntry.DEVICE_FREE
            };
            for (int i = 0; i < bits.length; i++) {
                if ((p.keys & bits[i]) != 0) {
                    m.put(INTEGER_KEYS[i], values[i]);
                }
            }
            if (p.hasFrames) {
                m.put("frames", normalisedValue(p.frames));
            }
        } else {
            ((Map<?, ?>) value).forEach((k, v) -> m.put((String) k, normalisedValue(v)));
        }
        return sortedLike(m);
    }

    private static Object normalisedValue(Object v) {
        return switch (v) {
            case null -> null;
            case Number n -> n.longValue();
            case List<?> list ->
                list.stream().map(PlainEntryDecoderTest::normalisedValue).toList();
            case Map<?, ?> map -> {
                Map<String, Object> m = new LinkedHashMap<>();
                map.forEach((k, x) -> m.put((String) k, normalisedValue(x)));
                yield sortedLike(m);
            }
            default -> v;
        };
    }

    /** The map with its keys in one order, so that maps compare as lists of pairs in the assertion's message too. */
    private static Map<String, Object> sortedLike(Map<String, Object> m) {
        Map<String, Object> sorted = new LinkedHashMap<>();
        m.keySet().stream().sorted().forEach(k -> sorted.put(k, m.get(k)));
        return sorted;
    }

    /** Writes a pickle, choosing at random among the encodings of each value and tracking the memo's slots. */
    private static final class Writer {
        private final ByteArrayOutputStream out = new ByteArrayOutputStream();
        private final Random rnd;
        private final Map<String, Integer> strings = new HashMap<>();
        /** Memo slots of frame dicts and own frame lists written so far, with what they hold. */
        private final List<Integer> frameSlots = new ArrayList<>();

        private final List<Map<String, Object>> frameValues = new ArrayList<>();
        private final List<Integer> listSlots = new ArrayList<>();
        private final List<List<Object>> listValues = new ArrayList<>();
        private int slots;

        Writer(Random rnd) {
            this.rnd = rnd;
        }

        Writer op(Object... parts) {
            out.writeBytes(PickleBytes.bytes(parts));
            return this;
        }

        byte[] bytes() {
            return out.toByteArray();
        }

        /** No memo store, or one of the three (at the next slot, as Python numbers them); the slot or -1. */
        private int memoStore() {
            int how = rnd.nextInt(4);
            if (how == 0) {
                return -1;
            }
            int slot = slots++;
            if (how == 1 && slot < 256) {
                op('q', slot);
            } else if (how == 2) {
                op('r', le(slot, 4));
            } else {
                op(0x94);
            }
            return slot;
        }

        private void get(int slot) {
            if (slot < 256 && rnd.nextBoolean()) {
                op('h', slot);
            } else {
                op('j', le(slot, 4));
            }
        }

        Writer container(int op) {
            op(op);
            memoStore();
            return this;
        }

        Writer string(String s) {
            Integer slot = strings.get(s);
            if (slot != null && rnd.nextInt(3) > 0) {
                get(slot);
                return this;
            }
            byte[] b = s.getBytes(StandardCharsets.UTF_8);
            if (rnd.nextBoolean()) {
                op(0x8c, b.length, b);
            } else {
                op('X', le(b.length, 4), b);
            }
            int stored = memoStore();
            if (stored >= 0) {
                strings.put(s, stored);
            }
            return this;
        }

        /** An integer in the smallest or a wider encoding that holds it. */
        private long integer(long v) {
            int how = rnd.nextInt(4);
            if (v >= 0 && v < 256 && how == 0) {
                op('K', (int) v);
            } else if (v >= 0 && v < 65_536 && how <= 1) {
                op('M', le(v, 2));
            } else if (v == (int) v && how <= 2) {
                op('J', le(v, 4));
            } else {
                int n = 1;
                while (n < 8 && (v >> (8 * n - 1)) != 0 && (v >> (8 * n - 1)) != -1) {
                    n++;
                }
                op(0x8a, n, le(v, n));
            }
            return v;
        }

        private long randomInteger() {
            return switch (rnd.nextInt(5)) {
                case 0 -> rnd.nextInt(256);
                case 1 -> rnd.nextInt(65_536);
                case 2 -> rnd.nextInt();
                case 3 -> rnd.nextLong() >>> rnd.nextInt(64);
                default -> -1 - rnd.nextInt(1000);
            };
        }

        /** A random entry written here; what its dict holds (numbers as longs). */
        Map<String, Object> randomEntry() {
            Map<String, Object> e = new LinkedHashMap<>();
            container('}').op('(');
            List<String> keys = new ArrayList<>(List.of("action"));
            for (String k : INTEGER_KEYS) {
                if (rnd.nextInt(10) < 7) {
                    keys.add(k);
                }
            }
            if (rnd.nextInt(10) < 6) {
                keys.add("frames");
            }
            if (rnd.nextInt(10) == 0) {
                keys.add("extra");
            }
            Collections.shuffle(keys, rnd);
            for (String k : keys) {
                string(k);
                switch (k) {
                    case "action" -> {
                        String a = ACTIONS[rnd.nextInt(ACTIONS.length)];
                        string(a);
                        e.put(k, a);
                    }
                    case "frames" -> e.put(k, frames());
                    default -> e.put(k, integer(randomInteger()));
                }
            }
            op('u');
            return sortedLike(e);
        }

        /** None, another entry's list from the memo, or a new list of frames. */
        private Object frames() {
            int how = rnd.nextInt(4);
            if (how == 0) {
                op('N');
                return null;
            }
            if (how == 1 && !listSlots.isEmpty()) {
                int i = rnd.nextInt(listSlots.size());
                get(listSlots.get(i));
                return listValues.get(i);
            }
            op(']');
            int slot = memoStore();
            int n = rnd.nextInt(4);
            List<Object> frames = new ArrayList<>();
            if (n == 1 && rnd.nextBoolean()) {
                frames.add(frame());
                op('a');
            } else if (n > 0) {
                op('(');
                for (int i = 0; i < n; i++) {
                    frames.add(frame());
                }
                op('e');
            }
            if (slot >= 0) {
                listSlots.add(slot);
                listValues.add(frames);
            }
            return frames;
        }

        /** A frame dict: one from the memo, or a new one. */
        private Map<String, Object> frame() {
            if (!frameSlots.isEmpty() && rnd.nextBoolean()) {
                int i = rnd.nextInt(frameSlots.size());
                get(frameSlots.get(i));
                return frameValues.get(i);
            }
            op('}');
            int slot = memoStore();
            op('(');
            Map<String, Object> f = new LinkedHashMap<>();
            string("filename");
            String file = "f" + rnd.nextInt(5) + ".py";
            string(file);
            f.put("filename", file);
            string("line");
            long line = rnd.nextInt(70_000);
            if (line < 256 && rnd.nextBoolean()) {
                op('K', (int) line);
            } else if (line < 65_536 && rnd.nextBoolean()) {
                op('M', le(line, 2));
            } else {
                op('J', le(line, 4));
            }
            f.put("line", line);
            string("name");
            if (rnd.nextInt(5) == 0) {
                op('N');
                f.put("name", null);
            } else {
                String name = "fn" + rnd.nextInt(5);
                string(name);
                f.put("name", name);
            }
            op('u');
            Map<String, Object> sorted = sortedLike(f);
            if (slot >= 0) {
                frameSlots.add(slot);
                frameValues.add(sorted);
            }
            return sorted;
        }
    }
}
