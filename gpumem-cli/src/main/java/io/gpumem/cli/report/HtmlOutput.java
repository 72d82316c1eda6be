package io.gpumem.cli.report;

import io.gpumem.report.HtmlPage;
import io.gpumem.size.ByteSize;
import io.gpumem.trace.io.OutputFiles;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.UncheckedIOException;
import java.nio.file.Path;

/** Writes an {@link HtmlPage} for the commands that offer {@code --html} and says where it went; names pages by default. */
public final class HtmlOutput {
    private HtmlOutput() {}

    /** Writes the page and prints one line naming it; a write failure becomes an error naming the file. */
    public static void write(HtmlPage page, Path file, PrintWriter out) {
        try {
            page.write(file);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write the HTML report to " + file + ": " + OutputFiles.reason(e), e);
        }
        out.println();
        out.println("HTML report written to " + file.toAbsolutePath() + " ("
                + ByteSize.formatSigned(file.toFile().length()) + "; open it in a browser, it works offline)");
    }

    /** {@code trace.pickle} -> {@code trace.html} in the current directory (traces often live in read-only folders). */
    public static Path defaultName(Path file) {
        String name = file.getFileName().toString();
        int dot = name.lastIndexOf('.');
        return Path.of((dot > 0 ? name.substring(0, dot) : name) + ".html");
    }

    /** {@code dir/run.pickle} -> {@code dir/run.html}: a page written beside the snapshot it shows. */
    public static Path sibling(Path snapshot) {
        return snapshot.resolveSibling(defaultName(snapshot));
    }
}
