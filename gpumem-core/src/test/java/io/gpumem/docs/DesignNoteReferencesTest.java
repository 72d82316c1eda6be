package io.gpumem.docs;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;

/**
 * Every section reference in the project's Java sources resolves to a design note in {@code docs/} and a section
 * that note has. Comments cite the notes as {@code allocator.md §N.M} or {@code kv-cache.md §N.M}, the note named
 * earlier on the same line. A section number with no note before it (as in "the spec, section N.M" written with
 * the section sign), or a note that does not exist, is reported with file and line, so a reference cannot point
 * at a document outside the repository again. Section numbers are read from the notes' headings
 * ({@code ## 5. ...}, {@code ### 5.5 ...}).
 */
class DesignNoteReferencesTest {

    private static final Pattern SECTION = Pattern.compile("§(\\d+(?:\\.\\d+)*)");
    private static final Pattern NOTE = Pattern.compile("([\\w-]+\\.md)\\b");
    private static final Pattern HEADING = Pattern.compile("^#+ (\\d+(?:\\.\\d+)*)\\.? ");
    private static final Pattern DOC_PATH = Pattern.compile("docs/([\\w-]+\\.md)");

    @Test
    void everySectionReferenceNamesADesignNoteAndOneOfItsSections() throws IOException {
        Path root = Path.of("").toAbsolutePath().getParent();
        Path docs = root.resolve("docs");
        assertThat(docs.resolve("allocator.md")).as("design notes under docs/").isRegularFile();

        List<String> problems = new ArrayList<>();
        int references = 0;
        for (Path file : javaSources(root)) {
            List<String> lines = Files.readAllLines(file);
            for (int i = 0; i < lines.size(); i++) {
                String line = lines.get(i);
                String where = root.relativize(file) + ":" + (i + 1);
                Matcher docPath = DOC_PATH.matcher(line);
                while (docPath.find()) {
                    if (!Files.isRegularFile(docs.resolve(docPath.group(1)))) {
                        problems.add(where + ": docs/" + docPath.group(1) + " does not exist");
                    }
                }
                Matcher section = SECTION.matcher(line);
                while (section.find()) {
                    references++;
                    String noteName = null;                   // the last note named before the reference
                    Matcher note = NOTE.matcher(line.substring(0, section.start()));
                    while (note.find()) {
                        noteName = note.group(1);
                    }
                    if (noteName == null) {
                        problems.add(where + ": §" + section.group(1) + " names no design note (write e.g. "
                                + "'allocator.md §" + section.group(1) + "')");
                        continue;
                    }
                    Path doc = docs.resolve(noteName);
                    if (!Files.isRegularFile(doc)) {
                        problems.add(where + ": " + noteName + " is not a note under docs/");
                    } else if (!sections(doc).contains(section.group(1))) {
                        problems.add(where + ": " + noteName + " has no section " + section.group(1));
                    }
                }
            }
        }
        System.out.println("design-note references checked: " + references);
        assertThat(problems).as("section references that do not resolve").isEmpty();
        assertThat(references).as("references found (the scan must see the sources)").isPositive();
    }

    private static List<Path> javaSources(Path root) throws IOException {
        try (Stream<Path> files = Files.walk(root)) {
            return files.filter(p -> p.toString().endsWith(".java"))
                    .filter(p -> !root.relativize(p).toString().contains("target/"))
                    .filter(p -> !root.relativize(p).startsWith(".git"))
                    .sorted().toList();
        }
    }

    private static Set<String> sections(Path note) {
        try {
            Set<String> out = new HashSet<>();
            for (String line : Files.readAllLines(note)) {
                Matcher m = HEADING.matcher(line);
                if (m.find()) {
                    out.add(m.group(1));
                }
            }
            return out;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
