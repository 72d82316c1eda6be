package io.gpumem.cli;

import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.stream.Stream;

/**
 * The training run of the launcher's class-data-sharing archive: the launcher runs this once per jar, under
 * {@code -XX:ArchiveClassesAtExit}, so that the archive holds the classes (and lambda classes) of the common
 * commands, whichever command a user happens to run first: the top-level usage, {@code demo}, {@code replay
 * --check}, {@code compare} and {@code analyze}, on a small trace that {@code demo} generates (about 300
 * allocations). A later run maps those classes from the archive instead of parsing, verifying and linking them.
 *
 * <p>Everything it writes goes under the folder it is given, which it deletes at the end; the commands' output is
 * discarded. Its only contract is to exit normally: what it runs affects start-up time, never results.
 */
public final class ArchiveTraining {
    private ArchiveTraining() {}

    /**
     * {@code args[0]}: a scratch folder. Exits through {@link System#exit} (status 0 only when every command
     * succeeded), as {@code gpumem} does, so that a command's leftover worker thread cannot keep the JVM, and the
     * archive it writes at exit, waiting.
     */
    public static void main(String[] args) {
        int status = 1;
        try {
            if (args.length != 1) {
                throw new IllegalArgumentException("usage: ArchiveTraining SCRATCH_FOLDER");
            }
            train(Path.of(args[0]));
            status = 0;
        } catch (Exception | Error e) {
            e.printStackTrace(System.err); // for whoever runs the training by hand: the launcher discards it
        }
        System.exit(status);
    }

    /** Runs the commands, with {@code dir} (created, then deleted) for their files and their output discarded. */
    static void train(Path dir) throws IOException {
        Files.createDirectories(dir);
        PrintStream out = System.out;
        PrintStream err = System.err;
        PrintStream discard = new PrintStream(OutputStream.nullOutputStream());
        System.setOut(discard);
        System.setErr(discard);
        try {
            String snapshot = dir.resolve("training.pickle").toString();
            run("--help");
            run(
                    "demo",
                    "--layers",
                    "2",
                    "--hidden",
                    "256",
                    "--heads",
                    "4",
                    "--vocab",
                    "1000",
                    "--batch",
                    "2",
                    "--seq-min",
                    "128",
                    "--seq-max",
                    "256",
                    "--steps",
                    "2",
                    "--no-min-capacity",
                    "--snapshot",
                    snapshot,
                    "--html",
                    dir.resolve("training.html").toString());
            run("replay", "--check", snapshot);
            run("compare", snapshot, "-c", "expandable_segments:True");
            run("analyze", snapshot);
        } finally {
            System.setOut(out);
            System.setErr(err);
            deleteTree(dir);
        }
    }

    /** Runs {@code gpumem args} as {@code main} would, minus the exit, and fails unless it succeeded. */
    private static void run(String... args) {
        var cl = GpumemCli.commandLine(args);
        PrintWriter discard = new PrintWriter(OutputStream.nullOutputStream(), false, StandardCharsets.UTF_8);
        cl.setOut(discard);
        cl.setErr(discard);
        int exit = cl.execute(args);
        if (exit != 0) {
            throw new IllegalStateException("gpumem " + String.join(" ", args) + " exited with " + exit);
        }
    }

    private static void deleteTree(Path dir) throws IOException {
        if (!Files.exists(dir)) {
            return;
        }
        try (Stream<Path> paths = Files.walk(dir)) {
            paths.sorted(Comparator.reverseOrder()).forEach(p -> {
                try {
                    Files.delete(p);
                } catch (IOException e) {
                    throw new UncheckedIOException(e);
                }
            });
        }
    }
}
