package io.gpumem.trace.io;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.TestTraces;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class CsvReadersTest {

    @Test
    void rmmLogBecomesAllocAndFreePairs(@TempDir Path dir) throws Exception {
        Path f = dir.resolve("rmm.csv");
        Files.writeString(f, """
                Thread,Time,Action,Pointer,Size,Stream
                140,10:38:58:000100,allocate,0x7f0000000000,1000,0x0
                140,10:38:58:000200,allocate,0x7f0000000400,2048,0x5
                140,10:38:58:000300,free,0x7f0000000000,1000,0x0
                140,10:38:58:000400,allocate failure,0x0,999999999999,0x0
                """);
        TraceSnapshot s = TraceReaders.read(f);
        assertThat(s.format()).isEqualTo(SourceFormat.RMM_LOG);
        List<TraceEntry> t = s.traceOf(0);
        assertThat(t)
                .extracting(TraceEntry::action)
                .containsExactly(
                        TraceAction.ALLOC,
                        TraceAction.ALLOC,
                        TraceAction.FREE_REQUESTED,
                        TraceAction.FREE_COMPLETED,
                        TraceAction.OOM);
        assertThat(t.get(1).addr()).isEqualTo(0x7f0000000400L);
        assertThat(t.get(1).stream()).isEqualTo(5);
        assertThat(t.get(2).timeUs() - t.get(0).timeUs()).isEqualTo(200);
    }

    @Test
    void rmmErrorsNameLineAndField(@TempDir Path dir) throws Exception {
        Path f = dir.resolve("bad.csv");
        Files.writeString(f, "Thread,Time,Action,Pointer,Size,Stream\n1,1,allocate,0x10,abc,0\n");
        assertThatThrownBy(() -> TraceReaders.read(f))
                .isInstanceOf(TraceFormatException.class)
                .hasMessage(f + ": line 2, field Size: expected a decimal or 0x-hex integer, got 'abc'");
        // digits past a long are an integer too large, not "expected an integer"
        Files.writeString(f, "Thread,Time,Action,Pointer,Size,Stream\n1,1,allocate,0x10,9223372036854775808,0\n");
        assertThatThrownBy(() -> TraceReaders.read(f))
                .hasMessage(f + ": line 2, field Size: integer 9223372036854775808 does not fit in 64 bits");
        Files.writeString(f, "Thread,Time,Action,Pointer,Size,Stream\n1,1,allocate,0x10000000000000000,5,0\n");
        assertThatThrownBy(() -> TraceReaders.read(f))
                .hasMessage(f + ": line 2, field Pointer: integer 0x10000000000000000 does not fit in 64 bits");
        Files.writeString(f, "Thread,Time,Action,Pointer,Size,Stream\n1,1,free,0x10,5,0\n");
        assertThatThrownBy(() -> TraceReaders.read(f))
                .hasMessageContaining("line 2, field Pointer")
                .hasMessageContaining("not allocated");
        Files.writeString(f, "Thread,Time,Action,Pointer,Size,Stream\n1,1,allocate,0x10\n");
        assertThatThrownBy(() -> TraceReaders.read(f)).hasMessageContaining("line 2: expected 6 fields");
        Files.writeString(f, "Thread,Time,Action,Pointer,Size,Stream\n1,1,resize,0x10,5,0\n");
        assertThatThrownBy(() -> TraceReaders.read(f)).hasMessageContaining("unknown action 'resize'");
    }

    @Test
    void aDuplicateLifetimeIdNamesBothLines(@TempDir Path dir) throws Exception {
        Path f = dir.resolve("dup.csv");
        Files.writeString(f, "id,lower,upper,size\n0,0,5,100\n1,1,4,100\n0,2,3,100\n");
        assertThatThrownBy(() -> TraceReaders.read(f))
                .isInstanceOf(TraceFormatException.class)
                .hasMessage(f + ": line 4, field id: id 0 appears twice (first on line 2)");
    }

    @Test
    void lifetimesOrderFreesBeforeAllocsAtEqualTimes(@TempDir Path dir) throws Exception {
        Path f = dir.resolve("life.csv");
        Files.writeString(f, """
                id,lower,upper,size
                0,0,5,100
                1,5,9,200
                2,3,3,300
                3,2,5,400
                """);
        TraceSnapshot s = TraceReaders.read(f);
        assertThat(s.addressesRecorded()).isFalse();
        List<TraceEntry> t = s.traceOf(0);
        // t=0 alloc#0, t=2 alloc#3, t=5 free#0, free#3, alloc#1, t=9 free#1; row 2 is never live.
        assertThat(t)
                .extracting(e -> e.actionName() + "@" + e.timeUs() + ":" + e.size())
                .containsExactly(
                        "alloc@0:100",
                        "alloc@2:400",
                        "free_requested@5:100",
                        "free_completed@5:100",
                        "free_requested@5:400",
                        "free_completed@5:400",
                        "alloc@5:200",
                        "free_requested@9:200",
                        "free_completed@9:200");
        assertThat(t.stream()
                        .filter(e -> e.action() == TraceAction.ALLOC)
                        .map(TraceEntry::addr)
                        .distinct()
                        .count())
                .isEqualTo(3);
    }

    @Test
    void textStartingLikeAProtocolZeroOrOnePickleIsAnUnknownFormatNotACorruptPickle(@TempDir Path dir)
            throws Exception {
        for (String text : new String[] {"(x,y)\n1,2\n", "]notes: step 1\n", "}\n"}) {
            Path f = dir.resolve("table.csv");
            Files.writeString(f, text);
            assertThatThrownBy(() -> TraceReaders.read(f))
                    .isInstanceOf(TraceFormatException.class)
                    .hasMessageStartingWith(f + ": unknown trace format: it starts with '" + text.charAt(0) + "'")
                    .hasMessageContaining("expected a PyTorch snapshot pickle, an RMM log")
                    .hasMessageNotContaining("corrupt");
        }
        // a protocol 0 or 1 pickle still reads as one, a newline after its STOP included
        Path p = dir.resolve("p1.pickle");
        Files.write(p, new byte[] {'}', '.', '\n'});
        assertThat(TraceReaders.detect(p)).isEqualTo(SourceFormat.PYTORCH_SNAPSHOT);
        Files.writeString(p, "(dp0\n.");
        assertThat(TraceReaders.detect(p)).isEqualTo(SourceFormat.PYTORCH_SNAPSHOT);
    }

    @Test
    void lifetimeErrors(@TempDir Path dir) throws Exception {
        Path f = dir.resolve("life.csv");
        Files.writeString(f, "id,lower,upper,size\n0,5,4,100\n");
        assertThatThrownBy(() -> TraceReaders.read(f))
                .hasMessage(f + ": line 2, field upper: upper 4 is below lower 5");
        Files.writeString(f, "id,lower,upper,size\n0,1,4,-3\n");
        assertThatThrownBy(() -> TraceReaders.read(f)).hasMessageContaining("field size: size must be positive");
        Files.writeString(f, "id,lower,upper,size\n7,1,4,0\n");
        assertThatThrownBy(() -> TraceReaders.read(f))
                .hasMessage(f + ": line 2, field size: size must be positive, got 0");
        Files.writeString(f, "id,lower,upper,size\n0,1,4,1\n1,1,4\n");
        assertThatThrownBy(() -> TraceReaders.read(f)).hasMessageContaining("line 3: expected 4 fields");
        Files.write(f, new byte[] {1, 2, 3, (byte) 0xff});
        assertThatThrownBy(() -> TraceReaders.read(f)).hasMessageContaining("unknown trace format");
        Files.write(f, new byte[0]);
        assertThatThrownBy(() -> TraceReaders.read(f)).hasMessageContaining("empty file");
    }

    @Test
    void rmmClockTimesBecomeMicrosecondsOfTheDayAndOtherTimesAreKeptOrReplacedByTheRowNumber(@TempDir Path dir)
            throws Exception {
        Path f = dir.resolve("rmm.csv");
        Files.writeString(f, """
                Thread,Time,Action,Pointer,Size,Stream
                140,10:38:58:000100,allocate,0x10,16,0
                140,1234.6,allocate,0x20,16,0
                140,soon,allocate,0x30,0,0
                140,later,free,0x10,16,0
                """);
        List<TraceEntry> t = TraceReaders.read(f).traceOf(0);
        assertThat(t)
                .extracting(TraceEntry::timeUs)
                .containsExactly(((10 * 60 + 38) * 60 + 58) * 1_000_000L + 100, 1235L, 3L, 4L, 4L);
        assertThat(t.get(2).size()).as("a zero-byte allocate is read").isZero();
    }

    /** A time that would wrap past 2^63 microseconds, or is negative or not finite, is no time: the row number. */
    @Test
    void rmmTimesThatWouldWrapOrAreNegativeBecomeTheRowNumber(@TempDir Path dir) throws Exception {
        Path f = dir.resolve("rmm.csv");
        Files.writeString(f, """
                Thread,Time,Action,Pointer,Size,Stream
                140,9223372036854775807:0:0,allocate,0x10,16,0
                140,-5,allocate,0x20,16,0
                140,10:-3:00.5,allocate,0x30,16,0
                140,1e300,allocate,0x40,16,0
                140,NaN,allocate,0x50,16,0
                140,153722867280:0:0.000001,allocate,0x60,16,0
                140,0:0:2,allocate,0x70,16,0
                """);
        List<TraceEntry> t = TraceReaders.read(f).traceOf(0);
        assertThat(t).extracting(TraceEntry::timeUs).containsExactly(1L, 2L, 3L, 4L, 5L, 6L, 2_000_000L);
    }

    /**
     * RMM's own logger writes {@code HH:MM:SS.ffffff} (the digits after the dot a fraction of a second) and a failed
     * allocation's null pointer as {@code (nil)}: both were misread (every time became its row number, the pointer an
     * error).
     */
    @Test
    void rmmLoggersClockWithAFractionOfASecondAndItsNilPointerAreRead(@TempDir Path dir) throws Exception {
        Path f = dir.resolve("rmm.csv");
        Files.writeString(f, """
                Thread,Time,Action,Pointer,Size,Stream
                140,10:38:58.000100,allocate,0x7f0000000000,1000,0x0
                140,10:38:58.5,allocate,0x7f0000000400,2048,0x0
                140,10:38:59.000300,allocate failure,(nil),99999999,0x0
                140,10:39:00,free,0x7f0000000000,1000,0x0
                """);
        List<TraceEntry> t = TraceReaders.read(f).traceOf(0);
        long at = ((10 * 60 + 38) * 60 + 58) * 1_000_000L;
        assertThat(t)
                .extracting(TraceEntry::timeUs)
                .containsExactly(at + 100, at + 500_000, at + 1_000_300, at + 2_000_000, at + 2_000_000);
        assertThat(t.get(2).action()).isEqualTo(TraceAction.OOM);
        assertThat(t.get(2).size()).isEqualTo(99999999);
    }

    /** A CSV saved by a spreadsheet starts with a UTF-8 byte-order mark; it was refused as an unknown format. */
    @Test
    void aByteOrderMarkBeforeTheHeaderIsSkipped(@TempDir Path dir) throws Exception {
        Path rmm = dir.resolve("rmm.csv");
        Files.write(rmm, "\uFEFFThread,Time,Action,Pointer,Size,Stream\n1,1,allocate,0x10,16,0\n".getBytes(UTF_8));
        assertThat(TraceReaders.read(rmm).traceOf(0))
                .extracting(TraceEntry::size)
                .containsExactly(16L);
        Path lifetimes = dir.resolve("lifetimes.csv");
        Files.write(lifetimes, "\uFEFFid,lower,upper,size\n1,0,2,4096\n".getBytes(UTF_8));
        assertThat(TraceReaders.read(lifetimes).traceOf(0)).isNotEmpty();
    }

    @Test
    void rmmRowsThatCannotBeAllocationsNameTheirLine(@TempDir Path dir) throws Exception {
        Path f = dir.resolve("rmm.csv");
        String header = "Thread,Time,Action,Pointer,Size,Stream\n";
        Files.writeString(f, header + "1,1,allocate,0x10,-1,0\n");
        assertThatThrownBy(() -> TraceReaders.read(f)).hasMessage(f + ": line 2, field Size: negative size -1");
        Files.writeString(f, header + "1,1,allocate,0,16,0\n");
        assertThatThrownBy(() -> TraceReaders.read(f))
                .hasMessage(f + ": line 2, field Pointer: allocate with a null pointer");
        Files.writeString(f, header + "1,1,allocate,0x10,16,0\n1,2,allocate,16,16,0\n");
        assertThatThrownBy(() -> TraceReaders.read(f))
                .hasMessage(f + ": line 3, field Pointer: pointer 0x10 allocated twice without a free");
        // RMM's deallocate is given the size allocate was: another size means the log is not what it claims
        Files.writeString(f, header + "1,1,allocate,0x10,16,0\n1,2,free,0x10,32,0\n");
        assertThatThrownBy(() -> TraceReaders.read(f))
                .hasMessage(f + ": line 3, field Size: free of pointer 0x10 with size 32, allocated with size 16");
        Files.writeString(f, header + "1,1,allocate_failure,0,64,0\n1,2,failure,0,32,0\n");
        assertThat(TraceReaders.read(f).traceOf(0))
                .extracting(e -> e.action() + ":" + e.size())
                .containsExactly("OOM:64", "OOM:32");
    }

    @Test
    void headersCommentsAndBlankLinesAreReadAsTheFormatsSay(@TempDir Path dir) throws Exception {
        Path f = dir.resolve("life.csv");
        // Blank and '#' lines anywhere, a header in another case with spaces and a tab: all read.
        Files.writeString(f, "\n# exported by a planner\nID, Lower,\tUPPER , size\n\n0,0,5,100\n# done\n");
        TraceSnapshot s = TraceReaders.read(f);
        assertThat(s.format()).isEqualTo(SourceFormat.LIFETIME_CSV);
        assertThat(s.traceOf(0)).hasSize(3);
        assertThat(s.traceOf(1)).isEmpty();
        assertThat(s.traceOf(-1)).isEmpty(); // no device, like one the file lacks: not an index out of bounds
        // One column too many in the header is not this format, nor any other.
        Files.writeString(f, "id,lower,upper,size,dtype\n0,0,5,100,f16\n");
        assertThatThrownBy(() -> TraceReaders.read(f)).hasMessageContaining("unknown trace format");
        assertThatThrownBy(() -> new LifetimeCsvReader().read(f))
                .hasMessage(f + ": line 1: expected the header id,lower,upper,size or id,lower,upper,size,offset, got"
                        + " id,lower,upper,size,dtype");
        // A row of data where the header should be is quoted, cut at 60 characters.
        String sixty = "0,1,2," + "9".repeat(54);
        Files.writeString(f, sixty + "\n");
        assertThatThrownBy(() -> new LifetimeCsvReader().read(f)).hasMessageEndingWith("got " + sixty);
        Files.writeString(f, sixty + "9\n");
        assertThatThrownBy(() -> new LifetimeCsvReader().read(f))
                .hasMessageEndingWith("got " + sixty.substring(0, 57) + "...");
    }

    @Test
    void theRowAndFileLimitsAdmitExactlyTheirValue(@TempDir Path dir) throws Exception {
        Path f = dir.resolve("life.csv");
        Files.writeString(f, "id,lower,upper,size\n0,0,5,100\n1,1,6,100\n");
        long bytes = Files.size(f);
        assertThat(new LifetimeCsvReader(new ReadLimits(bytes, 2)).read(f).traceOf(0))
                .hasSize(6);
        assertThatThrownBy(() -> new LifetimeCsvReader(new ReadLimits(bytes, 1)).read(f))
                .hasMessage(f + ": line 3: more than 1 rows (limit)");
        assertThatThrownBy(() -> new LifetimeCsvReader(new ReadLimits(bytes - 1, 2)).read(f))
                .isInstanceOf(TraceFormatException.class)
                .hasMessage(f + ": file is " + bytes + " bytes, over the limit of " + (bytes - 1) + " bytes");
        assertThat(new ReadLimits(1, 1).maxEntries()).isEqualTo(1);
        assertThatThrownBy(() -> new ReadLimits(0, 1)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> new ReadLimits(1, 0)).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void lifetimeHandlesAreDistinctNonNullAndAligned(@TempDir Path dir) throws Exception {
        Path f = dir.resolve("life.csv");
        Files.writeString(f, "id,lower,upper,size\n7,0,4,1\n3,1,4,1\n5,2,4,1\n");
        List<Long> handles = TraceReaders.read(f).traceOf(0).stream()
                .filter(e -> e.action() == TraceAction.ALLOC)
                .map(TraceEntry::addr)
                .toList();
        assertThat(handles).doesNotHaveDuplicates().hasSize(3).allMatch(h -> h > 0 && h % 512 == 0);
    }

    @Test
    void theExceptionCarriesTheFileAndTheLocationApart(@TempDir Path dir) throws Exception {
        Path f = dir.resolve("bad.csv");
        Files.writeString(f, "id,lower,upper,size\n0,x,5,100\n");
        assertThatThrownBy(() -> TraceReaders.read(f)).isInstanceOfSatisfying(TraceFormatException.class, e -> {
            assertThat(e.file()).isEqualTo(f.toString());
            assertThat(e.location()).isEqualTo("line 2, field lower");
        });
        Files.write(f, new byte[] {'i', 'd', ',', (byte) 0xc3});
        assertThatThrownBy(() -> new LifetimeCsvReader().read(f))
                .isInstanceOfSatisfying(TraceFormatException.class, e -> {
                    assertThat(e.location()).isEqualTo("line 1");
                    assertThat(e).hasMessage(f + ": line 1: not UTF-8 text (byte 0xc3 at column 4)");
                });
        // the line and the column of the first bad byte, past a valid multi-byte character and a CRLF line end
        Files.write(f, "Thread,Time,Action,Pointer,Size,Stream\r\n# café\r\n1,0,allocate,0x10,1".getBytes(UTF_8));
        Files.write(f, new byte[] {'0', (byte) 0xfe, '0', ',', '0', '\n'}, StandardOpenOption.APPEND);
        assertThatThrownBy(() -> TraceReaders.read(f)).isInstanceOfSatisfying(TraceFormatException.class, e -> {
            assertThat(e.location()).isEqualTo("line 3");
            assertThat(e).hasMessage(f + ": line 3: not UTF-8 text (byte 0xfe at column 21)");
        });
        assertThat(new TraceFormatException("a.pickle", null, "broken"))
                .hasMessage("a.pickle: broken")
                .satisfies(e -> assertThat(e.location()).isEmpty());
        assertThat(new TraceFormatException("a.pickle", null, "broken", new RuntimeException()).location())
                .isEmpty();
    }

    @Test
    void readsThePanguLifetimes() {
        TraceSnapshot s = TraceReaders.read(TestTraces.file("pangu13b-lifetimes.csv"));
        List<TraceEntry> t = s.traceOf(0);
        assertThat(t.stream().filter(e -> e.action() == TraceAction.ALLOC).count())
                .isEqualTo(14_695);
        // Peak live bytes, the documented lower bound of any placement: 15.41 GiB.
        long live = 0, peak = 0;
        for (TraceEntry e : t) {
            if (e.action() == TraceAction.ALLOC) {
                live += e.size();
            } else if (e.action() == TraceAction.FREE_COMPLETED) {
                live -= e.size();
            }
            peak = Math.max(peak, live);
        }
        assertThat(peak / (double) (1L << 30)).isBetween(15.405, 15.415);
    }
}
