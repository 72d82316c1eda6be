package io.gpumem.trace.io;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

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
}
