package io.gpumem.trace.io;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.trace.TestTraces;
import java.io.ByteArrayInputStream;
import java.nio.file.Files;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** Damaged snapshot bytes (seeded flips, cuts, splices) read as a snapshot or fail with TraceFormatException. */
class PickleFuzzTest {

    @Test
    void damagedPicklesNeverEscapeAsOtherExceptions() throws Exception {
        byte[] original = Files.readAllBytes(TestTraces.file("tiny-forward.pickle"));
        long seed = System.nanoTime();
        System.out.println("seed=" + seed);
        Random rnd = new Random(seed);
        int failures = 0;
        for (int round = 0; round < 300; round++) {
            byte[] b = original.clone();
            int edits = 1 + rnd.nextInt(8);
            for (int k = 0; k < edits; k++) {
                int at = rnd.nextInt(b.length);
                switch (rnd.nextInt(3)) {
                    case 0 -> b[at] = (byte) rnd.nextInt(256);
                    case 1 -> b[at] ^= (byte) (1 << rnd.nextInt(8));
                    default -> {
                        int from = rnd.nextInt(b.length);
                        int len = Math.min(1 + rnd.nextInt(64), Math.min(b.length - at, b.length - from));
                        System.arraycopy(original, from, b, at, len);
                    }
                }
            }
            if (rnd.nextInt(4) == 0) {
                b = java.util.Arrays.copyOf(b, rnd.nextInt(b.length));
            }
            try {
                TraceSnapshot s = new PytorchSnapshotReader().read(new ByteArrayInputStream(b), "fuzz.pickle");
                assertThat(s.source()).isEqualTo("fuzz.pickle");
            } catch (TraceFormatException e) {
                failures++;
                assertThat(e.getMessage()).as("seed " + seed).startsWith("fuzz.pickle");
            }
        }
        System.out.println(failures + " of 300 damaged files rejected");
        assertThat(failures).isPositive();
    }
}
