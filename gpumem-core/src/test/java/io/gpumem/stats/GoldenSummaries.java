package io.gpumem.stats;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;

/**
 * Golden {@code memory_summary} tables shared by the tests of every module (published in gpumem-core's
 * test-jar): each is kept once, as a test resource next to this class, character for character.
 */
public final class GoldenSummaries {

    /**
     * allocator.md §8.3: the full table after the §6.3 worked example (a = 1000 B, b = 3 MiB, c = 25,000,000 B, free b,
     * free a), as PyTorch returns it, with a trailing newline.
     */
    public static final String SECTION_8_3 = load("section-8.3-memory-summary.txt");

    private GoldenSummaries() {}

    private static String load(String name) {
        try (InputStream in = GoldenSummaries.class.getResourceAsStream(name)) {
            if (in == null) {
                throw new IllegalStateException("test resource io/gpumem/stats/" + name + " is missing");
            }
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read test resource io/gpumem/stats/" + name, e);
        }
    }
}
