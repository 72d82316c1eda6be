package io.gpumem.trace.io;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.history.TraceEntry;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class OpsScriptReaderTest {

    @Test
    void scriptsBecomeRequestTraces(@TempDir Path dir) throws Exception {
        Path f = dir.resolve("job.ops");
        Files.writeString(f, """
                # a small job
                device capacity=1GiB held=100MiB
                config expandable_segments:True
                alloc a 1000 stream=3
                record_stream a 5
                alloc b 3MiB
                free a
                empty_cache
                summary
                """);
        TraceSnapshot s = TraceReaders.read(f);
        assertThat(s.format()).isEqualTo(SourceFormat.OPS_SCRIPT);
        assertThat(s.addressesRecorded()).isFalse();
        assertThat(s.recordedConfString()).isEqualTo("expandable_segments:True");
        assertThat(s.extra())
                .containsEntry("gpumem_device_capacity", 1L << 30)
                .containsEntry("gpumem_device_held", 100L << 20);
        List<TraceEntry> t = s.traceOf(0);
        assertThat(t)
                .extracting(TraceEntry::actionName)
                .containsExactly("alloc", "alloc", "free_requested", "free_completed", OpsScriptReader.EMPTY_CACHE);
        assertThat(t.getFirst().stream()).isEqualTo(3);
        assertThat(t.get(2).addr()).isEqualTo(t.getFirst().addr());
        assertThat(t.get(2).size()).isEqualTo(1000);
        assertThat(t.get(1).timeUs()).isEqualTo(6); // the script line
    }

    @Test
    void badScriptsNameTheLine(@TempDir Path dir) throws Exception {
        Path f = dir.resolve("bad.ops");
        Files.writeString(f, "alloc a 1000\nfree b\n");
        assertThatThrownBy(() -> TraceReaders.read(f))
                .isInstanceOf(TraceFormatException.class)
                .hasMessageStartingWith(f + ": line 2: ");
        Files.writeString(f, "alloc a 10MB\n");
        assertThatThrownBy(() -> TraceReaders.read(f)).hasMessageStartingWith(f + ": line 1: ");
        // a device with nothing left over: refused with its line, as sim refuses it (not a bare "capacity must be
        // positive" from the what-if replay)
        Files.writeString(f, "# all held\ndevice capacity=64MiB held=64MiB\nalloc a 1\n");
        assertThatThrownBy(() -> TraceReaders.read(f))
                .hasMessage(
                        f + ": line 2: device held=67108864 leaves no memory: it must be less than capacity=67108864");
    }

    @Test
    void handlesAreDistinctNonNullAndAlignedAndTheOpLimitAdmitsItsValue(@TempDir Path dir) throws Exception {
        Path f = dir.resolve("job.ops");
        Files.writeString(f, "alloc a 100\nalloc b 0\nalloc c 200\nfree b\nfree a\n");
        List<TraceEntry> t =
                new OpsScriptReader(new ReadLimits(1 << 20, 5)).read(f).traceOf(0);
        // The zero-byte alloc and its free record nothing, as in PyTorch.
        assertThat(t)
                .extracting(TraceEntry::actionName)
                .containsExactly("alloc", "alloc", "free_requested", "free_completed");
        assertThat(List.of(t.get(0).addr(), t.get(1).addr()))
                .doesNotHaveDuplicates()
                .allMatch(h -> h > 0 && h % 512 == 0);
        assertThatThrownBy(() -> new OpsScriptReader(new ReadLimits(1 << 20, 4)).read(f))
                .hasMessage(f + ": more than 4 ops (limit)");
    }

    @Test
    void detectionReadsPastALongCommentedHead(@TempDir Path dir) throws Exception {
        String comments = "# header comment, padded to a long line .............................\n\n".repeat(400);
        assertThat(comments.length()).isGreaterThan(3 * 8192); // past what detection used to look at
        Path script = dir.resolve("long-head.ops");
        Files.writeString(script, comments + "alloc a 1MiB\r\nfree a\r\n");
        assertThat(TraceReaders.detect(script)).isEqualTo(SourceFormat.OPS_SCRIPT);
        assertThat(TraceReaders.read(script).traceOf(0))
                .extracting(TraceEntry::actionName)
                .containsExactly("alloc", "free_requested", "free_completed");
        // the CSV formats, which allow comments before their header, are recognised past them too
        Path csv = dir.resolve("long-head.csv");
        Files.writeString(csv, comments + "id,lower,upper,size\n0,0,5,100\n");
        assertThat(TraceReaders.detect(csv)).isEqualTo(SourceFormat.LIFETIME_CSV);
    }

    @Test
    void aHeadOfOnlyCommentsIsAnOpsScriptAsSimReadsIt(@TempDir Path dir) throws Exception {
        Path onlyComments = dir.resolve("nothing.ops");
        Files.writeString(onlyComments, "# nothing to run yet\r\n\n   \n");
        assertThatThrownBy(() -> TraceReaders.detect(onlyComments))
                .isInstanceOf(TraceFormatException.class)
                .hasMessage(onlyComments + ": no trace in it: only blank lines and comments");
        // a head of comments longer than detection reads: the script's own parser then reads the whole file
        Path huge = dir.resolve("huge-head.ops");
        int lines = TraceReaders.COMMENT_HEAD_LIMIT / 1000 + 1;
        Files.writeString(huge, ("#".repeat(999) + "\n").repeat(lines) + "alloc a 1\nfree b\n");
        assertThat(TraceReaders.detect(huge)).isEqualTo(SourceFormat.OPS_SCRIPT);
        assertThatThrownBy(() -> TraceReaders.read(huge))
                .hasMessage(huge + ": line " + (lines + 2) + ": free of unknown name 'b'");
    }

    @Test
    void theRecordedConfigurationIsTheOneSimHasAtTheFirstAlloc(@TempDir Path dir) throws Exception {
        Path f = dir.resolve("two-configs.ops");
        // the second line resets max_split_size_mb (PyTorch's re-parse rule), in sim and here alike
        Files.writeString(f, """
                config max_split_size_mb:100
                config expandable_segments:False
                alloc a 200MiB
                free a
                alloc b 150MiB
                stats
                """);
        TraceSnapshot s = TraceReaders.read(f);
        assertThat(s.recordedConfString()).isEmpty();
        assertThat(AllocatorConfig.parse(s.recordedConfString()).maxSplitSize()).isEqualTo(AllocatorConfig.UNLIMITED);
        // joining the lines with ',' made ",," here, which compare and analyze then refused
        Files.writeString(f, "config max_split_size_mb:100,\nconfig expandable_segments:True\nalloc a 1MiB\n");
        assertThat(TraceReaders.read(f).recordedConfString()).isEqualTo("expandable_segments:True");
        // a line after the allocator exists, before the first alloc, is in force for every request
        Files.writeString(f, """
                config expandable_segments:True
                stats
                config max_split_size_mb:100
                alloc a 1MiB
                config max_split_size_mb:200
                """);
        assertThat(TraceReaders.read(f).recordedConfString())
                .isEqualTo("max_split_size_mb:100,expandable_segments:True");
    }
}
