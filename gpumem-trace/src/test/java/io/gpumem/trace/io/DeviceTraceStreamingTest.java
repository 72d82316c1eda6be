package io.gpumem.trace.io;

import static io.gpumem.trace.io.PickleBytes.le;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.trace.TestTraces;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import org.junit.jupiter.api.Test;

/**
 * The decoder hands each {@code device_traces[d]} entry to the reader as it is decoded, instead of building the
 * file's tree of entry dicts: that is an optimisation, so it must change nothing but memory. Checked two ways: every
 * way of reading a shared snapshot (whole in memory, from the file in chunks of any size, the whole tree first and
 * converted after) gives the same snapshot; and, on seeded hand-written pickles in every layout a pickler may choose
 * (device lists appended one by one or in batches, entries memoized or not, other keys before them holding lists of
 * lists), exactly the device lists are recognised, under their own device numbers, with their entries in order.
 */
class DeviceTraceStreamingTest {

    @Test
    void everyWayOfReadingASharedSnapshotGivesTheSameSnapshot() throws Exception {
        List<Path> files = TestTraces.pickles();
        PytorchSnapshotReader reader = new PytorchSnapshotReader();
        PytorchSnapshotWriter writer = new PytorchSnapshotWriter();
        for (Path file : files) {
            byte[] bytes = Files.readAllBytes(file);
            TraceSnapshot inMemory = reader.read(new ByteArrayInputStream(bytes), file.toString());
            byte[] expected = writer.toBytes(inMemory);
            assertThat(inMemory.entryCount())
                    .as(file + ": a test that cannot fail")
                    .isPositive();
            assertThat(writer.toBytes(reader.readWholeTree(bytes, file.toString())))
                    .as(file + ", the whole tree converted")
                    .isEqualTo(expected);
            for (int chunk : new int[] {PlainDataUnpickler.CHUNK, 65_536, 4_093}) {
                assertThat(writer.toBytes(reader.read(file, n -> {}, chunk)))
                        .as(file + ", read in chunks of " + chunk)
                        .isEqualTo(expected);
            }
        }
    }

    @Test
    void exactlyTheDeviceListsAreStreamedUnderTheirNumbersInEveryLayout() {
        long seed = System.nanoTime();
        System.out.println("seed=" + seed);
        Random rnd = new Random(seed);
        for (int round = 0; round < 300; round++) {
            int deviceCount = rnd.nextInt(5);
            List<List<Long>> devices = new ArrayList<>();
            long addr = 512;
            for (int d = 0; d < deviceCount; d++) {
                List<Long> entries = new ArrayList<>();
                for (int i = rnd.nextInt(6); i > 0; i--) {
                    entries.add(addr);
                    addr += 512;
                }
                devices.add(entries);
            }
            Layout layout =
                    new Layout(rnd.nextBoolean(), rnd.nextInt(4), rnd.nextBoolean(), rnd.nextInt(3), rnd.nextLong());
            String where = "seed " + seed + ", round " + round + ", " + layout + ", devices " + devices;
            byte[] pickle = layout.write(devices);

            RecordingSink sink = new RecordingSink();
            Object root = PlainDataUnpickler.load(pickle, pickle.length, sink);

            Map<Integer, List<Long>> expected = new TreeMap<>();
            int plain = 0;
            for (int d = 0; d < devices.size(); d++) {
                int n = devices.get(d).size();
                if (n > 0) {
                    expected.put(d, devices.get(d));
                }
                // A list is known as a device's from its first APPEND(S) on: the entries before that are dicts.
                plain += Math.max(0, n - Math.max(1, layout.entryBatch));
            }
            assertThat(sink.addresses).as(where).isEqualTo(expected);
            assertThat(sink.plainEntries)
                    .as(where + ": the entries decoded without a dict")
                    .isEqualTo(plain);
            assertThat(sink.entries)
                    .as(where)
                    .isEqualTo(devices.stream().mapToInt(List::size).sum());
            Map<?, ?> top = (Map<?, ?>) root;
            assertThat((List<?>) top.get("device_traces"))
                    .as(where)
                    .hasSize(deviceCount)
                    .allSatisfy(list -> assertThat((List<?>) list).isEmpty());
            for (int i = 0; i < layout.otherKeys; i++) {
                assertThat(top.get("other" + i)).as(where).isEqualTo(List.of(List.of(1), List.of(2, 3)));
            }
        }
    }

    @Test
    void aDeviceTracesKeyOutsideTheTopLevelDictIsNotStreamed() {
        // {'segments': [], 'nested': {'device_traces': [[entry]]}, 'pair': ('device_traces', [[entry]])}
        Layout layout = new Layout(false, 2, true, 0, 0);
        PickleOps p = new PickleOps(false);
        p.op(0x80, 2, '}', '(');
        p.string("segments").op(']');
        p.string("nested").op('}', '(').string("device_traces").op(']', '(', ']');
        layout.entry(p, 512);
        p.op('a', 'e', 'u');
        p.string("pair").op('(').string("device_traces").op(']', '(', ']');
        layout.entry(p, 1024);
        p.op('a', 'e', 't');
        p.op('u', '.');
        byte[] pickle = p.bytes();
        RecordingSink sink = new RecordingSink();
        Map<?, ?> top = (Map<?, ?>) PlainDataUnpickler.load(pickle, pickle.length, sink);
        assertThat(sink.addresses).isEmpty();
        List<?> nested = (List<?>) ((Map<?, ?>) top.get("nested")).get("device_traces");
        assertThat(nested)
                .singleElement()
                .satisfies(list -> assertThat((List<?>) list).hasSize(1));
        List<?> pair = (List<?>) ((Object[]) top.get("pair"))[1];
        assertThat(pair)
                .singleElement()
                .satisfies(list -> assertThat((List<?>) list).hasSize(1));
    }

    @Test
    void anEntryNamedAgainAfterItsDeviceListTookItIsRefused() {
        // {'device_traces': [[entry, stored in memo slot 0]], 'again': <memo slot 0>}: the entry went to the reader.
        PickleOps p = new PickleOps(false);
        p.op(0x80, 2, '}', '(').string("device_traces").op(']', ']', '}', 'q', 0, '(');
        p.string("addr").op('K', 1).string("action").string("alloc").op('u', 'a', 'a');
        p.string("again").op('h', 0, 'u', '.');
        byte[] pickle = p.bytes();
        RecordingSink sink = new RecordingSink();
        assertThatThrownBy(() -> PlainDataUnpickler.load(pickle, pickle.length, sink))
                .isInstanceOf(PlainDataUnpickler.Refused.class)
                .hasMessageEndingWith(
                        "(memo slot 0 holds a trace entry already read: a snapshot does not share its" + " entries)");
        assertThat(sink.addresses).containsExactly(Map.entry(0, List.of(1L)));
        // Without a sink nothing is streamed, and the same file decodes.
        assertThat(PlainDataUnpickler.load(pickle, pickle.length)).isInstanceOf(HashMap.class);
    }

    /** What the sink was handed: each device's entry addresses in order, and how many came as plain entries. */
    private static final class RecordingSink implements PlainDataUnpickler.TraceSink {
        final Map<Integer, List<Long>> addresses = new TreeMap<>();
        int entries;
        int plainEntries;

        @Override
        public PlainDataUnpickler.EntrySink open(Object list, int device) {
            assertThat(addresses).as("device %d opened twice", device).doesNotContainKey(device);
            List<Long> got = new ArrayList<>();
            addresses.put(device, got);
            return (value, index) -> {
                assertThat(index).isEqualTo(got.size());
                entries++;
                if (value instanceof PlainEntryDecoder.PlainEntry e) {
                    plainEntries++;
                    got.add(e.addr);
                } else {
                    got.add(((Number) ((HashMap<?, ?>) value).get("addr")).longValue());
                }
            };
        }
    }

    /**
     * How a pickler may lay out a snapshot: the device lists appended to {@code device_traces} in one batch
     * ({@code APPENDS}) or one by one ({@code APPEND}); their entries one by one ({@code entryBatch} 0) or in
     * batches of {@code entryBatch} (Python's pickler and gpumem's writer: 1,000); every container and new string
     * memoized and every repeated string fetched from the memo (as Python's pickler does) or nothing memoized
     * (either way an entry is decoded without a dict once its list is known); {@code otherKeys} keys whose values
     * are lists of lists too, plus one holding 70 strings (which takes the memo past its first 64 slots); and the
     * top-level keys in the order {@code keyOrder} shuffles them with.
     */
    private record Layout(boolean devicesBatched, int entryBatch, boolean memoized, int otherKeys, long keyOrder) {

        byte[] write(List<List<Long>> devices) {
            PickleOps p = new PickleOps(memoized);
            p.op(0x80, 4).container('}').op('(');
            List<String> keys = new ArrayList<>(List.of("segments", "device_traces", "strings"));
            for (int i = 0; i < otherKeys; i++) {
                keys.add("other" + i);
            }
            Collections.shuffle(keys, new Random(keyOrder));
            for (String key : keys) {
                p.string(key);
                switch (key) {
                    case "segments" -> p.container(']');
                    case "device_traces" -> deviceTraces(p, devices);
                    case "strings" -> {
                        p.container(']').op('(');
                        for (int i = 0; i < 70; i++) {
                            p.string("s" + i);
                        }
                        p.op('e');
                    }
                    default -> {
                        p.container(']').op('(').container(']').op('K', 1, 'a').container(']');
                        p.op('(', 'K', 2, 'K', 3, 'e', 'e');
                    }
                }
            }
            return p.op('u', '.').bytes();
        }

        private void deviceTraces(PickleOps p, List<List<Long>> devices) {
            p.container(']');
            if (devicesBatched && !devices.isEmpty()) {
                p.op('(');
            }
            for (List<Long> entries : devices) {
                p.container(']');
                for (int i = 0; i < entries.size(); i++) {
                    if (entryBatch > 0 && i % entryBatch == 0) {
                        p.op('(');
                    }
                    entry(p, entries.get(i));
                    if (entryBatch == 0) {
                        p.op('a');
                    } else if (i % entryBatch == entryBatch - 1 || i == entries.size() - 1) {
                        p.op('e');
                    }
                }
                if (!devicesBatched) {
                    p.op('a');
                }
            }
            if (devicesBatched && !devices.isEmpty()) {
                p.op('e');
            }
        }

        /** {@code {'action': 'alloc', 'addr': addr, 'size': 512, 'stream': 0}}. */
        void entry(PickleOps p, long addr) {
            p.container('}')
                    .op('(')
                    .string("action")
                    .string("alloc")
                    .string("addr")
                    .op('J', le(addr, 4));
            p.string("size").op('M', le(512, 2)).string("stream").op('K', 0).op('u');
        }
    }

    /** A pickle written opcode by opcode; memoizing, it numbers its memo slots as Python's {@code MEMOIZE} does. */
    private static final class PickleOps {
        private final ByteArrayOutputStream out = new ByteArrayOutputStream();
        private final boolean memoized;
        private final Map<String, Integer> strings = new HashMap<>();
        private int slots;

        PickleOps(boolean memoized) {
            this.memoized = memoized;
        }

        PickleOps op(Object... parts) {
            out.writeBytes(PickleBytes.bytes(parts));
            return this;
        }

        /** {@code EMPTY_DICT} or {@code EMPTY_LIST}, memoized when memoizing. */
        PickleOps container(int op) {
            op(op);
            if (memoized) {
                op(0x94);
                slots++;
            }
            return this;
        }

        /** SHORT_BINUNICODE, or when memoizing and met before, BINGET / LONG_BINGET. */
        PickleOps string(String s) {
            Integer slot = memoized ? strings.get(s) : null;
            if (slot != null) {
                return slot < 256 ? op('h', slot) : op('j', le(slot, 4));
            }
            op(PickleBytes.unicode(s));
            if (memoized) {
                op(0x94);
                strings.put(s, slots++);
            }
            return this;
        }

        byte[] bytes() {
            return out.toByteArray();
        }
    }
}
