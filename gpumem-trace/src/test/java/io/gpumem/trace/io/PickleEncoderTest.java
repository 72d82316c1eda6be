package io.gpumem.trace.io;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpumem.trace.TestTraces;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import net.razorvine.pickle.Unpickler;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class PickleEncoderTest {

    static byte[] encode(Object o) throws Exception {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        new PickleEncoder(out).dump(o);
        return out.toByteArray();
    }

    static Object sample() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put(
                "ints",
                Arrays.asList(
                        0L,
                        255L,
                        256L,
                        65535L,
                        65536L,
                        -1L,
                        -129L,
                        (long) Integer.MAX_VALUE,
                        Integer.MAX_VALUE + 1L,
                        (long) Integer.MIN_VALUE,
                        Integer.MIN_VALUE - 1L,
                        1L << 40,
                        139961475006464L,
                        Long.MAX_VALUE,
                        Long.MIN_VALUE,
                        7));
        m.put("big", new BigInteger("18446744073709551615"));
        m.put("floats", Arrays.asList(0.0, -2.5, 1e300));
        m.put("bools", Arrays.asList(true, false, null));
        m.put(
                "tuples",
                Arrays.asList(
                        new Object[0],
                        new Object[] {1L},
                        new Object[] {1L, 2L},
                        new Object[] {1L, 2L, 3L},
                        new Object[] {1L, 2L, 3L, 4L}));
        m.put("text", "héllo ✓");
        List<Object> shared = new ArrayList<>(List.of("frame"));
        m.put("a", shared);
        m.put("b", shared);
        List<Object> many = new ArrayList<>();
        for (int i = 0; i < 2500; i++) {
            many.add((long) i * 3);
        }
        m.put("many", many);
        return m;
    }

    @Test
    void razorvineReadsBackEveryValue() throws Exception {
        Object back = new Unpickler().load(new ByteArrayInputStream(encode(sample())));
        @SuppressWarnings("unchecked")
        Map<String, Object> m = (Map<String, Object>) back;
        List<?> ints = (List<?>) m.get("ints");
        assertThat(ints.stream().map(v -> ((Number) v).longValue()).toList())
                .containsExactly(
                        0L,
                        255L,
                        256L,
                        65535L,
                        65536L,
                        -1L,
                        -129L,
                        (long) Integer.MAX_VALUE,
                        Integer.MAX_VALUE + 1L,
                        (long) Integer.MIN_VALUE,
                        Integer.MIN_VALUE - 1L,
                        1L << 40,
                        139961475006464L,
                        Long.MAX_VALUE,
                        Long.MIN_VALUE,
                        7L);
        assertThat(m.get("big")).isEqualTo(new BigInteger("18446744073709551615"));
        assertThat(m.get("floats")).isEqualTo(List.of(0.0, -2.5, 1e300));
        assertThat(m.get("text")).isEqualTo("héllo ✓");
        assertThat(m.get("a")).isSameAs(m.get("b"));
        assertThat((List<?>) m.get("many")).hasSize(2500);
        assertThat(((Number) ((List<?>) m.get("many")).get(2499)).longValue()).isEqualTo(7497L);
    }

    @Test
    void pythonReadsTheSameValues(@TempDir Path dir) throws Exception {
        assumeTrue(TestTraces.pythonAvailable(), "python3 not found: skipped the standard-pickle check");
        Path f = dir.resolve("v.pickle");
        Files.write(f, encode(sample()));
        String script = "import pickle,sys; d=pickle.load(open(sys.argv[1],'rb')); "
                + "print(d['ints'], d['big'], d['floats'], d['bools'], d['tuples'], d['text'], d['a'] is d['b'], "
                + "len(d['many']), sum(d['many']))";
        Process p = new ProcessBuilder("python3", "-c", script, f.toString())
                .redirectErrorStream(true)
                .start();
        String text = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
        assertThat(p.waitFor()).as(text).isZero();
        assertThat(text)
                .isEqualTo("[0, 255, 256, 65535, 65536, -1, -129, 2147483647, 2147483648, -2147483648, "
                        + "-2147483649, 1099511627776, 139961475006464, 9223372036854775807, -9223372036854775808, 7] "
                        + "18446744073709551615 [0.0, -2.5, 1e+300] [True, False, None] [(), (1,), (1, 2), (1, 2, 3), "
                        + "(1, 2, 3, 4)] héllo ✓ True 2500 9371250");
    }

    @Test
    void otherTypesAreRejected() {
        assertThatThrownBy(() -> encode(List.of(new StringBuilder("x"))))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("StringBuilder");
    }
}
