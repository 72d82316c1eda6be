package io.gpumem.cli.fuzz;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;

/**
 * A seeded structure-blind mutator for the reader fuzz tests: byte flips and overwrites, "interesting" integers
 * written over the input (lengths and counts at their limits), inserted, deleted and duplicated ranges, splices
 * from another seed, truncation; and for text formats, line and field mutations with hostile tokens.
 * Deterministic for its random source, so a printed seed reproduces a run.
 */
final class Mutator {
    private static final long[] INTERESTING = {
        0,
        1,
        -1,
        0x7f,
        0x80,
        0xff,
        0x7fff,
        0xffff,
        0x7fffffffL,
        0x80000000L,
        0xffffffffL,
        1L << 30,
        1L << 31,
        1L << 40,
        Long.MAX_VALUE,
        Long.MIN_VALUE
    };
    private static final String[] TOKENS = {
        "",
        "-1",
        "0",
        "NaN",
        "Infinity",
        "-0",
        "1e308",
        "0x",
        "0xffffffffffffffff",
        "99999999999999999999999",
        "9223372036854775808",
        "-9223372036854775809",
        "1.5",
        " ",
        ",",
        "#",
        "=",
        ":",
        "[",
        "]",
        "\u00e9",
        "\uffff",
        "\t",
        "alloc",
        "free",
        "TiB",
        "3000TiB",
        "MiB",
        "_",
        "1_",
        "True",
        "False",
        ">",
        "device"
    };

    private final SplittableRandom rnd;

    Mutator(SplittableRandom rnd) {
        this.rnd = rnd;
    }

    /** One to eight byte-level mutations of {@code seed}, sometimes spliced with {@code other}. */
    byte[] bytes(byte[] seed, byte[] other) {
        byte[] b = seed.clone();
        int edits = 1 + rnd.nextInt(8);
        for (int k = 0; k < edits; k++) {
            if (b.length == 0) {
                b = new byte[] {(byte) rnd.nextInt(256)};
                continue;
            }
            int at = rnd.nextInt(b.length);
            switch (rnd.nextInt(9)) {
                case 0 -> b[at] ^= (byte) (1 << rnd.nextInt(8));
                case 1 -> b[at] = (byte) rnd.nextInt(256);
                case 2 -> {
                    long v = INTERESTING[rnd.nextInt(INTERESTING.length)];
                    int width = new int[] {1, 2, 4, 8}[rnd.nextInt(4)];
                    for (int i = 0; i < width && at + i < b.length; i++) {
                        b[at + i] = (byte) (v >>> (8 * i));
                    }
                }
                case 3 -> { // delete a range
                    int len = Math.min(b.length - at, 1 + rnd.nextInt(32));
                    byte[] c = new byte[b.length - len];
                    System.arraycopy(b, 0, c, 0, at);
                    System.arraycopy(b, at + len, c, at, b.length - at - len);
                    b = c;
                }
                case 4 -> { // duplicate a range in place
                    int len = Math.min(b.length - at, 1 + rnd.nextInt(64));
                    byte[] c = new byte[b.length + len];
                    System.arraycopy(b, 0, c, 0, at + len);
                    System.arraycopy(b, at, c, at + len, b.length - at);
                    b = c;
                }
                case 5 -> { // splice from the other seed
                    if (other.length > 0) {
                        int from = rnd.nextInt(other.length);
                        int len = Math.min(Math.min(other.length - from, b.length - at), 1 + rnd.nextInt(128));
                        System.arraycopy(other, from, b, at, len);
                    }
                }
                case 6 -> b = Arrays.copyOf(b, rnd.nextInt(b.length + 1)); // truncate
                case 7 -> { // insert a random byte
                    byte[] c = new byte[b.length + 1];
                    System.arraycopy(b, 0, c, 0, at);
                    c[at] = (byte) rnd.nextInt(256);
                    System.arraycopy(b, at, c, at + 1, b.length - at);
                    b = c;
                }
                default -> { // copy a range over another place in the same input
                    int from = rnd.nextInt(b.length);
                    int len = Math.min(Math.min(b.length - from, b.length - at), 1 + rnd.nextInt(16));
                    System.arraycopy(b.clone(), from, b, at, len);
                }
            }
        }
        return b;
    }

    /** Line and field mutations of a text seed (CSV rows, script lines, config strings), sometimes byte ones too. */
    String text(String seed, String separators) {
        List<String> lines = new ArrayList<>(List.of(seed.split("\n", -1)));
        int edits = 1 + rnd.nextInt(4);
        for (int k = 0; k < edits; k++) {
            int i = rnd.nextInt(lines.size());
            switch (rnd.nextInt(6)) {
                case 0 -> lines.add(rnd.nextInt(lines.size() + 1), lines.get(i)); // duplicate a line
                case 1 -> {
                    if (lines.size() > 1) {
                        lines.remove(i);
                    }
                }
                case 2 -> { // swap two lines
                    int j = rnd.nextInt(lines.size());
                    String t = lines.get(i);
                    lines.set(i, lines.get(j));
                    lines.set(j, t);
                }
                default -> lines.set(i, field(lines.get(i), separators));
            }
        }
        String out = String.join("\n", lines);
        if (rnd.nextInt(5) == 0) {
            byte[] b = bytes(out.getBytes(StandardCharsets.UTF_8), seed.getBytes(StandardCharsets.UTF_8));
            return new String(b, StandardCharsets.ISO_8859_1);
        }
        return out;
    }

    private String field(String line, String separators) {
        String sep = String.valueOf(separators.charAt(rnd.nextInt(separators.length())));
        String[] f = line.split(java.util.regex.Pattern.quote(sep), -1);
        int j = rnd.nextInt(f.length);
        f[j] = switch (rnd.nextInt(4)) {
            case 0 -> TOKENS[rnd.nextInt(TOKENS.length)];
            case 1 -> f[j] + TOKENS[rnd.nextInt(TOKENS.length)];
            case 2 -> Long.toString(INTERESTING[rnd.nextInt(INTERESTING.length)]);
            default -> f[j].repeat(1 + rnd.nextInt(3));
        };
        return String.join(sep, f);
    }

    /** A token for option values. */
    String token() {
        return rnd.nextInt(3) == 0
                ? Long.toString(INTERESTING[rnd.nextInt(INTERESTING.length)])
                : TOKENS[rnd.nextInt(TOKENS.length)];
    }

    int nextInt(int bound) {
        return rnd.nextInt(bound);
    }
}
