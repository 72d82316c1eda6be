package io.gpumem.config;

import static io.gpumem.testing.TestSizes.MiB;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * Seeded random tests: configs generated from a model and written with random spacing parse back to the
 * model; random token soup never escapes as anything but a {@link ConfigException} naming a key.
 */
class AllocatorConfigParserRandomTest {

    @Test
    void generatedConfigsParseToTheirModel() {
        long seed = System.nanoTime();
        System.out.println("AllocatorConfigParserRandomTest.generatedConfigsParseToTheirModel seed=" + seed);
        SplittableRandom rnd = new SplittableRandom(seed);
        AllocatorConfig previous = AllocatorConfig.defaults();
        for (int iter = 0; iter < 3000; iter++) {
            List<String> parts = new ArrayList<>();
            long maxSplit = AllocatorConfig.UNLIMITED;
            long nonSplit = 20 * MiB;
            int[] table = new int[16];
            double gc = 0;
            boolean expandable = false;
            int threads = 1;
            int options = rnd.nextInt(6);
            for (int o = 0; o < options; o++) {
                switch (rnd.nextInt(6)) {
                    case 0 -> {
                        int mb = 21 + rnd.nextInt(100_000);
                        maxSplit = mb * MiB;
                        parts.add("max_split_size_mb:" + mb);
                    }
                    case 1 -> {
                        int mb = 20 + rnd.nextInt(10_000);
                        nonSplit = mb * MiB;
                        parts.add("max_non_split_rounding_mb:" + mb);
                    }
                    case 2 -> {
                        int d = 1 << rnd.nextInt(9);
                        Arrays.fill(table, d);
                        parts.add("roundup_power2_divisions:" + d);
                    }
                    case 3 -> {
                        // Model of the list semantics: first key fills below, '>' from the last key inclusive.
                        int[] t = new int[16];
                        StringBuilder sb = new StringBuilder("roundup_power2_divisions:[");
                        int entries = 1 + rnd.nextInt(5);
                        boolean first = true;
                        int last = 0;
                        for (int e = 0; e < entries; e++) {
                            int v = rnd.nextInt(4) == 0 ? 0 : 1 << rnd.nextInt(6);
                            sb.append(e == 0 ? "" : ",");
                            if (rnd.nextInt(4) == 0) {
                                sb.append(">:").append(v);
                                Arrays.fill(t, last, 16, v);
                            } else {
                                int log = rnd.nextInt(18);
                                sb.append(1L << log).append(':').append(v);
                                int idx = Math.min(log, 15);
                                if (first) {
                                    Arrays.fill(t, 0, idx, v);
                                    first = false;
                                }
                                t[idx] = v;
                                last = idx;
                            }
                        }
                        table = t;
                        parts.add(sb.append(']').toString());
                    }
                    case 4 -> {
                        gc = (1 + rnd.nextInt(998)) / 1000.0;
                        parts.add("garbage_collection_threshold:" + gc);
                    }
                    default -> {
                        if (rnd.nextBoolean()) {
                            expandable = rnd.nextBoolean();
                            parts.add("expandable_segments:" + (expandable ? "True" : "False"));
                        } else {
                            threads = 1 << rnd.nextInt(8);
                            parts.add("pinned_num_register_threads:" + threads);
                        }
                    }
                }
            }
            String conf = spaced(String.join(",", parts) + (rnd.nextInt(5) == 0 && !parts.isEmpty() ? "," : ""), rnd);
            AllocatorConfig c;
            try {
                c = AllocatorConfig.parse(conf);
            } catch (ConfigException e) {
                fail("seed " + seed + ": valid config rejected: '" + conf + "': " + e.getMessage());
                return;
            }
            assertThat(c.maxSplitSize()).as(conf).isEqualTo(maxSplit);
            assertThat(c.maxNonSplitRounding()).as(conf).isEqualTo(nonSplit);
            assertThat(c.roundupPower2DivisionsTable()).as(conf).containsExactly(table);
            assertThat(c.garbageCollectionThreshold()).as(conf).isEqualTo(gc);
            assertThat(c.expandableSegments()).as(conf).isEqualTo(expandable);
            assertThat(c.pinnedNumRegisterThreads()).as(conf).isEqualTo(threads);
            // written down and read back, alone or on top of the previous one as a settings call makes it
            assertThat(settings(AllocatorConfig.parse(c.toConfString())))
                    .as(conf)
                    .isEqualTo(settings(c));
            AllocatorConfig chained = previous.reparse(conf);
            assertThat(settings(AllocatorConfig.parse(chained.toConfString())))
                    .as(previous + " then " + conf)
                    .isEqualTo(settings(chained));
            previous = c;
        }
    }

    /** The settings of {@code c}, without the string it was parsed from. */
    static AllocatorConfig settings(AllocatorConfig c) {
        return c.toBuilder().raw("").build();
    }

    /** Sprinkles spaces anywhere (the lexer drops them all). */
    private static String spaced(String s, SplittableRandom rnd) {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < s.length(); i++) {
            while (rnd.nextInt(8) == 0) {
                sb.append(' ');
            }
            sb.append(s.charAt(i));
        }
        return sb.toString();
    }

    @Test
    void tokenSoupOnlyEverFailsWithAConfigException() {
        long seed = System.nanoTime();
        System.out.println("AllocatorConfigParserRandomTest.tokenSoupOnlyEverFailsWithAConfigException seed=" + seed);
        SplittableRandom rnd = new SplittableRandom(seed);
        String[] vocabulary = {
            "max_split_size_mb",
            "max_non_split_rounding_mb",
            "roundup_power2_divisions",
            "garbage_collection_threshold",
            "expandable_segments",
            "backend",
            "release_lock_on_cudamalloc",
            "pinned_use_cuda_host_register",
            "pinned_num_register_threads",
            "pinned_use_background_threads",
            ":",
            ",",
            "[",
            "]",
            ">",
            "True",
            "False",
            "native",
            "0",
            "1",
            "20",
            "21",
            "128",
            "256",
            "0.5",
            "1.0",
            "-3",
            "99999999999",
            "abc",
            " ",
            "1e-1",
            "."
        };
        int accepted = 0;
        for (int iter = 0; iter < 20_000; iter++) {
            StringBuilder sb = new StringBuilder();
            int n = rnd.nextInt(12);
            for (int k = 0; k < n; k++) {
                sb.append(vocabulary[rnd.nextInt(vocabulary.length)]);
            }
            String conf = sb.toString();
            try {
                AllocatorConfig.parse(conf);
                accepted++;
            } catch (ConfigException e) {
                assertThat(e.getMessage()).as(conf).isNotBlank();
                assertThat(e.key()).as(conf).isNotNull();
                assertThat(e.getMessage()).as(conf).contains(e.key());
            } catch (RuntimeException e) {
                fail("seed " + seed + ": '" + conf + "' threw " + e, e);
            }
        }
        assertThat(accepted).as("some random strings are valid configs").isPositive();
    }
}
