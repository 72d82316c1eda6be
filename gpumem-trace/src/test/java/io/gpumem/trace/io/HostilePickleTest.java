package io.gpumem.trace.io;

import static io.gpumem.trace.io.PickleBytes.bytes;
import static io.gpumem.trace.io.PickleBytes.le;
import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayInputStream;
import java.lang.management.ManagementFactory;
import java.math.BigInteger;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import net.razorvine.pickle.Pickler;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Snapshots built to hurt the reader (issue 12): lengths longer than the file, code to run, flipped opcodes,
 * expansion through shared references, and well-formed pickles whose fields are wrong. Each fails with a
 * {@link TraceFormatException} that says what is wrong, after allocating little.
 */
class HostilePickleTest {

    private static long allocatedBytes() {
        return ((com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean()).getCurrentThreadAllocatedBytes();
    }

    /** Reads from a file (the path the commands use) and returns the error, checking what reading allocated. */
    private static TraceFormatException readFails(Path dir, byte[] pickle, long maxAllocated) throws Exception {
        Path f = dir.resolve("hostile.pickle");
        Files.write(f, pickle);
        long before = allocatedBytes();
        Throwable t = org.assertj.core.api.Assertions.catchThrowable(() -> TraceReaders.read(f));
        long used = allocatedBytes() - before;
        assertThat(t).isInstanceOf(TraceFormatException.class);
        assertThat(t.getMessage()).startsWith(f.toString()).doesNotContain("java.", "Exception");
        assertThat(used)
                .as("bytes allocated while reading a %d-byte file", pickle.length)
                .isLessThan(maxAllocated);
        return (TraceFormatException) t;
    }

    @Test
    void aDeclaredLengthLongerThanTheFileIsRefusedBeforeAllocating(@TempDir Path dir) throws Exception {
        // BINUNICODE8 declaring 2 GiB (used to end in OutOfMemoryError) and BINUNICODE declaring 1 GiB (used to
        // allocate 1 GiB before failing), BINBYTES8, BYTEARRAY8, BINSTRING negative, FRAME.
        assertThat(readFails(dir, bytes(0x80, 4, 0x8d, le(1L << 31, 8), "abc"), 8 << 20)
                        .getMessage())
                .endsWith("not a readable pickle (truncated or corrupt): opcode BINUNICODE8 at byte 2 declares"
                        + " 2147483648 bytes but only 3 are left in the file");
        assertThat(readFails(dir, bytes(0x80, 4, 'X', le(1L << 30, 4), "abc"), 8 << 20)
                        .getMessage())
                .contains("opcode BINUNICODE at byte 2 declares 1073741824 bytes but only 3 are left");
        assertThat(readFails(dir, bytes(0x80, 4, 0x8e, le(1L << 40, 8), "ab."), 8 << 20)
                        .getMessage())
                .contains("BINBYTES8 at byte 2 declares 1099511627776 bytes but only 3 are left");
        assertThat(readFails(dir, bytes(0x80, 5, 0x96, le(-1, 8), "ab."), 8 << 20)
                        .getMessage())
                .contains("BYTEARRAY8 at byte 2 declares a negative length");
        assertThat(readFails(dir, bytes(0x80, 2, 'T', le(-5, 4), "ab."), 8 << 20)
                        .getMessage())
                .contains("BINSTRING at byte 2 declares a negative length -5");
        assertThat(readFails(dir, bytes(0x80, 4, 0x95, le(1L << 33, 8), "]."), 8 << 20)
                        .getMessage())
                .contains("FRAME at byte 2 declares 8589934592 bytes but only 2 are left");
        assertThat(readFails(dir, bytes(0x80, 2, 0x8b, le(1 << 30, 4), "ab."), 8 << 20)
                        .getMessage())
                .contains("LONG4 at byte 2 declares 1073741824 bytes but only 3 are left");
        assertThat(readFails(dir, bytes("(L", "9".repeat(100_000), "L\n."), 8 << 20)
                        .getMessage())
                .contains("LONG at byte 1 holds an integer of more than 64 digits");
    }

    @Test
    void aPickleThatCallsAGlobalIsRefusedAsCode(@TempDir Path dir) throws Exception {
        // What pickle.dumps of an object whose __reduce__ returns (os.system, ("echo hi",)) holds: protocol 0 ...
        byte[] p0 = bytes("(dp0\nVsegments\np1\n(lp2\ncposix\nsystem\np3\n(Vecho hi\np4\ntp5\nRp6\nas.");
        // The message says so plainly, not as a corrupt file.
        assertThat(readFails(dir, p0, 8 << 20).getMessage())
                .isEqualTo(dir.resolve("hostile.pickle")
                        + ": the file asks to run code (GLOBAL posix.system at byte 23); only plain data is accepted");
        // ... and protocol 4 (STACK_GLOBAL after the two names).
        byte[] p4 = bytes(
                0x80,
                4,
                '}',
                0x94,
                0x8c,
                8,
                "segments",
                0x94,
                ']',
                0x94,
                0x8c,
                2,
                "os",
                0x94,
                0x8c,
                6,
                "system",
                0x94,
                0x93,
                0x94,
                0x8c,
                7,
                "echo hi",
                0x85,
                'R',
                'a',
                's',
                '.');
        assertThat(readFails(dir, p4, 8 << 20).getMessage())
                .contains("the file asks to run code (STACK_GLOBAL os.system at byte 31); only plain data is accepted");
        for (int op : new int[] {'R', 'b', 'o', 0x81, 0x92, 0x82, 'Q'}) {
            assertThat(readFails(dir, bytes(0x80, 4, ']', 'N', op, '.'), 8 << 20)
                            .getMessage())
                    .contains("the file asks to run code (" + PlainDataUnpickler.opName((short) op) + " at byte 4)");
        }
    }

    @Test
    void anOpcodeOnTheWrongValueNamesTheOpcodeNotAJavaClass(@TempDir Path dir) throws Exception {
        // APPENDS onto an int (used to leak "class java.lang.Integer cannot be cast to class java.util.List"),
        // SETITEMS onto a list, APPEND with an empty stack, a memo lookup of nothing, an unknown opcode.
        assertThat(readFails(dir, bytes(0x80, 2, 'K', 1, '(', 'K', 2, 'e', '.'), 8 << 20)
                        .getMessage())
                .endsWith("opcode APPENDS at byte 7 does not fit the values before it (wrong type of value)");
        assertThat(readFails(dir, bytes(0x80, 2, ']', '(', 'K', 2, 'K', 3, 'u', '.'), 8 << 20)
                        .getMessage())
                .contains("opcode SETITEMS at byte 8 does not fit the values before it");
        assertThat(readFails(dir, bytes(0x80, 2, 'a', '.'), 8 << 20).getMessage())
                .contains("opcode APPEND at byte 2");
        assertThat(readFails(dir, bytes(0x80, 2, 'h', 9, '.'), 8 << 20).getMessage())
                .contains("opcode BINGET at byte 2");
        assertThat(readFails(dir, bytes(0x80, 2, 0xff, '.'), 8 << 20).getMessage())
                .contains("opcode 0xff at byte 2");
    }

    @Test
    void sharedReferencesCannotExpandAFileBeyondOneRecordPerByte(@TempDir Path dir) throws Exception {
        // 2,000 references to one list of 2,000 entries: ~100 KB of pickle that would become 4 million entries.
        List<Object> entries = new ArrayList<>();
        for (int i = 0; i < 2_000; i++) {
            entries.add(PytorchSnapshotReaderTest.entry("alloc", 512L * i, 512, 0));
        }
        Map<String, Object> top = new LinkedHashMap<>();
        top.put("segments", List.of());
        top.put("device_traces", Collections.nCopies(2_000, entries));
        byte[] pickle = new Pickler(true, false).dumps(top);
        assertThat(pickle.length).isLessThan(200_000);
        assertThat(readFails(dir, pickle, 256L << 20).getMessage())
                .contains("the file refers to the same values more often than it has bytes");
    }

    @Test
    void sharedBlocksAndBlockHistoriesCannotExpandAFileEither(@TempDir Path dir) throws Exception {
        // 1,000 references to one segment whose block list refers 1,000 times to one block: a million blocks ...
        Map<String, Object> block = new LinkedHashMap<>(Map.of("size", 512, "state", "inactive"));
        Map<String, Object> segment = new LinkedHashMap<>(Map.of("address", 0, "total_size", 512_000));
        segment.put("blocks", Collections.nCopies(1_000, block));
        byte[] blocks = new Pickler(true, false).dumps(Map.of("segments", Collections.nCopies(1_000, segment)));
        assertThat(blocks.length).isLessThan(20_000);
        assertThat(readFails(dir, blocks, 256L << 20).getMessage())
                .contains("segments[")
                .contains("the file refers to the same values more often than it has bytes");
        // ... and one block whose history refers 1,000 times to one record, in 1,000 references to its segment.
        Map<String, Object> record = new LinkedHashMap<>(Map.of("addr", 0, "real_size", 512));
        Map<String, Object> withHistory = new LinkedHashMap<>(block);
        withHistory.put("history", Collections.nCopies(1_000, record));
        Map<String, Object> oneBlock = new LinkedHashMap<>(Map.of("address", 0, "total_size", 512));
        oneBlock.put("blocks", List.of(withHistory));
        byte[] histories = new Pickler(true, false).dumps(Map.of("segments", Collections.nCopies(1_000, oneBlock)));
        assertThat(histories.length).isLessThan(20_000);
        assertThat(readFails(dir, histories, 256L << 20).getMessage())
                .contains(".history[")
                .contains("the file refers to the same values more often than it has bytes");
    }

    private static TraceFormatException invalid(Map<String, Object> entry, Object settings) throws Exception {
        Map<String, Object> top = new LinkedHashMap<>();
        top.put("segments", List.of());
        top.put("device_traces", List.of(List.of(PytorchSnapshotReaderTest.entry("alloc", 512, 512, 7), entry)));
        if (settings != null) {
            top.put("allocator_settings", settings);
        }
        byte[] b = new Pickler(true, false).dumps(top);
        Throwable t = org.assertj.core.api.Assertions.catchThrowable(
                () -> new PytorchSnapshotReader().read(new ByteArrayInputStream(b), "s.pickle"));
        assertThat(t).isInstanceOf(TraceFormatException.class);
        return (TraceFormatException) t;
    }

    @Test
    void unknownOrMissingFieldsNameTheDeviceTraceEntryAndField() throws Exception {
        assertThat(invalid(PytorchSnapshotReaderTest.entry("teleport", 512, 512, 0), null)
                        .getMessage())
                .startsWith("s.pickle: device_traces[0][1].action: unknown action 'teleport' (expected one of alloc,");
        Map<String, Object> noSize = PytorchSnapshotReaderTest.entry("free_requested", 512, 512, 0);
        noSize.remove("size");
        assertThat(invalid(noSize, null))
                .hasMessage("s.pickle: device_traces[0][1].size: missing (every free_requested entry has one)");
        Map<String, Object> noAddr = PytorchSnapshotReaderTest.entry("segment_alloc", 512, 512, 0);
        noAddr.remove("addr");
        assertThat(invalid(noAddr, null))
                .hasMessage("s.pickle: device_traces[0][1].addr: missing (every segment_alloc entry has one)");
        assertThat(invalid(PytorchSnapshotReaderTest.entry("alloc", 512, 512, -5), null))
                .hasMessage("s.pickle: device_traces[0][1].stream: negative stream -5");
        assertThat(invalid(
                        PytorchSnapshotReaderTest.entry("alloc", 512, 512, new BigInteger("-99999999999999999999")),
                        null))
                .hasMessageContaining("device_traces[0][1].stream: negative stream");
    }

    @Test
    void malformedAllocatorSettingsNameTheKey() throws Exception {
        Map<String, Object> ok = PytorchSnapshotReaderTest.entry("alloc", 1024, 512, 0);
        assertThat(invalid(ok, "garbage")).hasMessage("s.pickle: allocator_settings: expected a dict, got str");
        assertThat(invalid(ok, Map.of("expandable_segments", "maybe")))
                .hasMessage("s.pickle: allocator_settings.expandable_segments: expected a bool, got str");
        assertThat(invalid(ok, Map.of("max_split_size", "big")))
                .hasMessage("s.pickle: allocator_settings.max_split_size: expected an integer, got str");
        assertThat(invalid(ok, Map.of("garbage_collection_threshold", 7.5)))
                .hasMessage("s.pickle: allocator_settings.garbage_collection_threshold: expected a fraction between"
                        + " 0 and 1, got 7.5");
        assertThat(invalid(ok, Map.of("roundup_power2_divisions", Map.of("x", 4))))
                .hasMessage(
                        "s.pickle: allocator_settings.roundup_power2_divisions[x]: expected a power-of-two size in MiB"
                                + " as a string key");
        assertThat(invalid(ok, Map.of("PYTORCH_CUDA_ALLOC_CONF", 3)))
                .hasMessage("s.pickle: allocator_settings.PYTORCH_CUDA_ALLOC_CONF: expected a string, got int");
    }

    @Test
    void setsAndKeysThatAreNotStringsAreNamedInPythonsTerms(@TempDir Path dir) throws Exception {
        // A frozenset or set where a list belongs was named by its Java class (UnmodifiableSet, HashSet).
        assertThat(readFails(
                                dir,
                                bytes(0x80, 4, '}', PickleBytes.unicode("segments"), '(', 'K', 1, 0x91, 's', '.'),
                                8 << 20)
                        .getMessage())
                .endsWith("hostile.pickle: segments: expected a list, got frozenset");
        byte[] setOfBlocks = bytes(
                0x80,
                4,
                ']',
                '}',
                PickleBytes.unicode("address"),
                'K',
                0,
                's',
                PickleBytes.unicode("total_size"),
                'K',
                0,
                's',
                PickleBytes.unicode("blocks"),
                0x8f,
                's',
                'a',
                '.');
        assertThat(readFails(dir, setOfBlocks, 8 << 20).getMessage())
                .endsWith("hostile.pickle: segments[0].blocks: expected a list, got set");
        // A key of the snapshot, a segment or an entry that is not a string was kept as its Java text (a tuple's
        // "[Ljava.lang.Object;@1b6d3586") and written back as that string.
        Map<Object, Object> top = new LinkedHashMap<>();
        top.put("segments", List.of());
        top.put(new Object[] {"a", 1}, 1);
        assertThat(readFails(dir, new Pickler(true, false).dumps(top), 8 << 20).getMessage())
                .endsWith("hostile.pickle: expected string keys, got a key of type tuple");
        Map<Object, Object> entry = new LinkedHashMap<>(PytorchSnapshotReaderTest.entry("alloc", 512, 512, 0));
        entry.put(7, "x");
        Map<Object, Object> withEntry = new LinkedHashMap<>();
        withEntry.put("segments", List.of());
        withEntry.put("device_traces", List.of(List.of(entry)));
        assertThat(readFails(dir, new Pickler(true, false).dumps(withEntry), 8 << 20)
                        .getMessage())
                .endsWith("hostile.pickle: device_traces[0][0]: expected string keys, got a key of type int (7)");
        Map<Object, Object> segment = new LinkedHashMap<>(Map.of("address", 0L, "total_size", 0L));
        segment.put(2.5, "x");
        assertThat(readFails(dir, new Pickler(true, false).dumps(Map.of("segments", List.of(segment))), 8 << 20)
                        .getMessage())
                .endsWith("hostile.pickle: segments[0]: expected string keys, got a key of type float (2.5)");
    }
}
