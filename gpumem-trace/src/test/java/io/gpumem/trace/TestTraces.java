package io.gpumem.trace;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpumem.history.TraceEntry;
import io.gpumem.trace.io.TraceSnapshot;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

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

    /** Every snapshot pickle among the shared traces, by name; the test is skipped, saying so, when there is none. */
    public static List<Path> pickles() throws IOException {
        List<Path> pickles;
        try (Stream<Path> files = Files.list(dir())) {
            pickles =
                    files.filter(p -> p.toString().endsWith(".pickle")).sorted().toList();
        }
        assumeTrue(!pickles.isEmpty(), "no snapshot pickles in " + dir() + ": skipped");
        return pickles;
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

    /** The same snapshot with every entry's frames removed: what an older or frameless recording gives. */
    public static TraceSnapshot withoutFrames(TraceSnapshot t) {
        List<List<TraceEntry>> traces = new ArrayList<>();
        for (List<TraceEntry> trace : t.deviceTraces()) {
            List<TraceEntry> out = new ArrayList<>(trace.size());
            for (TraceEntry e : trace) {
                out.add(new TraceEntry(
                        e.action(), e.addr(), e.size(), e.stream(), e.timeUs(), null, e.deviceFree(), e.keys()));
            }
            traces.add(out);
        }
        return new TraceSnapshot(
                t.source(),
                t.format(),
                t.segments(),
                traces,
                t.allocatorSettings(),
                t.externalAnnotations(),
                t.extra(),
                t.addressesRecorded());
    }
}
