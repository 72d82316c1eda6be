package io.gpumem.report;

import java.io.IOException;
import java.nio.file.Path;

/**
 * A self-contained offline page gpumem writes: the report of a trace ({@link HtmlReport}) or the aligned comparison
 * of two recordings ({@link DiffReport}). Every page has the same skeleton (no request can leave it, the body is
 * marked {@code data-render="ok"} once its script ran) and is written atomically.
 */
public sealed interface HtmlPage permits HtmlReport, DiffReport {

    /** The page's HTML; deterministic for the same input. */
    String render();

    /** Writes the page to {@code file} through a temporary sibling, so a failure leaves no half-written page. */
    default void write(Path file) throws IOException {
        Html.write(file, render());
    }
}
