package io.gpumem.report;

import io.gpumem.size.ByteSize;
import io.gpumem.trace.io.OutputFiles;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;

/**
 * What every gpumem page shares ({@link HtmlReport}, {@link DiffReport}): the skeleton (Content-Security-Policy that
 * forbids every request, the inline style sheet, the header, the error box, the footer and the inline script that
 * marks the body {@code data-render="ok"}), the atomic write, HTML escaping and the small blocks (cards, numeric
 * cells, horizontal bars) drawn the same way on each page. Pages build their body; this class wraps it, so that
 * every page looks alike and none can fetch anything.
 */
final class Html {
    private Html() {}

    /**
     * Opens a page: head, style, the header with {@code heading} and {@code source}, then {@code headerExtra}
     * (already HTML) before the header closes, and the script-error box. The caller appends its body, then
     * {@link #close}.
     */
    static void open(StringBuilder h, String title, String heading, String source, String headerExtra) {
        h.append("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n");
        h.append("<meta http-equiv=\"Content-Security-Policy\" content=\"")
                .append(HtmlReport.CSP)
                .append("\">\n");
        h.append("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
        h.append("<title>").append(esc(title)).append("</title>\n");
        h.append("<style>\n").append(resource("report.css")).append("</style>\n</head>\n");
        h.append("<body data-render=\"pending\">\n<header><h1>")
                .append(esc(heading))
                .append("</h1><div class=\"source\">")
                .append(esc(source))
                .append("</div>")
                .append(headerExtra);
        h.append("</header>\n<div id=\"script-errors\" hidden></div>\n");
    }

    /** Closes a page opened by {@link #open}: the footer and the page's script. */
    static void close(StringBuilder h) {
        h.append("<footer>Written by gpumem. Works offline: everything is in this file.</footer>\n");
        h.append("<script>\n").append(resource("report.js")).append("</script>\n</body></html>\n");
    }

    /** Writes {@code page} to {@code file} ({@link OutputFiles}: a failure leaves no half-written page). */
    static void write(Path file, String page) throws IOException {
        Path dir = file.toAbsolutePath().getParent();
        if (dir != null) {
            Files.createDirectories(dir);
        }
        byte[] bytes = page.getBytes(StandardCharsets.UTF_8);
        OutputFiles.replace(file, out -> out.write(bytes));
    }

    /** A card of the header row: a small label, a large value, a line below. */
    static void card(StringBuilder h, String label, String value, String sub) {
        h.append("<div class=\"card\"><div class=\"label\">")
                .append(esc(label))
                .append("</div><div class=\"value\">")
                .append(esc(value))
                .append("</div><div class=\"sub\">")
                .append(esc(sub))
                .append("</div></div>\n");
    }

    /** A right-aligned table cell. */
    static void num(StringBuilder h, String v) {
        h.append("<td class=\"num\">").append(esc(v)).append("</td>");
    }

    /**
     * Horizontal bars on one scale, one per value, each with its label on the left and its size on its right end;
     * {@code classes[i]} colours bar i (see {@code .bar.*} in report.css).
     */
    static void bars(StringBuilder h, String ariaLabel, long[] values, String[] labels, String[] classes) {
        long max = 1;
        for (long v : values) {
            max = Math.max(max, v);
        }
        int width = 760;
        int row = 22;
        h.append("<svg class=\"bars\" viewBox=\"0 0 ")
                .append(width + 240)
                .append(' ')
                .append(row * values.length + 4)
                .append("\" width=\"")
                .append(width + 240)
                .append("\" height=\"")
                .append(row * values.length + 4)
                .append("\" role=\"img\" aria-label=\"")
                .append(esc(ariaLabel))
                .append("\">\n");
        for (int i = 0; i < values.length; i++) {
            double w = Math.max(1.0, (double) values[i] / max * (width - 110));
            int y = i * row + 2;
            h.append("<text x=\"0\" y=\"")
                    .append(y + 15)
                    .append("\" class=\"bar-label\">")
                    .append(esc(labels[i]))
                    .append("</text>");
            h.append("<rect x=\"240\" y=\"")
                    .append(y)
                    .append("\" width=\"")
                    .append(String.format(Locale.ROOT, "%.1f", w))
                    .append("\" height=\"")
                    .append(row - 6)
                    .append("\" class=\"bar ")
                    .append(classes[i])
                    .append("\"/>");
            h.append("<text x=\"")
                    .append(String.format(Locale.ROOT, "%.1f", 246 + w))
                    .append("\" y=\"")
                    .append(y + 15)
                    .append("\" class=\"bar-value\">")
                    .append(esc(ByteSize.formatSigned(values[i])))
                    .append("</text>\n");
        }
        h.append("</svg>\n");
    }

    /** The text after the last slash of a path (a page's title names the file, not its folder). */
    static String fileName(String source) {
        int slash = source.lastIndexOf('/');
        return slash >= 0 ? source.substring(slash + 1) : source;
    }

    /** HTML text escape (also for attribute values in double quotes). */
    static String esc(String s) {
        StringBuilder b = new StringBuilder(s.length() + 16);
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '<' -> b.append("&lt;");
                case '>' -> b.append("&gt;");
                case '&' -> b.append("&amp;");
                case '"' -> b.append("&quot;");
                case '\'' -> b.append("&#39;");
                default -> b.append(c);
            }
        }
        return b.toString();
    }

    private static String resource(String name) {
        try (InputStream in = Html.class.getResourceAsStream(name)) {
            if (in == null) {
                throw new IllegalStateException("report resource " + name + " is missing from the jar");
            }
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
