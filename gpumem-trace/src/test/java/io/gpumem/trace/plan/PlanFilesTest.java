package io.gpumem.trace.plan;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.plan.LifetimeProblem;
import io.gpumem.plan.OffsetPlan;
import io.gpumem.plan.OffsetPlanner;
import io.gpumem.trace.io.ReadLimits;
import io.gpumem.trace.io.TraceFormatException;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * MiniMalloc's interval files as {@code gpumem plan} reads and writes them: either header (the input's four columns
 * or a plan's five, in any case), comments and blank lines skipped, a plan read back as a problem; and every
 * malformed row refused naming the file, line and field, by the same rules (and the same reader,
 * {@link io.gpumem.trace.io.LifetimeCsvReader}) as when the file is read as a trace.
 */
class PlanFilesTest {

    /** Buffer {@code i} as {@code {id, lower, upper, size}}. */
    private static long[] row(LifetimeProblem p, int i) {
        return new long[] {p.id(i), p.lower(i), p.upper(i), p.size(i)};
    }

    private static LifetimeProblem read(Path file) {
        return PlanFiles.read(file, ReadLimits.DEFAULT, 512);
    }

    @Test
    void anIntervalFileIsReadAndAPlanOfItReadsBackAsTheSameProblem(@TempDir Path dir) throws Exception {
        Path in = dir.resolve("problem.csv");
        Files.writeString(in, "# three buffers\n\nID, Lower ,UPPER,size\n7,0,4,100\n3,2,6,1000\n\n9,4,4,512\n");
        LifetimeProblem p = read(in);
        assertThat(p.buffers()).isEqualTo(3);
        assertThat(row(p, 0)).containsExactly(7, 0, 4, 100);
        assertThat(row(p, 2)).containsExactly(9, 4, 4, 512);
        OffsetPlan plan = new OffsetPlanner().plan(p);
        StringWriter out = new StringWriter();
        PlanFiles.write(plan, out);
        String[] lines = out.toString().split("\n");
        assertThat(lines[0]).isEqualTo("id,lower,upper,size,offset");
        assertThat(lines).hasSize(4);
        assertThat(lines[2]).startsWith("3,2,6,1000,").endsWith("," + plan.offsets()[1]);
        Path back = dir.resolve("plan.csv");
        Files.writeString(back, out.toString());
        LifetimeProblem again = read(back);
        for (int i = 0; i < p.buffers(); i++) {
            assertThat(row(again, i)).containsExactly(p.id(i), p.lower(i), p.upper(i), p.size(i));
        }
    }

    @Test
    void malformedRowsAreRefusedNamingLineAndField(@TempDir Path dir) throws Exception {
        Path f = dir.resolve("bad.csv");
        String header = "id,lower,upper,size\n";
        String[][] cases = {
            {header + "0,0,4\n", "line 2: expected 4 fields (id,lower,upper,size), got 3"},
            {header + "0,0,4,100,5\n", "line 2: expected 4 fields (id,lower,upper,size), got 5"},
            {header + "0,x,4,100\n", "line 2, field lower: expected an integer, got 'x'"},
            {
                header + "0,0,4," + "9".repeat(70) + "\n",
                "line 2, field size: integer " + "9".repeat(57) + "... does not fit in 64 bits"
            },
            {header + "0,-1,4,100\n", "line 2, field lower: lower -1 is before time 0"},
            {header + "0,5,4,100\n", "line 2, field upper: upper 4 is below lower 5"},
            {header + "0,0,4,0\n", "line 2, field size: size must be positive, got 0"},
            {
                header + "0,0,4,1152921504606846976\n",
                "line 2, field size: size 1152921504606846976 is 2^60 bytes (1 EiB) or more, which no device holds"
            },
            {
                header + "0,0,4,1152921504606846975\n1,0,4,1152921504606846975\n"
                        + "2,0,4,1152921504606846975\n3,0,4,1152921504606846975\n4,0,4,1152921504606846975\n"
                        + "5,0,4,1152921504606846975\n6,0,4,1152921504606846975\n7,0,4,1152921504606846975\n",
                "line 9, field size: the sizes up to this row, each aligned to 512 bytes, add up to 2^63 bytes or"
                        + " more, past any offset a plan can give"
            },
            {header + "3,0,4,10\n3,1,2,10\n", "line 3, field id: id 3 appears twice (first on line 2)"},
        };
        for (String[] c : cases) {
            Files.writeString(f, c[0]);
            assertThatThrownBy(() -> read(f))
                    .as(c[0])
                    .isInstanceOf(TraceFormatException.class)
                    .hasMessage(f + ": " + c[1]);
        }
        Files.write(f, new byte[] {
            'i',
            'd',
            ',',
            'l',
            'o',
            'w',
            'e',
            'r',
            ',',
            'u',
            'p',
            'p',
            'e',
            'r',
            ',',
            's',
            'i',
            'z',
            'e',
            '\n',
            '1',
            (byte) 0xff,
            '\n'
        });
        assertThatThrownBy(() -> read(f)).hasMessage(f + ": line 2: not UTF-8 text (byte 0xff at column 2)");
        assertThatThrownBy(() -> read(dir.resolve("missing.csv")))
                .hasMessage(dir.resolve("missing.csv") + ": no such file");
    }

    @Test
    void theRowAndFileLimitsAdmitExactlyTheirValue(@TempDir Path dir) throws Exception {
        Path f = dir.resolve("limits.csv");
        Files.writeString(f, "id,lower,upper,size\n0,0,4,100\n1,1,5,100\n");
        long bytes = Files.size(f);
        assertThat(PlanFiles.read(f, new ReadLimits(bytes, 2), 512).buffers()).isEqualTo(2);
        assertThatThrownBy(() -> PlanFiles.read(f, new ReadLimits(bytes, 1), 512))
                .hasMessage(f + ": line 3: more than 1 rows (limit)");
        assertThatThrownBy(() -> PlanFiles.read(f, new ReadLimits(bytes - 1, 2), 512))
                .hasMessage(f + ": file is " + bytes + " bytes, over the limit of " + (bytes - 1) + " bytes");
    }

    @Test
    void manyRowsAreAllReadInOrder(@TempDir Path dir) throws Exception {
        StringBuilder sb = new StringBuilder("id,lower,upper,size\n");
        for (int i = 0; i < 3_000; i++) {
            sb.append(i)
                    .append(',')
                    .append(i)
                    .append(',')
                    .append(i + 10)
                    .append(',')
                    .append(512 + i)
                    .append('\n');
        }
        Path f = dir.resolve("many.csv");
        Files.writeString(f, sb);
        LifetimeProblem p = read(f);
        assertThat(p.buffers()).isEqualTo(3_000);
        assertThat(row(p, 2_999)).containsExactly(2_999, 2_999, 3_009, 3_511);
    }

    @Test
    void anyOtherTraceBecomesTheBuffersOfItsWindow(@TempDir Path dir) throws Exception {
        // An ops script: a is freed at its completion (entry 3), b and c are never freed (live to the end, 5).
        Path ops = dir.resolve("job.ops");
        Files.writeString(ops, "alloc a 1000\nalloc b 2000\nfree a\nalloc c 500\n");
        LifetimeProblem p = read(ops);
        assertThat(p.buffers()).isEqualTo(3);
        long[][] expected = {{0, 0, 3, 1000}, {1, 1, 5, 2000}, {2, 4, 5, 500}};
        for (int i = 0; i < 3; i++) {
            assertThat(row(p, i)).containsExactly(expected[i]);
        }
        // A CSV whose header is neither interval header is no interval file (nor any other format).
        Path other = dir.resolve("other.csv");
        Files.writeString(other, "id,lower,upper,bytes\n0,0,4,100\n");
        assertThatThrownBy(() -> read(other)).hasMessageContaining("unknown trace format");
        Path empty = dir.resolve("empty.csv");
        Files.writeString(empty, "# nothing\n\n");
        assertThatThrownBy(() -> read(empty)).isInstanceOf(TraceFormatException.class);
        // A bad number is quoted whole up to 60 characters.
        Path sixty = dir.resolve("sixty.csv");
        Files.writeString(sixty, "id,lower,upper,size\n0,0,4," + "x".repeat(60) + "\n");
        assertThatThrownBy(() -> read(sixty)).hasMessageEndingWith("got '" + "x".repeat(60) + "'");
    }
}
