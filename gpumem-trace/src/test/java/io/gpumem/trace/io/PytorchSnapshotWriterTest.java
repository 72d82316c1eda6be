package io.gpumem.trace.io;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpumem.alloc.Pool;
import io.gpumem.history.BlockInfo;
import io.gpumem.history.BlockState;
import io.gpumem.history.Frame;
import io.gpumem.history.PoolId;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.TestTraces;
import java.io.ByteArrayInputStream;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Stream;
import net.razorvine.pickle.Pickler;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

class PytorchSnapshotWriterTest {

    static Stream<String> pickles() {
        return Stream.of(
                "tiny-forward.pickle",
                "llama-offload-10-streams.pickle",
                "gnn-train-expandable-oom.pickle",
                "opt1.3b-state-only.pickle",
                "nca-train-empty-cache.pickle");
    }

    @ParameterizedTest
    @MethodSource("pickles")
    void roundTripPreservesEveryField(String name, @TempDir Path dir) throws Exception {
        TraceSnapshot original = new PytorchSnapshotReader().read(TestTraces.file(name));
        Path out = dir.resolve("copy.pickle");
        new PytorchSnapshotWriter().write(original, out);
        TraceSnapshot back = new PytorchSnapshotReader().read(out);
        assertThat(back.segments()).isEqualTo(original.segments());
        assertThat(back.deviceTraces()).isEqualTo(original.deviceTraces());
        assertThat(back.allocatorSettings()).isEqualTo(original.allocatorSettings());
        assertThat(back.externalAnnotations()).isEqualTo(original.externalAnnotations());
        // No temporary file is left next to the output.
        try (var files = Files.list(dir)) {
            assertThat(files).containsExactly(out);
        }
    }

    @Test
    void writtenFileIsReadableByOthersLikeAnyOutputAndKeepsAReplacedFilesMode(@TempDir Path dir) throws Exception {
        assumeTrue(dir.getFileSystem().supportedFileAttributeViews().contains("posix"), "POSIX permissions only");
        Path out = dir.resolve("new.pickle");
        new PytorchSnapshotWriter().write(generated(), out);
        assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(out)))
                .isEqualTo("rw-r--r--");
        Files.setPosixFilePermissions(out, PosixFilePermissions.fromString("rw-rw----"));
        new PytorchSnapshotWriter().write(generated(), out);
        assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(out)))
                .isEqualTo("rw-rw----");
    }

    @Test
    void sharedFramesAreWrittenOnce() {
        TraceSnapshot s = new PytorchSnapshotReader().read(TestTraces.file("tiny-forward.pickle"));
        byte[] bytes = new PytorchSnapshotWriter().toBytes(s);
        long original = TestTraces.file("tiny-forward.pickle").toFile().length();
        // Without sharing the 97 entries' stacks would make the file several times larger than PyTorch's.
        assertThat((long) bytes.length).isLessThan(original * 5 / 4);
        TraceSnapshot back = new PytorchSnapshotReader().read(new ByteArrayInputStream(bytes), "mem");
        assertThat(back.traceOf(0)).isEqualTo(s.traceOf(0));
    }

    /** A small snapshot built in memory with every field of allocator.md §10 set. */
    static TraceSnapshot generated() {
        Frame f = new Frame("train.py", 12, "forward");
        BlockInfo used = BlockInfo.of(1L << 32, 1024, 1000, BlockState.ACTIVE_ALLOCATED);
        BlockInfo rest = BlockInfo.of((1L << 32) + 1024, (2L << 20) - 1024, 0, BlockState.INACTIVE);
        SegmentInfo seg = new SegmentInfo(
                0,
                1L << 32,
                2L << 20,
                1024,
                1024,
                1000,
                0,
                Pool.SMALL,
                false,
                List.of(f),
                List.of(used, rest),
                PoolId.DEFAULT,
                null);
        List<TraceEntry> trace = List.of(
                TraceEntry.of(TraceAction.SEGMENT_ALLOC, 1L << 32, 2L << 20, 0).withTimeUs(1),
                TraceEntry.of(TraceAction.ALLOC, 1L << 32, 1000, 0).withTimeUs(2));
        Map<String, Object> settings = new LinkedHashMap<>();
        settings.put("PYTORCH_CUDA_ALLOC_CONF", "");
        settings.put("max_split_size", -1L);
        settings.put("garbage_collection_threshold", 0.0);
        settings.put("expandable_segments", false);
        return new TraceSnapshot(
                "gen", SourceFormat.GENERATED, List.of(seg), List.of(trace), settings, List.of(), Map.of(), true);
    }

    @Test
    void pythonsStandardPickleLoadsTheFileWithEveryKey(@TempDir Path dir) throws Exception {
        assumeTrue(TestTraces.pythonAvailable(), "python3 not found: skipped the standard-pickle check");
        Path out = dir.resolve("gen.pickle");
        new PytorchSnapshotWriter().write(generated(), out);
        String script = """
                import pickle, sys
                d = pickle.load(open(sys.argv[1], 'rb'))
                assert set(d) >= {'segments', 'device_traces', 'allocator_settings', 'external_annotations'}, d.keys()
                s = d['segments'][0]
                assert set(s) == {'device','address','total_size','allocated_size','active_size','requested_size',
                                  'stream','segment_type','segment_pool_id','is_expandable','frames','blocks'}, s.keys()
                assert s['segment_pool_id'] == (0, 0)
                b = s['blocks'][0]
                assert set(b) == {'address','size','requested_size','state','frames'}, b.keys()
                e = d['device_traces'][0][1]
                assert set(e) >= {'action','addr','size','stream','time_us','frames'}, e.keys()
                assert e['action'] == 'alloc' and e['addr'] == 1 << 32 and s['frames'][0]['name'] == 'forward'
                print('ok')
                """;
        String output = loadWithPython(script, out);
        assertThat(output.strip()).isEqualTo("ok");
    }

    /** Runs {@code script} with {@code file} as its argument; asserts it exits 0 and returns what it printed. */
    private static String loadWithPython(String script, Path file) throws Exception {
        Process p = new ProcessBuilder("python3", "-c", script, file.toString())
                .redirectErrorStream(true)
                .start();
        String output = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(p.waitFor()).as(output).isZero();
        return output;
    }

    @Test
    void keysNoReaderKnowsSurviveAtEveryLevelAndLongValuesToo() throws Exception {
        // Unknown keys on the snapshot, a segment, a block and an entry; a 100,000-character file name (longer than
        // the encoder's buffer), 2,500 entries (more than one batch) and integers at every encoding's edge.
        Map<String, Object> frame =
                new LinkedHashMap<>(Map.of("filename", "f".repeat(100_000), "line", 1, "name", "g"));
        Map<String, Object> block = new LinkedHashMap<>(Map.of("size", 1L << 20, "state", "inactive"));
        block.put("custom_block", List.of(1, 2));
        Map<String, Object> segment = new LinkedHashMap<>(Map.of("address", 1L << 40, "total_size", 1L << 20));
        segment.put("blocks", List.of(block));
        segment.put("frames", List.of(frame));
        segment.put("custom_segment", "kept");
        long[] edges = {
            0,
            255,
            256,
            65_535,
            65_536,
            Integer.MAX_VALUE,
            1L + Integer.MAX_VALUE,
            Long.MAX_VALUE,
            -1,
            -256,
            Integer.MIN_VALUE,
            Integer.MIN_VALUE - 1L,
            Long.MIN_VALUE
        };
        List<Object> entries = new ArrayList<>();
        for (int i = 0; i < 2_500; i++) {
            Map<String, Object> e = PytorchSnapshotReaderTest.entry("alloc", 512L * i, 512, 0);
            e.put("time_us", edges[i % edges.length]);
            if (i == 7) {
                e.put("custom_entry", 3.5);
            }
            entries.add(e);
        }
        Map<String, Object> top = new LinkedHashMap<>();
        top.put("segments", List.of(segment));
        top.put("device_traces", List.of(entries));
        top.put("custom_top", Map.of("a", true));
        byte[] pickle = new Pickler(true, false).dumps(top);
        TraceSnapshot read = new PytorchSnapshotReader().read(new ByteArrayInputStream(pickle), "custom.pickle");
        byte[] written = new PytorchSnapshotWriter().toBytes(read);
        TraceSnapshot back = new PytorchSnapshotReader().read(new ByteArrayInputStream(written), "back.pickle");
        assertThat(back.segments()).isEqualTo(read.segments());
        assertThat(back.deviceTraces()).isEqualTo(read.deviceTraces());
        assertThat(back.extra()).isEqualTo(read.extra()).containsEntry("custom_top", Map.of("a", true));
        assertThat(back.segments().getFirst().keys().extra()).containsEntry("custom_segment", "kept");
        assertThat(back.segments().getFirst().blocks().getFirst().keys().extra())
                .containsEntry("custom_block", List.of(1, 2));
        assertThat(back.segments().getFirst().frames())
                .singleElement()
                .satisfies(f -> assertThat(f.filename()).hasSize(100_000));
        assertThat(back.traceOf(0).get(7).keys().extra()).containsEntry("custom_entry", 3.5);
        assertThat(back.traceOf(0).stream()
                        .limit(edges.length)
                        .mapToLong(TraceEntry::timeUs)
                        .toArray())
                .containsExactly(edges);
        // Written again, the snapshot gives the same bytes.
        assertThat(new PytorchSnapshotWriter().toBytes(back)).isEqualTo(written);
    }

    @Test
    void aFailedWriteLeavesTheOldFileAndNoTemporaryOne(@TempDir Path dir) throws Exception {
        Path out = dir.resolve("snap.pickle");
        Files.writeString(out, "the old file");
        // An extra value of a type no pickle holds: the encoder refuses it half-way through the file.
        TraceSnapshot bad = new TraceSnapshot(
                "bad",
                SourceFormat.PYTORCH_SNAPSHOT,
                List.of(),
                List.of(List.of()),
                null,
                null,
                Map.of("thread", new Object()),
                true);
        assertThatThrownBy(() -> new PytorchSnapshotWriter().write(bad, out))
                .isInstanceOf(IllegalArgumentException.class);
        assertThat(Files.readString(out)).isEqualTo("the old file");
        try (var files = Files.list(dir)) {
            assertThat(files).containsExactly(out);
        }
    }

    /** A snapshot with no segments or entries whose top-level dict holds {@code extra}. */
    private static TraceSnapshot withExtra(Map<String, Object> extra) {
        return new TraceSnapshot(
                "extra", SourceFormat.PYTORCH_SNAPSHOT, List.of(), List.of(List.of()), null, null, extra, true);
    }

    /** The pickle that holds bytes, a set, a frozenset and a 300-byte integer under unknown top-level keys. */
    private static byte[] unusualValues(byte[] longBlob, byte[] hugeLittleEndian) {
        return PickleBytes.bytes(
                0x80,
                4,
                '}',
                PickleBytes.unicode("segments"),
                ']',
                's',
                PickleBytes.unicode("blob"),
                'C',
                3,
                "abc",
                's',
                PickleBytes.unicode("long_blob"),
                'B',
                PickleBytes.le(longBlob.length, 4),
                longBlob,
                's',
                PickleBytes.unicode("tags"),
                0x8f,
                '(',
                'K',
                1,
                'K',
                2,
                0x90,
                's',
                PickleBytes.unicode("frozen"),
                '(',
                PickleBytes.unicode("a"),
                0x91,
                's',
                PickleBytes.unicode("huge"),
                0x8b,
                PickleBytes.le(hugeLittleEndian.length, 4),
                hugeLittleEndian,
                's',
                '.');
    }

    @Test
    void bytesSetsFrozensetsAndLongIntegersUnderUnknownKeysAreWrittenBack(@TempDir Path dir) throws Exception {
        // The reader keeps them (PlainDataUnpickler decodes every plain-data opcode); the writer refused them with
        // "cannot pickle a [B" or "integer too large to pickle: 301 bytes" and wrote no snapshot at all.
        byte[] longBlob = new byte[300];
        for (int i = 0; i < longBlob.length; i++) {
            longBlob[i] = (byte) i;
        }
        byte[] huge = new byte[301];
        huge[300] = 1; // 2^2400, little-endian two's complement
        TraceSnapshot read = new PytorchSnapshotReader()
                .read(new ByteArrayInputStream(unusualValues(longBlob, huge)), "unusual.pickle");
        Path out = dir.resolve("unusual-out.pickle");
        new PytorchSnapshotWriter().write(read, out);
        TraceSnapshot back = new PytorchSnapshotReader().read(out);
        assertThat((byte[]) back.extra().get("blob")).isEqualTo("abc".getBytes(StandardCharsets.ISO_8859_1));
        assertThat((byte[]) back.extra().get("long_blob")).isEqualTo(longBlob);
        assertThat(back.extra().get("tags")).isInstanceOf(HashSet.class).isEqualTo(Set.of(1, 2));
        assertThat(back.extra().get("frozen")).isNotInstanceOf(HashSet.class).isEqualTo(Set.of("a"));
        assertThat(back.extra().get("huge")).isEqualTo(BigInteger.ONE.shiftLeft(2400));
        if (TestTraces.pythonAvailable()) {
            String script = """
                    import pickle, sys
                    d = pickle.load(open(sys.argv[1], 'rb'))
                    assert d['blob'] == b'abc' and d['long_blob'] == bytes(range(256)) + bytes(range(44)), d['long_blob']
                    assert type(d['tags']) is set and d['tags'] == {1, 2}, d['tags']
                    assert type(d['frozen']) is frozenset and d['frozen'] == frozenset({'a'}), d['frozen']
                    assert d['huge'] == 1 << 2400
                    print('ok')
                    """;
            loadWithPython(script, out);
        } else {
            System.out.println("python3 not found: skipped loading the written values with Python's pickle");
        }
    }

    @Test
    void aTupleSharedAtEveryLevelIsWrittenOnceAsPythonsPicklerWritesIt() {
        // A few hundred bytes that Python's pickler writes for x = (x, x) twenty-four times over (tuples are memoized):
        // the writer wrote each tuple again at every reference, 2^24 of them (for forty levels, terabytes).
        Object[] x = {1};
        for (int i = 0; i < 24; i++) {
            x = new Object[] {x, x};
        }
        byte[] written = new PytorchSnapshotWriter().toBytes(withExtra(Map.of("dag", x)));
        assertThat(written.length).isLessThan(4096);
        Object[] back = (Object[]) new PytorchSnapshotReader()
                .read(new ByteArrayInputStream(written), "dag.pickle")
                .extra()
                .get("dag");
        assertThat(back[0]).isSameAs(back[1]);
    }

    @Test
    void aTupleReachedAgainThroughItsOwnItemsStaysOneTuple() {
        // t = ([t],): Python pops the items it wrote and fetches the tuple memoized meanwhile; the writer wrote the
        // tuple twice, so that the list held a copy, ([([...],)],), not t itself.
        List<Object> list = new ArrayList<>();
        Object[] t = {list};
        list.add(t);
        byte[] written = new PytorchSnapshotWriter().toBytes(withExtra(Map.of("t", t)));
        Object[] back = (Object[]) new PytorchSnapshotReader()
                .read(new ByteArrayInputStream(written), "t.pickle")
                .extra()
                .get("t");
        assertThat(((List<?>) back[0]).getFirst()).isSameAs(back);
    }

    @Test
    void aValueNestedTooDeeplyToWriteIsRefusedNamingTheFileAndLeavesNothing(@TempDir Path dir) throws Exception {
        // The reader keeps a list nested 100,000 deep under an unknown key (its decoder does not recurse); writing it
        // ended in a StackOverflowError's stack trace, which the CLI printed as such (exit 1).
        List<Object> deep = new ArrayList<>();
        for (int i = 0; i < 100_000; i++) {
            List<Object> outer = new ArrayList<>();
            outer.add(deep);
            deep = outer;
        }
        Path out = dir.resolve("deep.pickle");
        TraceSnapshot s = withExtra(Map.of("deep", deep));
        assertThatThrownBy(() -> new PytorchSnapshotWriter().write(s, out))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage(out + ": cannot write the snapshot: a value is nested too deeply to pickle");
        try (var files = Files.list(dir)) {
            assertThat(files).isEmpty();
        }
    }

    @Test
    void anEntrysStreamPast2To63IsWrittenBackUnsigned() throws Exception {
        // Read bit for bit into a long (-1 for 2^64-1), the stream was written as -1: Python saw another stream and
        // the reader refused the writer's own file ("device_traces[0][0].stream: negative stream -1").
        BigInteger handle = new BigInteger("18446744073709551615");
        Map<String, Object> top = new LinkedHashMap<>();
        top.put("segments", List.of());
        top.put("device_traces", List.of(List.of(PytorchSnapshotReaderTest.entry("alloc", 512L, 512, handle))));
        TraceSnapshot read = new PytorchSnapshotReader()
                .read(new ByteArrayInputStream(new Pickler(true, false).dumps(top)), "stream.pickle");
        byte[] written = new PytorchSnapshotWriter().toBytes(read);
        TraceSnapshot back = new PytorchSnapshotReader().read(new ByteArrayInputStream(written), "back.pickle");
        assertThat(back.traceOf(0).getFirst().stream()).isEqualTo(-1L);
        Map<?, ?> root = (Map<?, ?>) PytorchSnapshotReader.unpickle(written, "back.pickle");
        Map<?, ?> entry = (Map<?, ?>) ((List<?>) ((List<?>) root.get("device_traces")).getFirst()).getFirst();
        assertThat(entry.get("stream")).isEqualTo(handle);
    }

    @Test
    @SuppressWarnings("unchecked") // the unpickled dicts, read back as maps of objects
    void framesNoneStaysNoneApartFromAnEmptyListAndAnAbsentKey(@TempDir Path dir) throws Exception {
        // _memory_viz.py prints an entry it does not interpret as a dict ('frames': None, [] or no key all print
        // otherwise) and draws a block with frames None or [] as <non-python> but skips a history entry without the
        // key: a round trip must keep which of the three the file had.
        Map<String, Object> none = PytorchSnapshotReaderTest.entry("alloc", 512L, 512, 0);
        none.put("frames", null);
        Map<String, Object> empty = PytorchSnapshotReaderTest.entry("alloc", 1024L, 512, 0);
        empty.put("frames", List.of());
        Map<String, Object> absent = PytorchSnapshotReaderTest.entry("alloc", 1536L, 512, 0);
        Map<String, Object> annotation = PytorchSnapshotReaderTest.entry("snapshot", 0L, 0L, 0);
        annotation.put("frames", null);
        Map<String, Object> block = new LinkedHashMap<>(Map.of("size", 2L << 20, "state", "inactive"));
        block.put("frames", null);
        Map<String, Object> segment = new LinkedHashMap<>(Map.of("address", 0L, "total_size", 2L << 20));
        segment.put("frames", null);
        segment.put("blocks", List.of(block));
        Map<String, Object> top = new LinkedHashMap<>();
        top.put("segments", List.of(segment));
        top.put("device_traces", List.of(List.of(none, empty, absent, annotation)));
        Path in = dir.resolve("none.pickle");
        Files.write(in, new Pickler(true, false).dumps(top));
        TraceSnapshot read = new PytorchSnapshotReader().read(in);
        Path out = dir.resolve("back.pickle");
        new PytorchSnapshotWriter().write(read, out);
        Map<?, ?> root = (Map<?, ?>) PytorchSnapshotReader.unpickle(Files.readAllBytes(out), "back.pickle");
        List<?> entries = (List<?>) ((List<?>) root.get("device_traces")).getFirst();
        assertThat((Map<Object, Object>) entries.get(0)).containsEntry("frames", null);
        assertThat((Map<Object, Object>) entries.get(1)).containsEntry("frames", List.of());
        assertThat((Map<Object, Object>) entries.get(2)).doesNotContainKey("frames");
        assertThat((Map<Object, Object>) entries.get(3)).containsEntry("frames", null);
        Map<?, ?> seg = (Map<?, ?>) ((List<?>) root.get("segments")).getFirst();
        assertThat((Map<Object, Object>) seg).containsEntry("frames", null);
        assertThat((Map<Object, Object>) ((List<?>) seg.get("blocks")).getFirst())
                .containsEntry("frames", null);
        // read again, the same snapshot
        TraceSnapshot back = new PytorchSnapshotReader().read(out);
        assertThat(back.deviceTraces()).isEqualTo(read.deviceTraces());
        assertThat(back.segments()).isEqualTo(read.segments());
    }
}
