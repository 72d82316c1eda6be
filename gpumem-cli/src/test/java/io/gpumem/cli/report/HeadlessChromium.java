package io.gpumem.cli.report;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * A headless Chromium for the report tests: finds the browser on {@code PATH} and runs it once per page with
 * a fresh profile and everything that could reach the network switched off, returning the rendered DOM (or
 * writing a screenshot) and the browser's log.
 */
final class HeadlessChromium {
    private static final List<String> NAMES = List.of("chromium", "chromium-browser", "google-chrome");
    private static final long TIMEOUT_S = 120;

    private final Path binary;

    private HeadlessChromium(Path binary) {
        this.binary = binary;
    }

    /** The browser, or empty when none is installed ({@code .ci/run} installs Debian's {@code chromium}). */
    static Optional<HeadlessChromium> find() {
        String path = System.getenv("PATH");
        if (path == null) {
            return Optional.empty();
        }
        for (String name : NAMES) {
            for (String dir : path.split(File.pathSeparator, -1)) {
                Path p = Path.of(dir, name);
                if (Files.isExecutable(p)) {
                    return Optional.of(new HeadlessChromium(p));
                }
            }
        }
        return Optional.empty();
    }

    /** The browser; the calling test is skipped, saying so, when none is installed. */
    static HeadlessChromium orSkip() {
        Optional<HeadlessChromium> found = find();
        assumeTrue(
                found.isPresent(),
                "chromium not installed (.ci/run installs Debian's chromium): browser tests skipped");
        return found.get();
    }

    /** What one run printed: standard output (the DOM for {@code --dump-dom}) and the browser's log. */
    record Result(String stdout, String log) {}

    /** Loads {@code page} and returns the DOM after its scripts ran. */
    Result dumpDom(Path page) throws IOException, InterruptedException {
        return run(page, "", List.of("--dump-dom"));
    }

    /** Loads {@code page} with {@code #fragment} in its address (the page reads it) and returns the DOM. */
    Result dumpDom(Path page, String fragment) throws IOException, InterruptedException {
        return run(page, "#" + fragment, List.of("--dump-dom"));
    }

    /** Loads {@code page} in a {@code width}×{@code height} window and writes a PNG screenshot to {@code png}. */
    Result screenshot(Path page, Path png, int width, int height) throws IOException, InterruptedException {
        return run(
                page,
                "",
                List.of(
                        "--window-size=" + width + "," + height,
                        "--hide-scrollbars",
                        "--screenshot=" + png.toAbsolutePath()));
    }

    private Result run(Path page, String fragment, List<String> action) throws IOException, InterruptedException {
        Path profile = Files.createTempDirectory("gpumem-chromium-profile");
        Path out = Files.createTempFile("gpumem-chromium", ".out");
        Path log = Files.createTempFile("gpumem-chromium", ".log");
        try {
            List<String> cmd = new ArrayList<>(List.of(
                    binary.toString(),
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-quic",
                    "--no-first-run",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--disable-sync",
                    "--disable-extensions",
                    "--disable-dev-shm-usage",
                    "--enable-logging=stderr",
                    "--v=0",
                    "--user-data-dir=" + profile.toAbsolutePath()));
            cmd.addAll(action);
            cmd.add(page.toAbsolutePath().toUri() + fragment);
            Process p = new ProcessBuilder(cmd)
                    .redirectOutput(out.toFile())
                    .redirectError(log.toFile())
                    .start();
            if (!p.waitFor(TIMEOUT_S, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                throw new IOException("chromium did not finish within " + TIMEOUT_S + " s on " + page);
            }
            return new Result(
                    Files.readString(out, StandardCharsets.UTF_8), Files.readString(log, StandardCharsets.UTF_8));
        } finally {
            Files.deleteIfExists(out);
            Files.deleteIfExists(log);
            deleteTree(profile);
        }
    }

    private static void deleteTree(Path dir) throws IOException {
        try (Stream<Path> walk = Files.walk(dir)) {
            for (Path p : walk.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(p);
            }
        }
    }
}
