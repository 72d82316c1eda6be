package io.gpumem.trace.io;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.history.BlockInfo;
import io.gpumem.history.BlockState;
import io.gpumem.history.FileKeys;
import io.gpumem.history.Frame;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.TestTraces;
import java.io.ByteArrayInputStream;
import java.math.BigInteger;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import net.razorvine.pickle.Pickler;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class PytorchSnapshotReaderTest {

    private static long count(List<TraceEntry> t, TraceAction a) {
        return t.stream().filter(e -> e.action() == a).count();
    }

    @Test
    void readsTheTrainingStepWithItsDocumentedCounts() {
        TraceSnapshot s = new PytorchSnapshotReader().read(TestTraces.file("lm2.7b-train-step.pickle"));
        assertThat(s.format()).isEqualTo(SourceFormat.PYTORCH_SNAPSHOT);
        List<TraceEntry> t = s.traceOf(0);
        assertThat(t).hasSize(19_342);
        assertThat(count(t, TraceAction.ALLOC)).isEqualTo(6_771);
        assertThat(count(t, TraceAction.SEGMENT_ALLOC)).isEqualTo(783);
        assertThat(t).allMatch(e -> e.has(TraceEntry.TIME_US));
        assertThat(s.segments()).hasSize(1_010);
        assertThat(s.recordedConfString()).isEmpty();
        assertThat(s.externalAnnotations()).isNotEmpty();
        // Segments are sorted by address and their blocks tile them.
        for (int i = 1; i < s.segments().size(); i++) {
            assertThat(Long.compareUnsigned(
                            s.segments().get(i - 1).address(),
                            s.segments().get(i).address()))
                    .isNegative();
        }
        for (SegmentInfo seg : s.segments()) {
            assertThat(seg.blocks().stream().mapToLong(BlockInfo::size).sum()).isEqualTo(seg.totalSize());
        }
    }

    @Test
    void readsTheOlderFormatWithoutTimesOrSettings() {
        TraceSnapshot s = new PytorchSnapshotReader().read(TestTraces.file("llama-offload-10-streams.pickle"));
        assertThat(s.deviceTraces()).hasSize(4);
        assertThat(s.allocatorSettings()).isNull();
        assertThat(s.recordedConfString()).isNull();
        List<TraceEntry> t = s.traceOf(0);
        assertThat(t).hasSize(10_327);
        assertThat(t).noneMatch(e -> e.has(TraceEntry.TIME_US));
        assertThat(count(t, TraceAction.SEGMENT_FREE)).isEqualTo(579);
        assertThat(t.stream().map(TraceEntry::stream).distinct().count()).isEqualTo(10);
        // Segment frees carry no frames: the key is absent, not empty.
        assertThat(t.stream().filter(e -> e.action() == TraceAction.SEGMENT_FREE))
                .allMatch(e -> e.frames() == null);
        assertThat(s.traceOf(1)).isEmpty();
    }

    @Test
    void readsExpandableSegmentsAndTheOomEntry() {
        TraceSnapshot s = new PytorchSnapshotReader().read(TestTraces.file("gnn-train-expandable-oom.pickle"));
        assertThat(s.segments()).hasSize(12).allMatch(SegmentInfo::expandable);
        assertThat(count(s.traceOf(0), TraceAction.SEGMENT_MAP)).isEqualTo(175);
        List<TraceEntry> d1 = s.traceOf(1);
        assertThat(count(d1, TraceAction.SEGMENT_UNMAP)).isEqualTo(6);
        TraceEntry oom = d1.stream()
                .filter(e -> e.action() == TraceAction.OOM)
                .findFirst()
                .orElseThrow();
        assertThat(oom.has(TraceEntry.ADDR)).isFalse();
        assertThat(oom.has(TraceEntry.DEVICE_FREE)).isTrue();
        assertThat(s.recordedConfString()).isEqualTo("expandable_segments:True");
        // compile_context is not interpreted but kept.
        assertThat(s.traceOf(0).getFirst().extra()).containsKey("compile_context");
    }

    @Test
    void readsTwoPointZeroBlocksWithHistoryAndComputesTheirAddresses() {
        TraceSnapshot s = new PytorchSnapshotReader().read(TestTraces.file("opt1.3b-state-only.pickle"));
        assertThat(count(s.traceOf(0), TraceAction.SNAPSHOT)).isEqualTo(1);
        for (SegmentInfo seg : s.segments()) {
            assertThat(seg.has(SegmentInfo.EXPANDABLE)).isFalse();
            long next = seg.address();
            for (BlockInfo b : seg.blocks()) {
                assertThat(b.has(BlockInfo.ADDRESS)).isFalse();
                assertThat(b.address()).isEqualTo(next);
                next += b.size();
            }
        }
        assertThat(s.segments().stream().flatMap(g -> g.blocks().stream())).anyMatch(b -> b.history() != null);
    }

    @Test
    void sharedFrameListsStayShared() {
        TraceSnapshot s = new PytorchSnapshotReader().read(TestTraces.file("tiny-forward.pickle"));
        var distinct = new IdentityHashMap<List<Frame>, Boolean>();
        s.traceOf(0).forEach(e -> distinct.put(e.frames(), true));
        assertThat(distinct.size()).isLessThan(s.traceOf(0).size());
    }

    /**
     * Equal stacks read as one list, however the file spells them: 6,000 distinct stacks, each given to two
     * entries 6,000 apart (the file writes each list once and refers to it again, so the second reference comes
     * long after the reader's table of recent lists has forgotten it), and a third entry per stack with a list of
     * its own that is equal to it.
     */
    @Test
    void equalStacksReadAsOneListHoweverTheFileSpellsThem() {
        int n = 6_000;
        List<List<Frame>> stacks = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            stacks.add(List.of(new Frame("model.py", i, "layer" + i), new Frame("train.py", 7, "step")));
        }
        List<TraceEntry> t = new ArrayList<>();
        for (int round = 0; round < 3; round++) {
            for (int i = 0; i < n; i++) {
                // rounds 0 and 1 share the list object; round 2 has an equal list of its own
                List<Frame> frames = round < 2 ? stacks.get(i) : new ArrayList<>(stacks.get(i));
                t.add(new TraceEntry(
                        TraceAction.ALLOC,
                        0x1000L * (round * n + i + 1),
                        512,
                        0,
                        0,
                        frames,
                        -1,
                        FileKeys.of(TraceEntry.ADDR | TraceEntry.SIZE | TraceEntry.STREAM)));
            }
        }
        TraceSnapshot written = new TraceSnapshot(
                "stacks", SourceFormat.PYTORCH_SNAPSHOT, List.of(), List.of(t), null, null, Map.of(), true);
        byte[] bytes = new PytorchSnapshotWriter().toBytes(written);
        List<TraceEntry> back = new PytorchSnapshotReader()
                .read(new ByteArrayInputStream(bytes), "stacks")
                .traceOf(0);
        assertThat(back).isEqualTo(t);
        for (int i = 0; i < n; i++) {
            assertThat(back.get(n + i).frames())
                    .as("stack %d, met again", i)
                    .isSameAs(back.get(i).frames());
            assertThat(back.get(2 * n + i).frames())
                    .as("stack %d, its own list", i)
                    .isSameAs(back.get(i).frames());
        }
    }

    // ------------------------------------------------------------------ synthetic formats

    /**
     * A written snapshot of several MiB read back from its file (in chunks, entries decoded straight into columns)
     * and from memory gives the entries written, whatever their keys: plain ones (the fast path), ones with unknown
     * keys or an odd spelling (decoded as dicts), oom entries with {@code device_free}, shared and absent frames, on
     * two devices whose entries span many buffer refills, one with values that the columns hold in 32 bits and one
     * with values they do not. Seeded; the seed is printed.
     */
    @Test
    void aLargeSnapshotReadInChunksGivesBackEveryEntryWritten(@TempDir Path dir) throws Exception {
        long seed = Long.getLong("gpumem.seed", System.nanoTime());
        System.out.println("aLargeSnapshotReadInChunksGivesBackEveryEntryWritten seed " + seed);
        Random r = new Random(seed);
        List<List<Frame>> stacks = List.of(
                List.of(new Frame("train.py", 10, "step")),
                List.of(new Frame("model.py", 3, "forward"), new Frame("train.py", 11, "step")));
        List<List<TraceEntry>> traces = new ArrayList<>();
        for (int d = 0; d < 2; d++) {
            List<TraceEntry> t = new ArrayList<>();
            for (int i = 0; i < 40_000; i++) {
                // Device 0's values fit the columns' 32-bit offsets; device 1 has values that do not.
                long addr = (0x7f00_0000_0000L + r.nextInt(1 << 20) * 512L) * (d == 1 && r.nextInt(50) == 0 ? -1 : 1);
                long size = d == 1 && r.nextInt(10) == 0 ? (1L << 33) + r.nextInt(1000) : r.nextInt(1 << 20);
                List<Frame> frames = switch (r.nextInt(3)) {
                    case 0 -> null;
                    case 1 -> stacks.get(0);
                    default -> stacks.get(1);
                };
                int kind = r.nextInt(40);
                int keys = TraceEntry.ADDR
                        | TraceEntry.SIZE
                        | TraceEntry.STREAM
                        | (r.nextBoolean() ? TraceEntry.TIME_US : 0);
                FileKeys fileKeys = FileKeys.of(keys);
                TraceAction action = TraceAction.values()[r.nextInt(5)];
                long deviceFree = -1;
                if (kind == 0) {
                    action = TraceAction.OOM;
                    fileKeys = FileKeys.of(TraceEntry.SIZE | TraceEntry.STREAM | TraceEntry.DEVICE_FREE);
                    deviceFree = r.nextLong(1L << 36);
                } else if (kind == 1) {
                    fileKeys = FileKeys.of(keys, null, null, Map.of("compile_context", "step " + i));
                }
                t.add(new TraceEntry(
                        action,
                        fileKeys.has(TraceEntry.ADDR) ? addr : 0,
                        size,
                        r.nextInt(4) == 0 ? 0x5555_0000L + d : 0,
                        fileKeys.has(TraceEntry.TIME_US) ? 1_700_000_000_000_000L + i : 0,
                        frames,
                        deviceFree,
                        fileKeys));
            }
            traces.add(t);
        }
        TraceSnapshot written =
                new TraceSnapshot("big", SourceFormat.PYTORCH_SNAPSHOT, List.of(), traces, null, null, Map.of(), true);
        Path f = dir.resolve("big.pickle");
        new PytorchSnapshotWriter().write(written, f);
        assertThat(Files.size(f)).isGreaterThan(3L << 20);
        List<Long> bytesRead = new ArrayList<>();
        TraceSnapshot fromFile = new PytorchSnapshotReader().read(f, bytesRead::add);
        // the progress of reading: chunk by chunk, rising, up to the whole file
        assertThat(bytesRead).hasSizeGreaterThan(2).isSorted().doesNotHaveDuplicates();
        assertThat(bytesRead.getLast()).isEqualTo(Files.size(f));
        TraceSnapshot fromMemory =
                new PytorchSnapshotReader().read(new ByteArrayInputStream(Files.readAllBytes(f)), "big");
        for (int d = 0; d < 2; d++) {
            assertThat(fromFile.traceOf(d)).as("device %d, seed %d", d, seed).isEqualTo(traces.get(d));
            assertThat(fromMemory.traceOf(d)).as("device %d, seed %d", d, seed).isEqualTo(traces.get(d));
        }
        // Frames the file shares stay shared.
        List<TraceEntry> t = fromFile.traceOf(1);
        List<Frame> seen = null;
        for (TraceEntry e : t) {
            if (e.frames() != null && e.frames().size() == 2) {
                if (seen == null) {
                    seen = e.frames();
                }
                assertThat(e.frames()).isSameAs(seen);
            }
        }
    }

    /**
     * Entries as PyTorch writes them (each with its own list of frame dicts; a dict met before comes from the memo)
     * take the decoder's fast path, which must give what decoding them as dicts gives: the frames of every form
     * of the list (several items, one item with {@code APPEND}, none), new and remembered dicts, a dict with a key
     * beside {@code filename}, {@code line} and {@code name}, one whose line is a {@code LONG1} integer and one
     * that gives its line twice (the fast path leaves those two entries to the general decoder). A dict met again
     * gives the same {@code Frame}.
     */
    @Test
    void entriesWithTheirOwnFrameListsReadAsWritten() {
        PickleBytes p = PickleBytes.deviceListOpened();
        // 0: two new frame dicts
        int[] ab = new int[2];
        p.entryStart("alloc", 0x1000, 512);
        p.string("frames").op(']').memoize().op('(');
        ab[0] = p.frameDict("train.py", 10, "step", null);
        ab[1] = p.frameDict("model.py", 3, "forward", null);
        p.op('e').op('u');
        // 1: both from the memo, then a new one with an extra key and a two-byte line
        p.entryStart("alloc", 0x2000, 1024);
        p.string("frames").op(']').memoize().op('(').get(ab[0]).get(ab[1]);
        int c = p.frameDict("data.py", 300, "load", "extra");
        p.op('e').op('u');
        // 2: one frame, APPEND, and a key after the list
        p.op('}').memoize().op('(');
        p.string("action")
                .string("free_requested")
                .string("frames")
                .op(']')
                .memoize()
                .get(c)
                .op('a');
        p.keysAfterFrames(0x1000, 512);
        // 3: an empty list, then the other keys
        p.op('}').memoize().op('(');
        p.string("action").string("free_completed").string("frames").op(']').memoize();
        p.keysAfterFrames(0x1000, 512);
        // 4: a frame whose line is a LONG1 (the general decoder's)
        p.entryStart("alloc", 0x3000, 2048);
        p.string("frames").op(']').memoize().op('(').get(ab[1]);
        p.op('}').memoize().op('(').string("filename").string("big.py").string("line");
        p.op(0x8a).op(1).op(7).string("name").string("far").op('u');
        p.op('e').op('u');
        // 5: a frame dict that gives its line twice (the general decoder keeps the first, as razorvine does)
        p.entryStart("alloc", 0x4000, 512);
        p.string("frames").op(']').memoize().op('(');
        p.op('}')
                .memoize()
                .op('(')
                .string("filename")
                .string("twice.py")
                .string("line")
                .integer(5);
        p.string("line").integer(6).string("name").string("again").op('u');
        p.op('e').op('u');
        p.op('e').op('e').op('u').op('.');
        byte[] bytes = p.bytes();

        TraceSnapshot s = new PytorchSnapshotReader().read(new ByteArrayInputStream(bytes), "own-frames");
        List<TraceEntry> all = s.traceOf(0);
        assertThat(all.getFirst().action()).isEqualTo(TraceAction.SEGMENT_ALLOC);
        List<TraceEntry> t = all.subList(1, all.size());
        Frame a = new Frame("train.py", 10, "step");
        Frame b = new Frame("model.py", 3, "forward");
        Frame cf = new Frame("data.py", 300, "load");
        assertThat(t)
                .extracting(TraceEntry::action)
                .containsExactly(
                        TraceAction.ALLOC,
                        TraceAction.ALLOC,
                        TraceAction.FREE_REQUESTED,
                        TraceAction.FREE_COMPLETED,
                        TraceAction.ALLOC,
                        TraceAction.ALLOC);
        assertThat(t)
                .extracting(TraceEntry::addr)
                .containsExactly(0x1000L, 0x2000L, 0x1000L, 0x1000L, 0x3000L, 0x4000L);
        assertThat(t.get(0).frames()).containsExactly(a, b);
        assertThat(t.get(1).frames()).containsExactly(a, b, cf);
        assertThat(t.get(2).frames()).containsExactly(cf);
        assertThat(t.get(3).frames()).isEmpty();
        assertThat(t.get(4).frames()).containsExactly(b, new Frame("big.py", 7, "far"));
        assertThat(t.get(5).frames()).containsExactly(new Frame("twice.py", 5, "again"));
        assertThat(t.get(1).frames().get(0)).isSameAs(t.get(0).frames().get(0));
        assertThat(t.get(2).frames().get(0)).isSameAs(t.get(1).frames().get(2));
        assertThat(t.get(4).frames().get(0)).isSameAs(t.get(0).frames().get(1));
    }

    /**
     * Once an entry is read, the memo keeps its stack in place of its own frame list (the lists of a recording in
     * PyTorch's format would otherwise outlive the reading, one per entry): a later entry that names the list
     * gets the same frames, and an {@code APPEND} to it is refused like any append to a value that is not a list,
     * naming the opcode and its byte.
     */
    @Test
    void anEntrysOwnFrameListNamedAgainAfterItWasReadGivesTheSameStack() {
        PickleBytes p = PickleBytes.deviceListOpened();
        p.entryStart("alloc", 0x1000, 512);
        p.string("frames").op(']');
        int list = p.memoIndex();
        p.memoize().op('(');
        p.frameDict("train.py", 10, "step", null);
        p.frameDict("model.py", 3, "forward", null);
        p.op('e').op('u');
        p.op('e'); // APPENDS: the entry is read, its list's slot now holds its stack
        p.op('(');
        p.entryStart("alloc", 0x2000, 512);
        p.string("frames").get(list).op('u');
        p.op('e');
        byte[] head = p.bytes();
        p.op('e').op('u').op('.');
        byte[] bytes = p.bytes();

        List<TraceEntry> t = new PytorchSnapshotReader()
                .read(new ByteArrayInputStream(bytes), "named-again")
                .traceOf(0);
        List<Frame> stack = List.of(new Frame("train.py", 10, "step"), new Frame("model.py", 3, "forward"));
        assertThat(t).hasSize(3);
        assertThat(t.get(1).frames()).isEqualTo(stack);
        assertThat(t.get(2).frames()).isSameAs(t.get(1).frames());

        // the same file, but appending to the list after its entry was read
        PickleBytes q = new PickleBytes();
        q.raw(head);
        // the device lists closed, a key (None), then the list named again and appended to
        q.op('e').op('N').get(list).op('N');
        int appendAt = q.bytes().length;
        q.op('a').op('u').op('.');
        assertThatThrownBy(() -> new PytorchSnapshotReader().read(new ByteArrayInputStream(q.bytes()), "appended"))
                .hasMessageContaining("APPEND at byte " + appendAt);
    }

    /** A pickle written opcode by opcode, its memo indexes counted (MEMOIZE) and its strings memoised once each. */
    private static final class PickleBytes {
        private final java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
        private final Map<String, Integer> strings = new HashMap<>();
        private int memo;

        PickleBytes op(int b) {
            out.write(b);
            return this;
        }

        /** MEMOIZE; returns the index it stored at. */
        PickleBytes memoize() {
            out.write(0x94);
            memo++;
            return this;
        }

        /**
         * A snapshot opened up to its one device's trace list, with a {@code segment_alloc} entry appended (the
         * decoder knows a device's list once an item is appended to it) and a mark for the next batch of entries.
         */
        static PickleBytes deviceListOpened() {
            PickleBytes p = new PickleBytes();
            p.op(0x80).op(4).op('}').memoize().op('(');
            p.string("segments").op(']').memoize();
            p.string("device_traces").op(']').memoize().op('(').op(']').memoize();
            p.entryStart("segment_alloc", 0x1000, 1 << 21);
            p.op('u').op('a').op('(');
            return p;
        }

        /** An entry's addr, size and stream (0) after its frames, and its SETITEMS. */
        void keysAfterFrames(long addr, long size) {
            string("addr")
                    .integer(addr)
                    .string("size")
                    .integer(size)
                    .string("stream")
                    .integer(0)
                    .op('u');
        }

        /** The index the next MEMOIZE stores at. */
        int memoIndex() {
            return memo;
        }

        /** Bytes written elsewhere, as they are (their memo stores counted by the caller). */
        PickleBytes raw(byte[] b) {
            out.writeBytes(b);
            return this;
        }

        PickleBytes get(int index) {
            return op('h').op(index);
        }

        PickleBytes string(String v) {
            Integer at = strings.get(v);
            if (at != null) {
                return get(at);
            }
            byte[] b = v.getBytes(java.nio.charset.StandardCharsets.UTF_8);
            op(0x8c).op(b.length);
            out.writeBytes(b);
            strings.put(v, memo);
            return memoize();
        }

        PickleBytes integer(long v) {
            if (v < 256) {
                return op('K').op((int) v);
            }
            if (v < 65536) {
                return op('M').op((int) v & 0xff).op((int) (v >>> 8));
            }
            op('J');
            for (int i = 0; i < 4; i++) {
                op((int) (v >>> (8 * i)) & 0xff);
            }
            return this;
        }

        /** An entry dict opened with action, addr, size and stream; the caller adds frames and SETITEMS. */
        void entryStart(String action, long addr, long size) {
            op('}').memoize().op('(');
            string("action")
                    .string(action)
                    .string("addr")
                    .integer(addr)
                    .string("size")
                    .integer(size);
            string("stream").integer(0);
        }

        /** A new frame dict (and an extra key holding None when given); returns its memo index. */
        int frameDict(String file, int line, String name, String extraKey) {
            op('}');
            int at = memo;
            memoize().op('(');
            string("filename")
                    .string(file)
                    .string("line")
                    .integer(line)
                    .string("name")
                    .string(name);
            if (extraKey != null) {
                string(extraKey).op('N');
            }
            op('u');
            return at;
        }

        byte[] bytes() {
            return out.toByteArray();
        }
    }

    static byte[] pickle(Object o) throws Exception {
        return new Pickler(true, false).dumps(o);
    }

    static Map<String, Object> entry(String action, Object addr, Object size, Object stream) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("action", action);
        m.put("addr", addr);
        m.put("size", size);
        m.put("stream", stream);
        return m;
    }

    @Test
    void readsABareSegmentListAsTwoPointZeroState() throws Exception {
        Map<String, Object> block = new HashMap<>(Map.of(
                "size",
                1024L,
                "state",
                "active_allocated",
                "history",
                List.of(Map.of("addr", 4096L, "real_size", 1000L, "frames", List.of()))));
        Map<String, Object> free = new HashMap<>(Map.of("size", 2L * 1024 * 1024 - 1024, "state", "inactive"));
        Map<String, Object> seg = new HashMap<>(Map.of(
                "device",
                0,
                "address",
                4096L,
                "total_size",
                2L << 20,
                "allocated_size",
                1024L,
                "active_size",
                1024L,
                "stream",
                0,
                "segment_type",
                "small",
                "blocks",
                List.of(block, free)));
        TraceSnapshot s =
                new PytorchSnapshotReader().read(new ByteArrayInputStream(pickle(List.of(seg))), "old.pickle");
        assertThat(s.format()).isEqualTo(SourceFormat.PYTORCH_SEGMENT_LIST);
        assertThat(s.deviceTraces()).isEmpty();
        assertThat(s.segments().getFirst().blocks().get(1).address()).isEqualTo(4096L + 1024);
        assertThat(s.segments()
                        .getFirst()
                        .blocks()
                        .getFirst()
                        .history()
                        .getFirst()
                        .realSize())
                .isEqualTo(1000L);
    }

    @Test
    void keepsUnknownKeysAndBothPendingFreeSpellings() throws Exception {
        Map<String, Object> e1 = entry("alloc", 1L << 40, 100, new BigInteger("18446744073709551615"));
        Map<String, Object> e2 = entry("free_requested", 5, 6, 0);
        e2.put("user_metadata", "x");
        Map<String, Object> b1 = Map.of(
                "address",
                8192L,
                "size",
                512L,
                "requested_size",
                100L,
                "state",
                "active_awaiting_free",
                "frames",
                List.of());
        Map<String, Object> b2 = Map.of(
                "address",
                8704L,
                "size",
                512L,
                "requested_size",
                0L,
                "state",
                "active_pending_free",
                "frames",
                List.of());
        Map<String, Object> seg = new HashMap<>(Map.of(
                "device",
                0,
                "address",
                8192L,
                "total_size",
                1024L,
                "allocated_size",
                0L,
                "active_size",
                1024L,
                "requested_size",
                100L,
                "stream",
                0,
                "segment_type",
                "small",
                "blocks",
                List.of(b1, b2)));
        seg.put("segment_pool_id", new Object[] {0, 0});
        seg.put("is_expandable", false);
        seg.put("new_segment_key", 7);
        Map<String, Object> top = new LinkedHashMap<>();
        top.put("segments", List.of(seg));
        top.put("device_traces", List.of(List.of(e1, e2)));
        top.put("future_key", List.of(1, 2));
        TraceSnapshot s = new PytorchSnapshotReader().read(new ByteArrayInputStream(pickle(top)), "new.pickle");
        TraceEntry withExtra = s.traceOf(0).get(1);
        assertThat(withExtra.actionName()).isEqualTo("free_requested");
        assertThat(withExtra.extra()).containsEntry("user_metadata", "x");
        assertThat(s.traceOf(0).getFirst().stream()).isEqualTo(-1L); // unsigned 2^64-1 kept bit for bit
        assertThat(s.segments().getFirst().blocks())
                .extracting(BlockInfo::state)
                .containsOnly(BlockState.ACTIVE_PENDING_FREE);
        assertThat(s.segments().getFirst().blocks().getFirst().stateName()).isEqualTo("active_awaiting_free");
        assertThat(s.segments().getFirst().extra()).containsEntry("new_segment_key", 7);
        assertThat(s.extra()).containsKey("future_key");
    }

    @Test
    void malformedFieldsNameTheEntryAndField() throws Exception {
        Map<String, Object> top = new LinkedHashMap<>();
        top.put("segments", List.of());
        top.put("device_traces", List.of(List.of(entry("alloc", 1, 2, 0), entry("alloc", 1, "big", 0))));
        assertThatThrownBy(() -> new PytorchSnapshotReader().read(new ByteArrayInputStream(pickle(top)), "f.pickle"))
                .isInstanceOf(TraceFormatException.class)
                .hasMessage("f.pickle: device_traces[0][1].size: expected an integer, got str");
        Map<String, Object> noAction = new LinkedHashMap<>(entry("alloc", 1, 2, 0));
        noAction.remove("action");
        top.put("device_traces", List.of(List.of(noAction)));
        assertThatThrownBy(() -> new PytorchSnapshotReader().read(new ByteArrayInputStream(pickle(top)), "f.pickle"))
                .hasMessage("f.pickle: device_traces[0][0].action: missing");
        assertThatThrownBy(() -> new PytorchSnapshotReader().read(new ByteArrayInputStream(pickle(42)), "n.pickle"))
                .hasMessageContaining("expected a snapshot dict or a list of segments, got int");
        assertThatThrownBy(() -> new PytorchSnapshotReader()
                        .read(new ByteArrayInputStream(pickle(Map.of("device_traces", List.of()))), "m.pickle"))
                .hasMessageContaining("m.pickle: segments: missing");
    }

    @Test
    void truncatedAndCorruptFilesFailWithTheFileName(@TempDir Path dir) throws Exception {
        Map<String, Object> top = new LinkedHashMap<>();
        top.put("segments", List.of());
        List<Object> entries = new ArrayList<>();
        for (int i = 0; i < 100; i++) {
            entries.add(entry("alloc", 512L * (i + 1), 100, 0));
        }
        top.put("device_traces", List.of(entries));
        byte[] whole = pickle(top);
        for (int cut : new int[] {1, 2, whole.length / 3, whole.length / 2, whole.length - 1}) {
            Path f = dir.resolve("cut" + cut + ".pickle");
            Files.write(f, Arrays.copyOf(whole, cut));
            assertThatThrownBy(() -> new PytorchSnapshotReader().read(f))
                    .isInstanceOf(TraceFormatException.class)
                    .hasMessageStartingWith(f.toString() + ": ")
                    .hasMessageContaining("truncated or corrupt");
        }
        Path garbage = dir.resolve("garbage.pickle");
        byte[] junk = new byte[4096];
        new Random(7).nextBytes(junk);
        junk[0] = (byte) 0x80;
        junk[1] = 2;
        Files.write(garbage, junk);
        assertThatThrownBy(() -> new PytorchSnapshotReader().read(garbage)).isInstanceOf(TraceFormatException.class);
        assertThatThrownBy(() -> new PytorchSnapshotReader().read(dir.resolve("missing.pickle")))
                .hasMessageContaining("no such file");
    }

    @Test
    void olderPickleProtocolsAreRecognisedAndRead(@TempDir Path dir) throws Exception {
        org.junit.jupiter.api.Assumptions.assumeTrue(TestTraces.pythonAvailable(), "python3 not found: skipped");
        for (int protocol = 0; protocol <= 5; protocol++) {
            Path f = dir.resolve("p" + protocol + ".pickle");
            Process p = new ProcessBuilder(
                            "python3",
                            "-c",
                            "import pickle,sys; pickle.dump({'segments': [], "
                                    + "'device_traces': [[{'action': 'alloc', 'addr': 2**40, 'size': 512, 'stream': 0}]]}, "
                                    + "open(sys.argv[1], 'wb'), protocol=" + protocol + ")",
                            f.toString())
                    .start();
            assertThat(p.waitFor()).isZero();
            TraceSnapshot s = TraceReaders.read(f);
            assertThat(s.traceOf(0))
                    .as("protocol " + protocol)
                    .singleElement()
                    .satisfies(e -> assertThat(e.addr()).isEqualTo(1L << 40));
        }
    }

    @Test
    void sizeLimitsAreEnforcedBeforeAndWhileReading(@TempDir Path dir) throws Exception {
        Map<String, Object> top = new LinkedHashMap<>();
        top.put("segments", List.of());
        top.put("device_traces", List.of(List.of(entry("alloc", 512, 1, 0), entry("alloc", 1024, 1, 0))));
        Path f = dir.resolve("two.pickle");
        Files.write(f, pickle(top));
        assertThatThrownBy(() -> new PytorchSnapshotReader(new ReadLimits(10, 100)).read(f))
                .hasMessageContaining("over the limit of 10 bytes");
        assertThatThrownBy(() -> new PytorchSnapshotReader(new ReadLimits(1 << 20, 1)).read(f))
                .hasMessageContaining("more than 1 trace entries");
        assertThat(new PytorchSnapshotReader(new ReadLimits(1 << 20, 2)).read(f).entryCount())
                .isEqualTo(2);
    }
}
