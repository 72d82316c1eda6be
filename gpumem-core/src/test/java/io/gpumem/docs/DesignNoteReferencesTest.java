package io.gpumem.docs;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
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
                    String noteName = null; // the last note named before the reference
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
        assertThat(references)
                .as("references found (the scan must see the sources)")
                .isPositive();
    }

    /**
     * The classes whose algorithms a note describes cite it (so that a reader of the code finds the note, and the
     * test above checks where the citation points), and every note is listed in docs/README.md.
     */
    @Test
    void theClassesANoteDescribesCiteItAndTheIndexListsIt() throws IOException {
        Path root = Path.of("").toAbsolutePath().getParent();
        Path main = root.resolve("gpumem-core/src/main/java/io/gpumem");
        Map<String, String> citing = new LinkedHashMap<>();
        citing.put("alloc/AllocatorCore.java", "allocator.md");
        citing.put("alloc/ExpandableSegment.java", "allocator.md");
        citing.put("policy/StitchAllocator.java", "policies.md");
        citing.put("policy/StitchInvariants.java", "policies.md");
        citing.put("policy/PlannedAllocator.java", "policies.md");
        citing.put("policy/RmmPoolAllocator.java", "policies.md");
        citing.put("plan/OffsetPlanner.java", "offset-planner.md");
        citing.put("plan/CanonicalSearch.java", "offset-planner.md");
        citing.put("plan/TimeAxis.java", "offset-planner.md");
        citing.put("plan/LifetimeProblem.java", "offset-planner.md");
        List<String> problems = new ArrayList<>();
        for (Map.Entry<String, String> e : citing.entrySet()) {
            Path file = main.resolve(e.getKey());
            Pattern cite = Pattern.compile(Pattern.quote(e.getValue()) + " §\\d");
            if (!Files.isRegularFile(file)) {
                problems.add(e.getKey() + " is gone: update this list");
            } else if (!cite.matcher(Files.readString(file)).find()) {
                problems.add(e.getKey() + " does not cite " + e.getValue() + " §N");
            }
        }
        String index = Files.readString(root.resolve("docs/README.md"));
        for (String note : new LinkedHashSet<>(citing.values())) {
            if (!index.contains("](" + note + ")")) {
                problems.add("docs/README.md does not link " + note);
            }
        }
        assertThat(problems).as("design notes and the classes they describe").isEmpty();
    }

    private static List<Path> javaSources(Path root) throws IOException {
        try (Stream<Path> files = Files.walk(root)) {
            return files.filter(p -> p.toString().endsWith(".java"))
                    .filter(p -> !root.relativize(p).toString().contains("target/"))
                    .filter(p -> !root.relativize(p).startsWith(".git"))
                    .sorted()
                    .toList();
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
