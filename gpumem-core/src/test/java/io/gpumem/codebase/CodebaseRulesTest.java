package io.gpumem.codebase;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * Three rules of this codebase, checked over the main sources of every module so that they hold after the next
 * change too, not only on the day they were cleaned up:
 *
 * <ul>
 *   <li><b>One model per concept</b>: no two main-code types (top-level or nested) share a simple name. Two types
 *       called {@code SegmentInfo} were how four segment models crept in. The nested {@code Builder} idiom is the
 *       one exception: it is always written qualified by its outer type.</li>
 *   <li><b>Imports, not inline qualified names</b>: code (comments and string literals aside) names a type by its
 *       simple name and imports it. A fully qualified name in code is allowed only where an import cannot do, that
 *       is where the file also names another type of the same simple name.</li>
 *   <li><b>Every non-trivial class opens with a comment</b> saying what it is for: a main source of
 *       {@value #NON_TRIVIAL_LINES} lines or more has a Javadoc comment before its top-level type (its annotations
 *       may come between).</li>
 * </ul>
 *
 * <p>The scan strips comments and literals with a small lexer (enough for Java's comment, string, text block and
 * char syntax), so Javadoc {@code {@link io.gpumem.x.Y}} references are not counted.
 */
class CodebaseRulesTest {

    private static final Pattern TYPE_DECLARATION =
            Pattern.compile("(?<![.\\w])(?:class|interface|record|enum)\\s+([A-Z]\\w*)");
    private static final Pattern QUALIFIED_TYPE = Pattern.compile(
            "(?<![.\\w])((?:java|javax|jdk|io|org|com|net|picocli)(?:\\.[a-z_][a-z0-9_]*)+)\\.([A-Z]\\w*)");

    /** From this many lines a source counts as non-trivial and its top-level type must open with a comment. */
    static final int NON_TRIVIAL_LINES = 40;

    private static final Pattern TOP_LEVEL_TYPE = Pattern.compile(
            "^(?:public |final |abstract |sealed |non-sealed )*(?:class|interface|record|enum|@interface) ",
            Pattern.MULTILINE);

    @Test
    void everyNonTrivialMainTypeOpensWithAComment() throws IOException {
        Path root = repositoryRoot();
        List<String> undocumented = new ArrayList<>();
        int checked = 0;
        for (Path file : mainSources(root)) {
            String source = Files.readString(file);
            if (file.getFileName().toString().equals("package-info.java")
                    || source.lines().count() < NON_TRIVIAL_LINES) {
                continue;
            }
            checked++;
            Matcher type = TOP_LEVEL_TYPE.matcher(source);
            // the comment sits between the last import (or the package line) and the declaration
            int header = Math.max(source.lastIndexOf("\nimport "), source.indexOf("package "));
            if (!type.find()
                    || header < 0
                    || !source.substring(header, type.start()).contains("/**")) {
                undocumented.add(root.relativize(file).toString());
            }
        }
        assertThat(checked).as("non-trivial main sources checked").isGreaterThan(100);
        assertThat(undocumented)
                .as("main sources of %d+ lines whose top-level type has no opening comment", NON_TRIVIAL_LINES)
                .isEmpty();
    }

    @Test
    void noTwoMainTypesShareASimpleName() throws IOException {
        Path root = repositoryRoot();
        Map<String, List<String>> declared = new TreeMap<>();
        List<Path> sources = mainSources(root);
        for (Path file : sources) {
            Matcher m = TYPE_DECLARATION.matcher(codeOnly(Files.readString(file)));
            while (m.find()) {
                declared.computeIfAbsent(m.group(1), k -> new ArrayList<>())
                        .add(root.relativize(file).toString());
            }
        }
        List<String> shared = new ArrayList<>();
        declared.forEach((name, files) -> {
            if (files.size() > 1 && !name.equals("Builder")) {
                shared.add(name + " in " + files);
            }
        });
        System.out.println(
                "CodebaseRulesTest: " + declared.size() + " type names in " + sources.size() + " main sources");
        assertThat(sources)
                .as("main sources found (the scan must see the modules)")
                .hasSizeGreaterThan(100);
        assertThat(shared)
                .as("simple names declared by more than one main-code type")
                .isEmpty();
    }

    @Test
    void mainCodeImportsTypesInsteadOfQualifyingThemInline() throws IOException {
        Path root = repositoryRoot();
        List<String> inline = new ArrayList<>();
        for (Path file : mainSources(root)) {
            String code = codeOnly(Files.readString(file));
            Map<String, String> simpleToQualified = new TreeMap<>();
            List<String> body = new ArrayList<>();
            String[] lines = code.split("\n", -1);
            for (String line : lines) {
                String t = line.strip();
                if (t.startsWith("import ") || t.startsWith("package ")) {
                    Matcher imp = QUALIFIED_TYPE.matcher(t);
                    if (imp.find()) {
                        simpleToQualified.put(imp.group(2), imp.group(1) + "." + imp.group(2));
                    }
                    body.add("");
                } else {
                    body.add(line);
                }
            }
            for (int i = 0; i < body.size(); i++) {
                Matcher m = QUALIFIED_TYPE.matcher(body.get(i));
                while (m.find()) {
                    String simple = m.group(2);
                    String qualified = m.group(1) + "." + simple;
                    String imported = simpleToQualified.get(simple);
                    boolean clash = (imported != null && !imported.equals(qualified)) || declaresType(code, simple);
                    if (!clash) {
                        inline.add(root.relativize(file) + ":" + (i + 1) + ": " + qualified);
                    }
                }
            }
        }
        assertThat(inline)
                .as("inline fully qualified type names where an import would do")
                .isEmpty();
    }

    private static boolean declaresType(String code, String simpleName) {
        return Pattern.compile("(?<![.\\w])(?:class|interface|record|enum)\\s+" + simpleName + "\\b")
                .matcher(code)
                .find();
    }

    private static Path repositoryRoot() {
        return Path.of("").toAbsolutePath().getParent();
    }

    private static List<Path> mainSources(Path root) throws IOException {
        List<Path> files = new ArrayList<>();
        try (Stream<Path> modules = Files.list(root)) {
            for (Path module : modules.filter(p -> p.getFileName().toString().startsWith("gpumem-"))
                    .sorted()
                    .toList()) {
                Path main = module.resolve("src/main/java");
                if (Files.isDirectory(main)) {
                    try (Stream<Path> walk = Files.walk(main)) {
                        walk.filter(p -> p.toString().endsWith(".java"))
                                .sorted()
                                .forEach(files::add);
                    }
                }
            }
        }
        return files;
    }

    /**
     * The source with comments, string and text-block literals and char literals blanked out (each replaced by
     * spaces, newlines kept), so line numbers still match and nothing inside them is mistaken for code.
     */
    static String codeOnly(String source) {
        StringBuilder out = new StringBuilder(source.length());
        int n = source.length();
        int i = 0;
        while (i < n) {
            char c = source.charAt(i);
            if (c == '/' && i + 1 < n && source.charAt(i + 1) == '/') {
                while (i < n && source.charAt(i) != '\n') {
                    out.append(' ');
                    i++;
                }
            } else if (c == '/' && i + 1 < n && source.charAt(i + 1) == '*') {
                int end = source.indexOf("*/", i + 2);
                end = end < 0 ? n : end + 2;
                blank(source, i, end, out);
                i = end;
            } else if (c == '"' && source.startsWith("\"\"\"", i)) {
                int end = source.indexOf("\"\"\"", i + 3);
                while (end > 0 && source.charAt(end - 1) == '\\') {
                    end = source.indexOf("\"\"\"", end + 1);
                }
                end = end < 0 ? n : end + 3;
                blank(source, i, end, out);
                i = end;
            } else if (c == '"' || c == '\'') {
                int j = i + 1;
                while (j < n && source.charAt(j) != c && source.charAt(j) != '\n') {
                    j += source.charAt(j) == '\\' ? 2 : 1;
                }
                int end = Math.min(n, j + 1);
                blank(source, i, end, out);
                i = end;
            } else {
                out.append(c);
                i++;
            }
        }
        return out.toString();
    }

    private static void blank(String source, int from, int to, StringBuilder out) {
        for (int k = from; k < to; k++) {
            out.append(source.charAt(k) == '\n' ? '\n' : ' ');
        }
    }

    @Test
    void theLexerBlanksCommentsAndLiteralsButKeepsCode() {
        String src = "class A { // class B\n String s = \"class C\"; /* io.x.Y */ char q = '\"'; io.gpumem.Z z; }";
        String code = codeOnly(src);
        assertThat(code)
                .contains("class A")
                .doesNotContain("class B")
                .doesNotContain("class C")
                .doesNotContain("io.x.Y")
                .contains("io.gpumem.Z");
        assertThat(code.length()).isEqualTo(src.length());
        assertThat(code.split("\n", -1)).hasSize(2);
    }
}
