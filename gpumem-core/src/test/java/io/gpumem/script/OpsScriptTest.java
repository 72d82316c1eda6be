package io.gpumem.script;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.config.AllocatorConfig;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.Test;

class OpsScriptTest {

    private static void assertError(String script, int line, String detailPart) {
        assertThatThrownBy(() -> OpsScript.parse(script))
                .isInstanceOf(ScriptException.class)
                .hasMessageStartingWith("line " + line + ": ")
                .hasMessageContaining(detailPart)
                .satisfies(e -> assertThat(((ScriptException) e).line()).isEqualTo(line));
    }

    /** The verb list that format detection reads is the parser's: each verb parses, and the error lists them all. */
    @Test
    void everyListedVerbIsParsedAndTheUnknownOpMessageListsThem() {
        for (String verb : OpsScript.VERBS) {
            try {
                OpsScript.parse(verb + "\n");
            } catch (ScriptException e) {
                assertThat(e.getMessage()).as(verb).doesNotContain("unknown op");
            }
        }
        assertError(
                "fly away\n",
                1,
                "unknown op 'fly' (expected device, config, alloc, free, record_stream,"
                        + " complete_events, empty_cache, set_fraction, reset_peak, summary, stats or snapshot)");
    }

    @Test
    void everyOp() {
        OpsScript s = OpsScript.parse("""
                # a comment
                device capacity=80GiB granularity=2MiB held=1GiB
                config expandable_segments:True, max_split_size_mb:128

                alloc a 1000
                alloc b 3MiB stream=7   # trailing comment
                record_stream a 3
                free a
                complete_events
                empty_cache
                set_fraction 0.5
                reset_peak
                summary
                summary abbreviated
                stats
                """);
        assertThat(s.device()).isEqualTo(new ScriptOp.DeviceSettings(2, 80L << 30, 2L << 20, 1L << 30));
        assertThat(s.ops())
                .containsExactly(
                        new ScriptOp.DeviceSettings(2, 80L << 30, 2L << 20, 1L << 30),
                        new ScriptOp.Config(3, "expandable_segments:True, max_split_size_mb:128"),
                        new ScriptOp.Alloc(5, "a", 1000, 0),
                        new ScriptOp.Alloc(6, "b", 3L << 20, 7),
                        new ScriptOp.RecordStream(7, "a", 3),
                        new ScriptOp.Free(8, "a"),
                        new ScriptOp.CompleteEvents(9),
                        new ScriptOp.EmptyCache(10),
                        new ScriptOp.SetFraction(11, 0.5),
                        new ScriptOp.ResetPeak(12),
                        new ScriptOp.Summary(13, false),
                        new ScriptOp.Summary(14, true),
                        new ScriptOp.Stats(15));
    }

    @Test
    void deviceIsOptionalAndDefaultsItsGranularity() throws IOException {
        assertThat(OpsScript.parse("alloc a 1\n").device()).isNull();
        assertThat(OpsScript.parse("device capacity=1GiB\n").device())
                .isEqualTo(new ScriptOp.DeviceSettings(1, 1L << 30, 0, 0));
        assertThat(OpsScript.parse("config expandable_segments:True\ndevice held=1 capacity=2GiB\n")
                        .device()
                        .held())
                .isEqualTo(1);
    }

    @Test
    void nameCanBeReusedAfterFree() {
        assertThat(OpsScript.parse("alloc a 1\nfree a\nalloc a 2\nfree a\n").ops())
                .hasSize(4);
    }

    @Test
    void tabsSeparateWordsAndEmptyScriptIsEmpty() {
        assertThat(OpsScript.parse("alloc\ta\t1\n").ops()).containsExactly(new ScriptOp.Alloc(1, "a", 1, 0));
        assertThat(OpsScript.parse("").ops()).isEmpty();
        assertThat(OpsScript.parse("# only\n\n   \n").ops()).isEmpty();
    }

    @Test
    void unknownOp() {
        assertError("alloc a 1\nmalloc b 2\n", 2, "unknown op 'malloc'");
    }

    @Test
    void nameDiscipline() {
        assertError("alloc a 1\nfree b\n", 2, "free of unknown name 'b'");
        assertError("alloc a 1\nfree a\nfree a\n", 3, "double free of 'a' (allocated on line 1, freed on line 2)");
        assertError("alloc a 1\nalloc a 2\n", 2, "'a' is still allocated (line 1)");
        assertError("record_stream x 1\n", 1, "record_stream of unknown name 'x'");
        assertError("alloc a 1\nfree a\nrecord_stream a 2\n", 3, "record_stream of freed 'a'");
        assertError("alloc a=b 1\n", 1, "bad name 'a=b'");
    }

    @Test
    void badSizes() {
        assertError("alloc a 3MB\n", 1, "alloc size: bad size '3MB'");
        assertError("alloc a lots\n", 1, "bad size 'lots'");
        assertError("device capacity=big\n", 1, "device capacity: bad size 'big'");
    }

    @Test
    void badArity() {
        assertError("alloc a\n", 1, "usage: alloc NAME SIZE [stream=N]");
        assertError("alloc a 1 stream=1 x\n", 1, "usage: alloc");
        assertError("alloc a 1 s=1\n", 1, "got 's=1'");
        assertError("alloc a 1\nfree\n", 2, "usage: free NAME");
        assertError("alloc a 1\nfree a b\n", 2, "usage: free NAME");
        assertError("alloc a 1\nrecord_stream a\n", 2, "usage: record_stream NAME STREAM");
        assertError("empty_cache now\n", 1, "empty_cache takes no arguments");
        assertError("stats all\n", 1, "stats takes no arguments");
        assertError("summary full\n", 1, "usage: summary [abbreviated]");
        assertError("set_fraction\n", 1, "usage: set_fraction F");
    }

    @Test
    void badStreams() {
        assertError("alloc a 1 stream=-1\n", 1, "bad stream '-1'");
        assertError("alloc a 1\nrecord_stream a s2\n", 2, "bad stream 's2'");
        assertError("alloc a 1 stream=99999999999999999999\n", 1, "too large");
    }

    @Test
    void badFractions() {
        assertError("set_fraction 1.5\n", 1, "Invalid fraction value: 1.5. Allowed range: 0~1");
        assertError("set_fraction -0.1\n", 1, "bad fraction '-0.1'");
        assertError("set_fraction half\n", 1, "bad fraction");
        assertThat(OpsScript.parse("set_fraction 0\nset_fraction 1\nset_fraction .25\n")
                        .ops())
                .containsExactly(
                        new ScriptOp.SetFraction(1, 0),
                        new ScriptOp.SetFraction(2, 1),
                        new ScriptOp.SetFraction(3, 0.25));
    }

    @Test
    void badConfigNamesTheKey() {
        assertError(
                "alloc a 1\nconfig max_split_size_mb:10\n",
                2,
                "bad config: CachingAllocator option max_split_size_mb too small, must be > 20");
        assertError("config foo:1\n", 1, "Unrecognized CachingAllocator option: foo");
        assertError("config\n", 1, "usage: config STRING");
    }

    @Test
    void deviceRules() {
        assertError(
                "device capacity=1GiB\ndevice capacity=2GiB\n", 2, "second device line (the device was set on line 1)");
        assertError("alloc a 1\ndevice capacity=1GiB\n", 2, "device must come before any allocator op");
        assertError("stats\ndevice capacity=1GiB\n", 2, "before any allocator op");
        assertError("device granularity=2MiB\n", 1, "device needs capacity=SIZE");
        assertError("device capacity=1GiB size=3\n", 1, "got 'size=3'");
        assertError("device capacity=1GiB capacity=2GiB\n", 1, "capacity given twice");
        assertError("device capacity=1GiB granularity=3MiB\n", 1, "power of two");
        assertError("device capacity=1GiB held=2GiB\n", 1, "device held=2147483648 leaves no memory");
        assertError(
                "device capacity=1GiB held=1GiB\n",
                1,
                "device held=1073741824 leaves no memory: it must be less than capacity=1073741824");
        assertThat(OpsScript.parse("device capacity=1GiB held=1073741823\n")
                        .device()
                        .held())
                .isEqualTo((1L << 30) - 1);
        // devices the allocator could not put expandable segments on, which any config line may ask for
        assertError(
                "# granules bigger than the 2 MiB page\ndevice capacity=1GiB granularity=4MiB\n",
                2,
                "device cannot hold expandable segments: expandable page size 2097152 is not a multiple of the device"
                        + " granularity 4194304");
        assertError(
                "device capacity=4096TiB\n",
                1,
                "device cannot hold expandable segments: cannot size an expandable segment for 4503599627370496 bytes");
        assertError("device capacity=8191TiB\n", 1, "cannot size an expandable segment"); // past long when * 9/8
        assertThat(OpsScript.parse("device capacity=3000TiB granularity=512\n")
                        .device()
                        .capacity())
                .isEqualTo(3000L << 40);
        assertError("device capacity=0\n", 1, "capacity must be positive");
    }

    /** {@code text}'s bytes (ISO-8859-1: each char one byte) parsed as a script; the error's message, or null. */
    private static String utf8Error(String latin1) throws IOException {
        try {
            OpsScript.parse(new ByteArrayInputStream(latin1.getBytes(StandardCharsets.ISO_8859_1)));
            return null;
        } catch (ScriptException e) {
            return e.getMessage();
        }
    }

    @Test
    void theBadByteIsWhereItsSequenceStartsAndLongOrUnterminatedLinesDecode() throws Exception {
        // a 3-byte sequence (e2 82 ac, the euro sign) cut short by the end of the line: its first byte
        assertThat(utf8Error("alloc a 1 # \u00e2\u0082\nfree a\n"))
                .isEqualTo("line 1: not UTF-8 text (byte 0xe2 at column 13)");
        // ... cut short by a byte that cannot continue it: still the sequence's first byte
        assertThat(utf8Error("alloc a 1 # \u00e2\u0082x\n"))
                .isEqualTo("line 1: not UTF-8 text (byte 0xe2 at column 13)");
        // a lone continuation byte after a whole 4-byte character (f0 9f 98 80)
        assertThat(utf8Error("alloc a 1 # \u00f0\u009f\u0098\u0080\u0080\n"))
                .isEqualTo("line 1: not UTF-8 text (byte 0x80 at column 17)");
        assertThat(utf8Error("\u00ff\n")).isEqualTo("line 1: not UTF-8 text (byte 0xff at column 1)");
        // whole sequences, a line past the reader's first buffer, CRLF ends and no final newline all decode
        String euro = "\u00e2\u0082\u00ac";
        String longComment = "#" + euro.repeat(200);
        assertThat(utf8Error("alloc a 1 " + longComment + "\r\nfree a")).isNull();
        OpsScript ok = OpsScript.parse(new ByteArrayInputStream(
                ("alloc a 1 " + longComment + "\r\nfree a").getBytes(StandardCharsets.ISO_8859_1)));
        assertThat(ok.ops()).hasSize(2);
    }

    @Test
    void theConfigurationInForceFoldsConfigLinesTheWayPyTorchReparsesThem() {
        // the audit's script: the second line resets max_split_size_mb, as _set_allocator_settings would
        OpsScript reset = OpsScript.parse("""
                config max_split_size_mb:100
                config expandable_segments:False
                alloc a 200MiB
                free a
                alloc b 150MiB
                stats
                """);
        assertThat(reset.initialConfig().maxSplitSize()).isEqualTo(AllocatorConfig.UNLIMITED);
        assertThat(reset.initialConfig().raw()).isEmpty(); // nothing differs from the defaults
        // joined with ',' these two would not parse (",,"); folded they are one option
        OpsScript trailingComma =
                OpsScript.parse("config max_split_size_mb:100,\nconfig expandable_segments:True\nalloc a 1\n");
        assertThat(trailingComma.initialConfig().raw()).isEqualTo("expandable_segments:True");
        // one line keeps its own text
        assertThat(OpsScript.parse("config max_split_size_mb:100 ,\nalloc a 1\n")
                        .initialConfig()
                        .raw())
                .isEqualTo("max_split_size_mb:100 ,");
        // the allocator is created at the first allocator op; a line after it is a settings call on top
        OpsScript late = OpsScript.parse(
                "config expandable_segments:True\nstats\nconfig max_split_size_mb:100\nalloc a 1\nconfig backend:native\n");
        assertThat(late.initialConfig()).isEqualTo(AllocatorConfig.parse("expandable_segments:True"));
        AllocatorConfig atAlloc = late.configAt(3);
        assertThat(atAlloc.raw()).isEqualTo("max_split_size_mb:100,expandable_segments:True");
        assertThat(atAlloc).isEqualTo(AllocatorConfig.parse(atAlloc.raw()));
        assertThat(late.configAt(late.ops().size()).maxSplitSize()).isEqualTo(AllocatorConfig.UNLIMITED);
        assertThat(OpsScript.parse("alloc a 1\n").initialConfig()).isEqualTo(AllocatorConfig.defaults());
    }

    /** The ops {@code text} parses to, read both ways a script can arrive: as a string and as UTF-8 bytes. */
    private static List<ScriptOp> bothWays(String text) throws IOException {
        List<ScriptOp> fromString = OpsScript.parse(text).ops();
        List<ScriptOp> fromBytes = OpsScript.parse(new ByteArrayInputStream(text.getBytes(StandardCharsets.UTF_8)))
                .ops();
        assertThat(fromBytes).isEqualTo(fromString);
        return fromString;
    }

    @Test
    void lineEndsAreLfCrLfOrALoneCrForEverySource() throws IOException {
        List<ScriptOp> expected = List.of(new ScriptOp.Alloc(1, "a", 1, 0), new ScriptOp.Free(2, "a"));
        assertThat(bothWays("alloc a 1\rfree a\r")).isEqualTo(expected);
        assertThat(bothWays("alloc a 1\r\nfree a")).isEqualTo(expected);
        assertThat(bothWays("alloc a 1\nfree a\n")).isEqualTo(expected);
        // a CR before a CRLF is an empty line of its own: "free" is on line 3
        assertThat(bothWays("alloc a 1\r\r\nfree a\r"))
                .containsExactly(new ScriptOp.Alloc(1, "a", 1, 0), new ScriptOp.Free(3, "a"));
    }

    @Test
    void aByteOrderMarkOpensLineOneButIsNoPartOfIt() throws IOException {
        assertThat(bothWays("\uFEFFalloc a 1MiB\nfree a\n"))
                .containsExactly(new ScriptOp.Alloc(1, "a", 1L << 20, 0), new ScriptOp.Free(2, "a"));
        // columns of a bad byte count from after the mark
        assertThat(utf8Error("\u00ef\u00bb\u00bf\u00ff\n")).isEqualTo("line 1: not UTF-8 text (byte 0xff at column 1)");
        // only at the very start: anywhere else U+FEFF is a character like any other
        assertThatThrownBy(() -> OpsScript.parse("alloc a 1\n\uFEFFfree a\n"))
                .isInstanceOf(ScriptException.class)
                .hasMessageStartingWith("line 2: unknown op '\uFEFFfree'");
    }

    @Test
    void aLineOverTheLimitIsAnErrorNamingItNotAnExhaustedBuffer() throws IOException {
        String atLimit = "#" + "x".repeat(Utf8Lines.MAX_LINE_BYTES - 1);
        assertThat(bothWays("alloc a 1\n" + atLimit + "\nfree a\n")).hasSize(2);
        String overLimit = atLimit + "x";
        assertThatThrownBy(() -> OpsScript.parse("alloc a 1\n" + overLimit + "\nfree a\n"))
                .isInstanceOf(ScriptException.class)
                .hasMessage("line 2: line longer than " + Utf8Lines.MAX_LINE_BYTES
                        + " bytes (the limit for a script line)");
        // the CSV readers' locator of bad bytes does not call a long line a bad byte
        byte[] longThenBad = (overLimit + "\n\u00ff\n").getBytes(StandardCharsets.ISO_8859_1);
        assertThat(Utf8Lines.firstBadByte(new ByteArrayInputStream(longThenBad)))
                .isNull();
    }

    @Test
    void textWithALoneSurrogateIsRefusedAsNotText() {
        assertThatThrownBy(() -> OpsScript.parse("alloc a 1 # \uD800\n"))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("lone surrogate");
    }

    @Test
    void bytesThatAreNotUtf8NameTheLineAndColumn() throws Exception {
        byte[] script =
                "alloc a 1KiB\nfree a\nalloc b 2\u00e9KiB\n".getBytes(java.nio.charset.StandardCharsets.ISO_8859_1);
        org.assertj.core.api.Assertions.assertThatThrownBy(
                        () -> OpsScript.parse(new java.io.ByteArrayInputStream(script)))
                .isInstanceOf(ScriptException.class)
                .hasMessage("line 3: not UTF-8 text (byte 0xe9 at column 10)");
        byte[] good = "alloc a 1KiB # caf\u00e9\r\nfree a\n".getBytes(java.nio.charset.StandardCharsets.UTF_8);
        org.assertj.core.api.Assertions.assertThat(
                        OpsScript.parse(new java.io.ByteArrayInputStream(good)).ops())
                .hasSize(2);
    }

    @Test
    void aZeroByteAllocationIsAcceptedLikePyTorch() {
        OpsScript s = OpsScript.parse("alloc a 0\nrecord_stream a 1\nfree a\n");
        org.assertj.core.api.Assertions.assertThat(s.ops()).hasSize(3);
        org.assertj.core.api.Assertions.assertThat(((ScriptOp.Alloc) s.ops().getFirst()).size())
                .isZero();
    }
}
