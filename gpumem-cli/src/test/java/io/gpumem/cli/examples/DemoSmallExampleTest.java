package io.gpumem.cli.examples;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.cli.CliRun;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The shipped {@code examples/demo-small.pickle} is what the command in {@code examples/README.md} writes today, byte
 * for byte: the READMEs' examples run on it, so a change to the allocator, the demo or the snapshot writer that
 * would make it stale fails here instead of going unnoticed (it once kept frames two generator changes old).
 * Regenerate it with that command when this fails for a change that is meant.
 */
class DemoSmallExampleTest {
    private static final Path EXAMPLES = Path.of("..", "examples");
    /** The README's command, from {@code ../gpumem demo} to its snapshot option, its lines joined. */
    private static final Pattern COMMAND =
            Pattern.compile("\\.\\./gpumem demo (.*?) --snapshot demo-small\\.pickle", Pattern.DOTALL);

    @TempDir
    Path tmp;

    @Test
    void theShippedDemoSnapshotIsWhatTheReadmesCommandWrites() throws IOException {
        String readme = Files.readString(EXAMPLES.resolve("README.md"), StandardCharsets.UTF_8);
        Matcher m = COMMAND.matcher(readme);
        assertThat(m.find())
                .as("examples/README.md gives the command that writes demo-small.pickle")
                .isTrue();
        List<String> args = new ArrayList<>();
        args.add("demo");
        for (String word : m.group(1).replace("\\\n", " ").trim().split("\\s+", -1)) {
            args.add(word);
        }
        Path written = tmp.resolve("demo-small.pickle");
        args.add("--snapshot");
        args.add(written.toString());
        CliRun r = CliRun.run(args.toArray(String[]::new));
        assertThat(r.exit()).as(r.err()).isZero();
        byte[] shipped = Files.readAllBytes(EXAMPLES.resolve("demo-small.pickle"));
        byte[] regenerated = Files.readAllBytes(written);
        assertThat(regenerated)
                .as(
                        "examples/demo-small.pickle (%d bytes) is stale: %s writes %d bytes",
                        shipped.length, args, regenerated.length)
                .isEqualTo(shipped);
    }
}
