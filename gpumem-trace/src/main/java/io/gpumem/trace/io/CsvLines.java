package io.gpumem.trace.io;

import io.gpumem.script.ScriptException;
import io.gpumem.script.Utf8Lines;
import java.io.BufferedInputStream;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * Reads a small CSV file (no quoting: the trace formats have none) into rows of fields, enforcing the size
 * limits and reporting errors by line number. Shared by the RMM and lifetime readers.
 */
final class CsvLines {

    private CsvLines() {}

    /** One data row: its 1-based line number and its trimmed fields (a class: a record would compare the array by identity). */
    static final class Row {
        private final int line;
        private final String[] fields;

        Row(int line, String[] fields) {
            this.line = line;
            this.fields = fields;
        }

        int line() {
            return line;
        }

        String[] fields() {
            return fields;
        }
    }

    /**
     * Reads the file; the first non-empty line must be a header whose fields equal one of {@code headers}
     * (case-insensitive, spaces ignored), and every row has as many fields as that header. Blank lines and lines
     * starting with '#' are skipped.
     */
    static List<Row> read(Path file, ReadLimits limits, String[]... headers) {
        String name = file.toString();
        limits.checkedFileSize(file);
        List<Row> rows = new ArrayList<>();
        var decoder = StandardCharsets.UTF_8
                .newDecoder()
                .onMalformedInput(CodingErrorAction.REPORT)
                .onUnmappableCharacter(CodingErrorAction.REPORT);
        try (BufferedReader r = new BufferedReader(new InputStreamReader(Files.newInputStream(file), decoder))) {
            String text;
            int line = 0;
            String[] header = null;
            while ((text = r.readLine()) != null) {
                line++;
                if (line == 1 && text.startsWith("\uFEFF")) {
                    text = text.substring(1); // a UTF-8 byte-order mark
                }
                String t = text.strip();
                if (t.isEmpty() || t.startsWith("#")) {
                    continue;
                }
                String[] fields = t.split(",", -1);
                for (int i = 0; i < fields.length; i++) {
                    fields[i] = fields[i].strip();
                }
                if (header == null) {
                    for (String[] h : headers) {
                        if (headerMatches(fields, h)) {
                            header = h;
                        }
                    }
                    if (header == null) {
                        throw new TraceFormatException(
                                name,
                                "line " + line,
                                "expected the header " + names(headers) + ", got " + abbreviate(t));
                    }
                    continue;
                }
                if (fields.length != header.length) {
                    throw new TraceFormatException(
                            name,
                            "line " + line,
                            "expected " + header.length + " fields (" + String.join(",", header) + "), got "
                                    + fields.length);
                }
                if (rows.size() >= limits.maxEntries()) {
                    throw new TraceFormatException(
                            name, "line " + line, "more than " + limits.maxEntries() + " rows (limit)");
                }
                rows.add(new Row(line, fields));
            }
            if (header == null) {
                throw new TraceFormatException(name, "", "empty file (expected the header " + names(headers) + ")");
            }
        } catch (CharacterCodingException e) {
            throw badUtf8(file, e);
        } catch (IOException e) {
            throw new TraceFormatException(name, "", "cannot read: " + e.getMessage(), e);
        }
        return rows;
    }

    /**
     * What is wrong with a file the bulk decoder refused: the line and column of its first byte that is not UTF-8
     * (found by reading it again, line by line: the decoder does not count lines, and this is the error path only).
     */
    private static TraceFormatException badUtf8(Path file, CharacterCodingException refusal) {
        ScriptException where = null;
        try (InputStream in = new BufferedInputStream(Files.newInputStream(file), 1 << 16)) {
            where = Utf8Lines.firstBadByte(in);
        } catch (IOException e) {
            refusal.addSuppressed(e);
        }
        return where != null
                ? new TraceFormatException(file.toString(), "line " + where.line(), where.detail(), refusal)
                : new TraceFormatException(file.toString(), "", "not a text file (invalid UTF-8)", refusal);
    }

    /** The headers as a message names them: {@code a,b} or {@code a,b or a,b,c}. */
    private static String names(String[][] headers) {
        StringBuilder sb = new StringBuilder();
        for (String[] h : headers) {
            sb.append(sb.isEmpty() ? "" : " or ").append(String.join(",", h));
        }
        return sb.toString();
    }

    static boolean headerMatches(String[] fields, String[] header) {
        if (fields.length != header.length) {
            return false;
        }
        for (int i = 0; i < header.length; i++) {
            if (!fields[i].replace(" ", "").equalsIgnoreCase(header[i])) {
                return false;
            }
        }
        return true;
    }

    static long parseLong(String file, Row row, int column, String field, boolean hexAllowed) {
        String s = row.fields()[column];
        try {
            if (hexAllowed && (s.startsWith("0x") || s.startsWith("0X"))) {
                return Long.parseUnsignedLong(s.substring(2), 16);
            }
            return Long.parseLong(s);
        } catch (NumberFormatException e) {
            // digits that Long cannot hold are an integer all the same: say that it is too large, not that it is none
            boolean digits = s.matches("[+-]?[0-9]+") || (hexAllowed && s.matches("0[xX][0-9a-fA-F]+"));
            throw new TraceFormatException(
                    file,
                    "line " + row.line() + ", field " + field,
                    digits
                            ? "integer " + abbreviate(s) + " does not fit in 64 bits"
                            : "expected " + (hexAllowed ? "a decimal or 0x-hex integer" : "an integer") + ", got '"
                                    + abbreviate(s) + "'");
        }
    }

    static String abbreviate(String s) {
        return s.length() > 60 ? s.substring(0, 57) + "..." : s;
    }
}
