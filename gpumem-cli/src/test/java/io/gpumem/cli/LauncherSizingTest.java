package io.gpumem.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpumem.engine.AllocatorWarmUp;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The launcher's JVM sizing ({@code scripts/jvm-sizing.sh}, sourced by {@code ./gpumem}): a command given a file
 * of 64 MiB or more runs with C2 (the exact allocator's malloc and free kept out of the replay loop) and a heap
 * bounded by the files' size, whatever the form it is named in; any other command stays on C1 with the JVM's
 * default heap. Run through bash on sparse files, so that no test writes 64 MiB.
 */
class LauncherSizingTest {

    /** The JIT options of a large input, as the script prints them. */
    private static final String LARGE_JIT = "jit:-XX:CompileCommand=quiet"
            + " -XX:CompileCommand=dontinline,io.gpumem.alloc.CachingAllocator::malloc"
            + " -XX:CompileCommand=dontinline,io.gpumem.alloc.CachingAllocator::free";

    private static final Path SCRIPT =
            Path.of("..", "scripts", "jvm-sizing.sh").toAbsolutePath().normalize();

    @TempDir
    static Path dir;

    private static Path big;
    private static Path small;

    @BeforeAll
    static void files() throws IOException {
        // the launcher's threshold for C2 is the one from which a what-if command warms the allocator up
        big = sparse("big.pickle", AllocatorWarmUp.FROM_INPUT_BYTES);
        small = sparse("small.pickle", AllocatorWarmUp.FROM_INPUT_BYTES - 1);
    }

    private static Path sparse(String name, long bytes) throws IOException {
        Path p = dir.resolve(name);
        try (RandomAccessFile f = new RandomAccessFile(p.toFile(), "rw")) {
            f.setLength(bytes);
        }
        return p;
    }

    /**
     * The options {@code gpumem_size_opts} chooses for {@code args}: the JIT options, the heap options, then whether
     * the input is large (the launcher then starts from its AOT cache).
     */
    private static List<String> options(String... args) throws IOException, InterruptedException {
        assumeTrue(Files.isRegularFile(SCRIPT), "no " + SCRIPT + " (not run from the repository)");
        List<String> cmd = new ArrayList<>(List.of(
                "bash",
                "-c",
                ". \"$0\"; gpumem_size_opts \"$@\"; echo \"jit:${jit_opts[*]-}\"; echo \"heap:${heap_opts[*]-}\";"
                        + " echo \"large:$large_input\"",
                SCRIPT.toString()));
        cmd.addAll(List.of(args));
        Process p;
        try {
            p = new ProcessBuilder(cmd)
                    .directory(dir.toFile())
                    .redirectErrorStream(true)
                    .start();
        } catch (IOException noBash) {
            assumeTrue(false, "bash cannot start: " + noBash.getMessage());
            throw noBash;
        }
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(p.waitFor(30, TimeUnit.SECONDS)).isTrue();
        assertThat(p.exitValue()).as(out).isZero();
        return out.lines().toList();
    }

    @Test
    void aLargeFileGetsC2AndAHeapBoundedByItsSize() throws Exception {
        // 64 MiB: 64 * 8 / 5 + 128 = 230 MiB, raised to the 1 GiB floor
        assertThat(options("analyze", big.toString())).containsExactly(LARGE_JIT, "heap:-Xmx1024m -Xmn128m", "large:1");
        assertThat(options("replay", "--check", "--trace=" + big))
                .containsExactly(LARGE_JIT, "heap:-Xmx1024m -Xmn128m", "large:1");
    }

    @Test
    void theMethodsKeptOutOfTheReplayLoopExist() throws Exception {
        // a rename would silently turn the option into a no-op (CompileCommand=quiet hides the JVM's warning)
        for (String option : LARGE_JIT.substring("jit:".length()).split(" ", -1)) {
            if (option.startsWith("-XX:CompileCommand=dontinline,")) {
                String[] target = option.substring("-XX:CompileCommand=dontinline,".length())
                        .split("::", -1);
                Class<?> type = Class.forName(target[0]);
                assertThat(type.getDeclaredMethods())
                        .as(option)
                        .anyMatch(m -> m.getName().equals(target[1]));
            }
        }
    }

    @Test
    void aSymbolicLinkToALargeFileCountsAsTheFile() throws Exception {
        Path link = dir.resolve("link.pickle");
        try {
            Files.deleteIfExists(link);
            Files.createSymbolicLink(link, big);
        } catch (UnsupportedOperationException | IOException e) {
            assumeTrue(false, "no symbolic links here: " + e.getMessage());
        }
        // before the fix, find without -L saw a link, not a regular file, and the 1 GB snapshot ran on C1 with
        // the default heap (analyze: 55.6 s and 3,781 MiB of RSS, against 30.3 s and 1,776 MiB unlinked)
        assertThat(options("analyze", link.toString()))
                .containsExactly(LARGE_JIT, "heap:-Xmx1024m -Xmn128m", "large:1");
        assertThat(options("analyze", "link.pickle")).containsExactly(LARGE_JIT, "heap:-Xmx1024m -Xmn128m", "large:1");
    }

    @Test
    void smallFilesAndNoFilesStayOnC1WithTheDefaultHeap() throws Exception {
        assertThat(options("--help")).containsExactly("jit:-XX:TieredStopAtLevel=1", "heap:", "large:0");
        assertThat(options("analyze", small.toString()))
                .containsExactly("jit:-XX:TieredStopAtLevel=1", "heap:", "large:0");
        assertThat(options("analyze", dir.resolve("missing.pickle").toString()))
                .containsExactly("jit:-XX:TieredStopAtLevel=1", "heap:", "large:0");
        // a warm benchmark keeps the full tiers without a large file
        assertThat(options("plan", "--repeat", "3", small.toString())).containsExactly("jit:", "heap:", "large:0");
    }
}
