package io.gpumem.trace.io;

import static io.gpumem.trace.io.PickleBytes.bytes;
import static io.gpumem.trace.io.PickleBytes.le;
import static io.gpumem.trace.io.PickleBytes.unicode;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.history.PoolId;
import io.gpumem.trace.window.RecordedConfig;
import java.io.ByteArrayInputStream;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import net.razorvine.pickle.Pickler;
import org.junit.jupiter.api.Test;

/**
 * Each field of a snapshot's segments, blocks and allocator settings, read at the edges of what it may hold: the
 * value just inside is read, the value just outside (or of the wrong type) is refused with a message naming the
 * file, the field's path and what was found there, in Python's words.
 */
class SnapshotFieldsTest {

    private static final long BASE = 0x7f0000000000L;

    /** One small segment of one inactive block, one alloc entry, and what {@code edit} changes. */
    private static byte[] snapshot(Consumer<Map<String, Object>> edit) throws Exception {
        Map<String, Object> block = new LinkedHashMap<>();
        block.put("size", 2L << 20);
        block.put("state", "inactive");
        Map<String, Object> segment = new LinkedHashMap<>();
        segment.put("device", 0);
        segment.put("address", BASE);
        segment.put("total_size", 2L << 20);
        segment.put("stream", 0);
        segment.put("segment_type", "small");
        segment.put("blocks", new ArrayList<>(List.of(block)));
        Map<String, Object> top = new LinkedHashMap<>();
        top.put("segments", new ArrayList<>(List.of(segment)));
        top.put("device_traces", List.of(List.of(PytorchSnapshotReaderTest.entry("alloc", BASE, 512, 0))));
        top.put("allocator_settings", new LinkedHashMap<String, Object>());
        edit.accept(top);
        return new Pickler(true, false).dumps(top);
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> segment(Map<String, Object> top) {
        return ((List<Map<String, Object>>) top.get("segments")).getFirst();
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> settings(Map<String, Object> top) {
        return (Map<String, Object>) top.get("allocator_settings");
    }

    private static TraceSnapshot read(Consumer<Map<String, Object>> edit) throws Exception {
        byte[] b = snapshot(edit);
        return new PytorchSnapshotReader().read(new ByteArrayInputStream(b), "f.pickle");
    }

    private static void refused(Consumer<Map<String, Object>> edit, String message) throws Exception {
        byte[] b = snapshot(edit);
        assertThatThrownBy(() -> new PytorchSnapshotReader().read(new ByteArrayInputStream(b), "f.pickle"))
                .isInstanceOf(TraceFormatException.class)
                .hasMessage("f.pickle: " + message);
    }

    @Test
    void integersAreSigned64BitOrUnsigned64Bit() throws Exception {
        BigInteger twoTo64 = BigInteger.ONE.shiftLeft(64);
        // An unsigned 64-bit stream handle is kept bit for bit; one bit more does not fit.
        TraceSnapshot s = read(top -> segment(top).put("stream", twoTo64.subtract(BigInteger.ONE)));
        assertThat(s.segments().getFirst().stream()).isEqualTo(-1L);
        refused(
                top -> segment(top).put("address", twoTo64),
                "segments[0].address: integer 18446744073709551616 does not fit in 64 bits");
        assertThat(read(top -> segment(top)
                                .put("stream", BigInteger.ONE.shiftLeft(63).negate()))
                        .segments()
                        .getFirst()
                        .stream())
                .isEqualTo(Long.MIN_VALUE);
        refused(
                top -> segment(top)
                        .put("stream", BigInteger.ONE.shiftLeft(63).negate().subtract(BigInteger.ONE)),
                "segments[0].stream: integer -9223372036854775809 does not fit in 64 bits");
        refused(top -> segment(top).put("total_size", 2.5), "segments[0].total_size: expected an integer, got float");
        // A device index cut to 32 bits would name another device.
        refused(
                top -> segment(top).put("device", (1L << 32) + 1),
                "segments[0].device: expected a device index (0 or more), got 4294967297");
        refused(
                top -> segment(top).put("device", -1),
                "segments[0].device: expected a device index (0 or more), got -1");
        assertThat(read(top -> segment(top).put("device", Integer.MAX_VALUE))
                        .segments()
                        .getFirst()
                        .device())
                .isEqualTo(Integer.MAX_VALUE);
        refused(top -> segment(top).put("total_size", -1), "segments[0].total_size: negative size -1");
    }

    @Test
    void segmentFieldsOfTheWrongTypeAreNamedInPythonsWords() throws Exception {
        refused(top -> top.put("segments", null), "segments: missing (not a PyTorch memory snapshot)");
        refused(top -> top.put("segments", "all"), "segments: expected a list, got str");
        refused(
                top -> top.put("segments", List.of((Object) new Object[] {1, 2})),
                "segments[0]: expected a dict, got tuple");
        refused(top -> top.put("segments", List.of(1.5)), "segments[0]: expected a dict, got float");
        refused(top -> top.put("segments", List.of(true)), "segments[0]: expected a dict, got bool");
        refused(top -> segment(top).put("is_expandable", 0.5), "segments[0].is_expandable: expected a bool, got float");
        assertThat(read(top -> segment(top).put("is_expandable", 1))
                        .segments()
                        .getFirst()
                        .expandable())
                .isTrue();
        assertThat(read(top -> segment(top).put("is_expandable", 0))
                        .segments()
                        .getFirst()
                        .expandable())
                .isFalse();
        refused(top -> segment(top).put("segment_type", 2), "segments[0].segment_type: expected a string, got int");
        refused(top -> segment(top).put("blocks", "b"), "segments[0].blocks: expected a list, got str");
        refused(
                top -> segment(top).put("segment_pool_id", new Object[] {1, 2, 3}),
                "segments[0].segment_pool_id: expected a pair of integers, got 3 values");
        refused(
                top -> segment(top).put("segment_pool_id", 5),
                "segments[0].segment_pool_id: expected a pair of integers, got int");
        assertThat(read(top -> segment(top).put("segment_pool_id", List.of(1, 2)))
                        .segments()
                        .getFirst()
                        .poolId())
                .isEqualTo(new PoolId(1, 2));
        // a tuple of segments is read as a list; a tuple for the whole snapshot is neither form
        assertThat(read(top -> top.put("segments", new Object[] {})).segments()).isEmpty();
        byte[] tuple = new Pickler(true, false).dumps(new Object[] {1, 2});
        assertThatThrownBy(() -> new PytorchSnapshotReader().read(new ByteArrayInputStream(tuple), "t.pickle"))
                .hasMessage("t.pickle: expected a snapshot dict or a list of segments, got tuple");
    }

    @Test
    void segmentsAreReadInAddressOrderWhateverTheFileSays() throws Exception {
        TraceSnapshot s = read(top -> {
            Map<String, Object> low = new LinkedHashMap<>(segment(top));
            Map<String, Object> high = new LinkedHashMap<>(segment(top));
            high.put("address", BASE + (4L << 20));
            top.put("segments", List.of(high, low));
        });
        assertThat(s.segments()).extracting(seg -> seg.address()).containsExactly(BASE, BASE + (4L << 20));
    }

    @Test
    void allocatorSettingsAreReadUpToTheirBounds() throws Exception {
        // the values PyTorch's parser can produce (whole MiB of at least 20, powers of two) and nothing else
        read(top -> settings(top).put("max_split_size", -1));
        read(top -> settings(top).put("max_split_size", 20L << 20));
        // max_split_size_mb:-5 wraps to 2^64 - 1 MiB in PyTorch, reported as its int64 cast
        assertThat(RecordedConfig.of(read(top -> settings(top).put("max_split_size", -(1L << 20))))
                        .maxSplitSize())
                .isEqualTo(AllocatorConfig.NEGATIVE_MAX_SPLIT_SIZE);
        read(top -> settings(top).put("max_non_split_rounding", 64L << 20));
        refused(
                top -> settings(top).put("max_split_size", -2),
                "allocator_settings.max_split_size: expected -1 (unlimited), -1048576 (a negative MiB count) or a"
                        + " whole number of MiB of at least 20, got -2");
        refused(
                top -> settings(top).put("max_split_size", 100),
                "allocator_settings.max_split_size: expected -1 (unlimited), -1048576 (a negative MiB count) or a"
                        + " whole number of MiB of at least 20, got 100");
        refused(
                top -> settings(top).put("max_non_split_rounding", (64L << 20) + 512),
                "allocator_settings.max_non_split_rounding: expected -1 (unlimited), -1048576 (a negative MiB count)"
                        + " or a whole number of MiB of at least 20, got 67109376");
        read(top -> settings(top).put("pinned_num_register_threads", 1));
        read(top -> settings(top).put("pinned_num_register_threads", 128));
        for (int threads : new int[] {-1, 0, 3, 256}) {
            refused(
                    top -> settings(top).put("pinned_num_register_threads", threads),
                    "allocator_settings.pinned_num_register_threads: expected a power of two up to 128, got "
                            + threads);
        }
        read(top -> settings(top).put("garbage_collection_threshold", 0));
        read(top -> settings(top).put("garbage_collection_threshold", 1.0));
        refused(
                top -> settings(top).put("garbage_collection_threshold", -0.25),
                "allocator_settings.garbage_collection_threshold: expected a fraction between 0 and 1, got -0.25");
        refused(
                top -> settings(top).put("garbage_collection_threshold", "0.5"),
                "allocator_settings.garbage_collection_threshold: expected a float, got str");
        read(top -> settings(top).put("roundup_power2_divisions", Map.of("1024", 1 << 20, "1", 0)));
        for (int divisions : new int[] {(1 << 20) + 1, -1, 3}) {
            refused(
                    top -> settings(top).put("roundup_power2_divisions", Map.of("64", divisions)),
                    "allocator_settings.roundup_power2_divisions[64]: expected 0 or a power-of-two division count up"
                            + " to 1048576, got " + divisions);
        }
        for (String key : new String[] {"0", "3"}) {
            refused(
                    top -> settings(top).put("roundup_power2_divisions", Map.of(key, 4)),
                    "allocator_settings.roundup_power2_divisions[" + key
                            + "]: expected a power-of-two size in MiB as a string key");
        }
    }

    @Test
    void anInputStreamIsReadUpToTheFileLimitExactly() throws Exception {
        byte[] b = snapshot(top -> {});
        assertThat(new PytorchSnapshotReader(new ReadLimits(b.length, 100))
                        .read(new ByteArrayInputStream(b), "f.pickle")
                        .entryCount())
                .isEqualTo(1);
        assertThatThrownBy(() -> new PytorchSnapshotReader(new ReadLimits(b.length - 1, 100))
                        .read(new ByteArrayInputStream(b), "f.pickle"))
                .hasMessage("f.pickle: input is over the limit of " + (b.length - 1) + " bytes");
    }

    /** {@code {'segments': [], 'device_traces': [[e0, e1]]}}, each entry appended alone: e1 takes the fast path. */
    private static byte[] twoEntries(Object... secondEntryTail) {
        byte[] entryHead = bytes('}', '(', unicode("action"), unicode("alloc"), unicode("addr"), 'K', 0);
        List<Object> parts = new ArrayList<>(
                List.of(0x80, 2, '}', '(', unicode("segments"), ']', unicode("device_traces"), ']', ']'));
        parts.addAll(List.of(entryHead, unicode("size"), 'K', 1, 'u', 'a', entryHead));
        parts.addAll(List.of(secondEntryTail));
        parts.addAll(List.of('u', 'a', 'a', 'u', '.'));
        return bytes(parts.toArray());
    }

    @Test
    void anEntryOnTheFastPathIsCheckedAsADictIs() throws Exception {
        byte[] ok = twoEntries(unicode("size"), 'K', 9, unicode("stream"), 'K', 0);
        assertThat(new PytorchSnapshotReader()
                        .read(new ByteArrayInputStream(ok), "f.pickle")
                        .traceOf(0))
                .extracting(e -> e.size())
                .containsExactly(1L, 9L);
        byte[] stream = twoEntries(unicode("size"), 'K', 9, unicode("stream"), 'J', le(-5, 4));
        assertThatThrownBy(() -> new PytorchSnapshotReader().read(new ByteArrayInputStream(stream), "f.pickle"))
                .hasMessage("f.pickle: device_traces[0][1].stream: negative stream -5");
        byte[] size = twoEntries(unicode("size"), 'J', le(-1, 4));
        assertThatThrownBy(() -> new PytorchSnapshotReader().read(new ByteArrayInputStream(size), "f.pickle"))
                .hasMessage("f.pickle: device_traces[0][1].size: negative size -1");
    }

    @Test
    void framesAndEntryLimitsAreCheckedToo() throws Exception {
        Map<String, Object> frame = new LinkedHashMap<>(Map.of("filename", "a.py", "line", 3, "name", "f"));
        TraceSnapshot s = read(top -> segment(top).put("frames", List.of(frame)));
        assertThat(s.segments().getFirst().frames()).singleElement().satisfies(f -> {
            assertThat(f.filename()).isEqualTo("a.py");
            assertThat(f.line()).isEqualTo(3);
        });
        Map<String, Object> badFile = new LinkedHashMap<>(frame);
        badFile.put("filename", 7);
        refused(
                top -> segment(top).put("frames", List.of(badFile)),
                "segments[0].frames[0].filename: expected a string, got int");
        Map<String, Object> badName = new LinkedHashMap<>(frame);
        badName.put("name", List.of());
        refused(
                top -> segment(top).put("frames", List.of(badName)),
                "segments[0].frames[0].name: expected a string, got list");
        refused(top -> segment(top).put("frames", List.of("f")), "segments[0].frames[0]: expected a dict, got str");
        // a tuple of segments is a list of them
        assertThat(read(top -> top.put("segments", new Object[] {segment(top)})).segments())
                .hasSize(1);
        // the entry limit admits exactly its value, over all devices
        byte[] two = snapshot(top -> top.put(
                "device_traces",
                List.of(
                        List.of(PytorchSnapshotReaderTest.entry("alloc", BASE, 512, 0)),
                        List.of(PytorchSnapshotReaderTest.entry("alloc", BASE, 512, 0)))));
        TraceSnapshot both =
                new PytorchSnapshotReader(new ReadLimits(1 << 20, 2)).read(new ByteArrayInputStream(two), "f.pickle");
        assertThat(both.entryCount()).isEqualTo(2);
        assertThat(both.traceOf(1)).hasSize(1);
        assertThat(both.traceOf(2)).isEmpty();
        assertThatThrownBy(() -> new PytorchSnapshotReader(new ReadLimits(1 << 20, 1))
                        .read(new ByteArrayInputStream(two), "f.pickle"))
                .hasMessage("f.pickle: device_traces: more than 1 trace entries (limit)");
    }
}
