package io.gpumem.cli.examples;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.cli.CliRun;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Every {@code ./gpumem ...} command the documentation shows (a line of a fenced block, or an inline code span, in
 * the READMEs, {@code examples/} and {@code docs/}) runs as shown: exit 0, something on standard output, no internal
 * error. An option renamed, a default tightened or an example file moved fails here, naming the page and the
 * command, instead of in a user's first minute.
 *
 * <p>What cannot run here is left out, and counted: a command with a placeholder ({@code FILE}, {@code [...]},
 * {@code A.pickle}: any argument that looks like a file and is not one under the repository root, so the commands on
 * {@code ../shared/traces} run where the traces are), and {@code --device cuda} (a GPU's; gpumem-cuda tests it on
 * its fake driver). Files under {@code /tmp} are written to a temporary folder instead, and a {@code demo} that
 * names no snapshot is given one there, so nothing is written into the working tree.
 */
class DocumentedCommandsTest {
    private static final Path ROOT = Path.of("..");
    /** A fenced block's line, or an inline span, that starts a command; group 1 is the arguments. */
    private static final Pattern FENCED = Pattern.compile("^\\s*\\./gpumem( [^#\\n]*)?(?:#.*)?$", Pattern.MULTILINE);

    private static final Pattern INLINE = Pattern.compile("`\\./gpumem( [^`]*)?`");
    /**
     * An argument that names a file: a path, or a name with a dot that is neither a number nor a configuration
     * ({@code lm2.7b}, the prose's short name of a shared trace, is one).
     */
    private static final Pattern FILE_ARG = Pattern.compile(".*/.*|(?![0-9.]+$)[^:=]*\\.[^:=]*");

    @TempDir
    Path tmp;

    @Test
    void everyDocumentedCommandRunsAsShown() throws IOException {
        Map<String, String> commands = documentedCommands(); // command -> the first page that shows it
        assertThat(commands).as("commands found in the documentation").hasSizeGreaterThan(15);
        List<String> ran = new ArrayList<>();
        List<String> skipped = new ArrayList<>();
        for (Map.Entry<String, String> c : commands.entrySet()) {
            List<String> args = runnable(c.getKey());
            if (args == null) {
                skipped.add(c.getKey());
                continue;
            }
            CliRun r = CliRun.run(args.toArray(String[]::new));
            String where = c.getValue() + ": ./gpumem" + c.getKey() + " (run as " + args + ")";
            assertThat(r.exit()).as(where + "\n" + r.err()).isZero();
            assertThat(r.out()).as(where).isNotBlank();
            assertThat(r.err()).as(where).doesNotContain("internal error");
            ran.add(c.getKey());
        }
        System.out.println("[documented commands] ran " + ran.size() + ", left out " + skipped.size()
                + " (placeholders, files not here, --device cuda): " + skipped);
        assertThat(ran)
                .as("the README's table and gpumem-cli/README.md examples run on a fresh clone")
                .contains(
                        " sim examples/example.ops",
                        " replay --check examples/demo-small.pickle",
                        " plan examples/demo-small.pickle",
                        " kv-sim --requests 200 --blocks 1024");
    }

    /** Each distinct command shown in the documentation (its text after {@code ./gpumem}), with its first page. */
    private static Map<String, String> documentedCommands() throws IOException {
        List<Path> pages = new ArrayList<>();
        try (Stream<Path> top = Files.list(ROOT)) {
            top.filter(p -> p.getFileName().toString().endsWith(".md")).sorted().forEach(pages::add);
        }
        for (String dir : List.of("docs", "examples")) {
            try (Stream<Path> files = Files.list(ROOT.resolve(dir))) {
                files.filter(p -> p.getFileName().toString().endsWith(".md"))
                        .sorted()
                        .forEach(pages::add);
            }
        }
        try (Stream<Path> modules = Files.list(ROOT)) {
            for (Path m : modules.filter(p -> p.getFileName().toString().startsWith("gpumem-") && Files.isDirectory(p))
                    .sorted()
                    .toList()) {
                try (Stream<Path> files = Files.list(m)) {
                    files.filter(p -> p.getFileName().toString().endsWith(".md"))
                            .sorted()
                            .forEach(pages::add);
                }
            }
        }
        Map<String, String> commands = new LinkedHashMap<>();
        for (Path page : pages) {
            String text = Files.readString(page, StandardCharsets.UTF_8);
            String name = ROOT.relativize(page).toString();
            boolean inFence = false;
            for (String line : text.split("\n", -1)) {
                if (line.strip().startsWith("```")) {
                    inFence = !inFence;
                    continue;
                }
                Matcher m = (inFence ? FENCED : INLINE).matcher(line);
                while (m.find()) {
                    String args = m.group(1) == null ? "" : m.group(1).stripTrailing();
                    commands.putIfAbsent(args, name);
                    if (inFence) {
                        break;
                    }
                }
            }
        }
        return commands;
    }

    /** The command's arguments as this test runs them, or null when it cannot run here (see the class comment). */
    private List<String> runnable(String command) throws IOException {
        List<String> args = new ArrayList<>();
        boolean demo = false;
        boolean snapshotNamed = false;
        for (String word : command.strip().split("\\s+", -1)) {
            if (word.isEmpty()) {
                continue;
            }
            if (word.contains("[") || word.equals("FILE") || word.equals("TRACE") || word.equals("N")) {
                return null;
            }
            if (word.equals("cuda")) {
                return null;
            }
            demo |= args.isEmpty() && word.equals("demo");
            snapshotNamed |= word.equals("--snapshot");
            if (word.startsWith("/tmp/")) {
                Path inTmp = tmp.resolve(word.substring("/tmp/".length()));
                Files.createDirectories(inTmp.getParent());
                args.add(inTmp.toString());
            } else if (!word.startsWith("-") && FILE_ARG.matcher(word).matches()) {
                Path file = ROOT.resolve(word);
                if (!Files.exists(file)) {
                    return null;
                }
                args.add(file.toString());
            } else {
                args.add(word);
            }
        }
        if (demo && !snapshotNamed) {
            args.add("--snapshot");
            args.add(tmp.resolve("demo-" + args.size() + ".pickle").toString());
        }
        return args;
    }
}
