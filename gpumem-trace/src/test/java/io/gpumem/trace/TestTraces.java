package io.gpumem.trace;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Locates the shared real traces ({@code gpumem.traces.dir}, set by the parent pom to
 * {@code ../shared/traces}); tests that need them are skipped, with a message, where they are absent.
 */
public final class TestTraces {

    private TestTraces() {}

    public static Path dir() {
        String d = System.getProperty("gpumem.traces.dir");
        assumeTrue(
                d != null && Files.isDirectory(Path.of(d)),
                "real traces not present at "
                        + (d == null ? "(gpumem.traces.dir unset)" : Path.of(d).normalize() + " (gpumem.traces.dir)"));
        return Path.of(d);
    }

    public static Path file(String name) {
        Path p = dir().resolve(name);
        assumeTrue(Files.isRegularFile(p), "trace " + p + " not available: skipped");
        return p;
    }

    /** Whether a python3 interpreter can be started. */
    public static boolean pythonAvailable() {
        try {
            Process p = new ProcessBuilder("python3", "-c", "import pickle")
                    .redirectErrorStream(true)
                    .start();
            p.getInputStream().readAllBytes();
            return p.waitFor() == 0;
        } catch (Exception e) {
            return false;
        }
    }
}
