package io.gpumem.cli.golden;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Turns what a command printed (or the HTML page it wrote) into the readable text {@link GoldenOutputTest} pins:
 * every figure, label, verdict and recommendation kept; what is not a figure of the trace replaced by a
 * placeholder (measured timings such as ns per pair and solve milliseconds, the size and write time of a written
 * page, absolute paths of the trace folder, the temporary folder and the JDK).
 *
 * <p>Invariant: the same command output always gives the same text, whatever machine, load, folder or JDK ran it.
 */
final class GoldenText {

    private static final Pattern JSON_TIMING =
            Pattern.compile("\"(ns_per_pair|solve_ms|fastest_ms|median_ms)\":-?[0-9.Ee+-]+");
    private static final Pattern PLAN_TIMING = Pattern.compile("(solve|fastest|median of \\d+, fastest) [0-9.]+ ms");
    /** A written page's size and write time: "(342.91 KiB, 2.0 s)" or "(223.20 KiB; open". */
    private static final Pattern WRITTEN_SIZE = Pattern.compile("\\([0-9.]+ (bytes|KiB|MiB|GiB|TiB)([,;])");

    private static final Pattern WRITE_SECONDS = Pattern.compile(", [0-9.]+ s\\)");
    private static final Pattern DATA_BLOCK = Pattern.compile(
            "<script type=\"application/json\" class=\"report-data\"([^>]*)>(.*?)</script>", Pattern.DOTALL);
    /** Arrays whose canonical text is longer than this are summarised (count, sum, min, max, digest). */
    private static final int INLINE_ARRAY_CHARS = 200;

    private final List<Map.Entry<String, String>> replacements = new ArrayList<>();

    /** A normaliser replacing each of {@code folders} (path to placeholder) in all its spellings. */
    GoldenText(Map<Path, String> folders) {
        Map<String, String> spellings = new TreeMap<>(
                (a, b) -> a.length() != b.length() ? Integer.compare(b.length(), a.length()) : a.compareTo(b));
        folders.forEach((path, placeholder) -> {
            spellings.put(path.toString(), placeholder);
            spellings.put(path.toAbsolutePath().normalize().toString(), placeholder);
            try {
                spellings.put(path.toRealPath().toString(), placeholder);
            } catch (IOException absent) {
                // a folder that does not exist has no real path to replace
            }
        });
        spellings.put(System.getProperty("java.home"), "<jdk>");
        replacements.addAll(spellings.entrySet());
    }

    /** Command output (standard output or error) with timings and paths replaced. */
    String output(String text) {
        String s = paths(text.replace("\r\n", "\n"));
        s = JSON_TIMING.matcher(s).replaceAll("\"$1\":\"<timing>\"");
        s = PLAN_TIMING.matcher(s).replaceAll("$1 <ms> ms");
        StringBuilder out = new StringBuilder();
        boolean nsColumn = false;
        for (String line : s.split("\n", -1)) {
            if (line.contains("written to")) {
                line = WRITTEN_SIZE.matcher(line).replaceAll("(<size>$2");
                line = WRITE_SECONDS.matcher(line).replaceAll(", <seconds>)");
            }
            // compare's table: the last column (ns/pair, right-aligned) is a measured timing
            if (line.endsWith(" ns/pair")) {
                nsColumn = true;
                line = line.replaceFirst("\\s+ns/pair$", "  ns/pair");
            } else if (nsColumn && !line.isBlank()) {
                line = line.replaceFirst("\\s+[0-9.]+$", "  <ns>");
            } else {
                nsColumn = false;
            }
            out.append(line).append('\n');
        }
        out.setLength(out.length() - 1);
        return out.toString();
    }

    private String paths(String s) {
        for (Map.Entry<String, String> r : replacements) {
            s = s.replace(r.getKey(), r.getValue());
        }
        return s;
    }

    /**
     * The figures an HTML report page shows and embeds: its visible text (scripts and styles dropped, one line per
     * block element, table cells separated by " | "), then each embedded report-data JSON block flattened into
     * {@code path = value} lines, long arrays summarised.
     */
    String page(String html) {
        StringBuilder out = new StringBuilder("-- page text\n");
        String body = html.replaceAll("(?s)<script.*?</script>|<style.*?</style>|<svg.*?</svg>", "\n");
        body = body.replaceAll("(?i)</t[dh]>", " | ");
        body = body.replaceAll(
                "(?i)</?(tr|p|div|h[1-6]|li|ul|ol|section|table|thead|tbody|caption|br|header|footer"
                        + "|title|option|select|label|dt|dd|dl)\\b[^>]*>",
                "\n");
        body = body.replaceAll("<[^>]+>", "");
        body = body.replace("&mdash;", "—")
                .replace("&#39;", "'")
                .replace("&quot;", "\"")
                .replace("&gt;", ">")
                .replace("&lt;", "<")
                .replace("&nbsp;", " ")
                .replace("&amp;", "&");
        // paths after the tags are gone: a placeholder such as <traces> would read as a tag
        for (String line : paths(body).split("\n", -1)) { // empty lines are skipped below
            String t = line.strip().replaceAll("\\s+", " ");
            if (t.endsWith(" |")) {
                t = t.substring(0, t.length() - 2);
            }
            if (!t.isEmpty()) {
                out.append(t).append('\n');
            }
        }
        Matcher m = DATA_BLOCK.matcher(paths(html));
        while (m.find()) {
            out.append("-- report-data").append(m.group(1)).append('\n');
            try {
                flatten(parse(m.group(2)), "", out);
            } catch (IOException e) {
                out.append("unreadable JSON: ").append(e.getMessage()).append('\n');
            }
        }
        return out.toString();
    }

    private static Object parse(String json) throws IOException {
        try (JsonParser p = new JsonFactory().createParser(json)) {
            p.nextToken();
            return value(p);
        }
    }

    private static Object value(JsonParser p) throws IOException {
        JsonToken t = p.currentToken();
        return switch (t) {
            case START_OBJECT -> {
                Map<String, Object> m = new LinkedHashMap<>();
                while (p.nextToken() != JsonToken.END_OBJECT) {
                    String key = p.currentName();
                    p.nextToken();
                    m.put(key, value(p));
                }
                yield m;
            }
            case START_ARRAY -> {
                List<Object> l = new ArrayList<>();
                while (p.nextToken() != JsonToken.END_ARRAY) {
                    l.add(value(p));
                }
                yield l;
            }
            case VALUE_STRING -> "\"" + p.getText() + "\"";
            default -> p.getText();
        };
    }

    /** Objects by key; arrays of objects element by element; other arrays inline when short, else summarised. */
    private static void flatten(Object v, String path, StringBuilder out) {
        if (v instanceof Map<?, ?> m) {
            m.forEach((k, child) -> flatten(child, path.isEmpty() ? k.toString() : path + "." + k, out));
        } else if (v instanceof List<?> l && !l.isEmpty() && l.stream().allMatch(e -> e instanceof Map)) {
            for (int i = 0; i < l.size(); i++) {
                flatten(l.get(i), path + "[" + i + "]", out);
            }
        } else if (v instanceof List<?> l) {
            String text = canonical(l);
            if (text.length() <= INLINE_ARRAY_CHARS) {
                out.append(path).append(" = ").append(text).append('\n');
                return;
            }
            out.append(path).append(": ").append(l.size()).append(" items");
            if (l.stream().allMatch(e -> e instanceof String s && s.matches("-?[0-9]+"))) {
                long sum = 0;
                long min = Long.MAX_VALUE;
                long max = Long.MIN_VALUE;
                for (Object e : l) {
                    long x = Long.parseLong((String) e);
                    sum += x;
                    min = Math.min(min, x);
                    max = Math.max(max, x);
                }
                out.append(", sum ")
                        .append(sum)
                        .append(", min ")
                        .append(min)
                        .append(", max ")
                        .append(max);
            }
            out.append(", first ")
                    .append(abbreviate(canonical(l.getFirst())))
                    .append(", last ")
                    .append(abbreviate(canonical(l.getLast())))
                    .append(", sha256 ")
                    .append(digest(text))
                    .append('\n');
        } else {
            out.append(path).append(" = ").append(v).append('\n');
        }
    }

    private static String abbreviate(String s) {
        return s.length() <= 80 ? s : s.substring(0, 77) + "...";
    }

    /** JSON text of a parsed value, object keys sorted, so that key order alone never changes a digest. */
    private static String canonical(Object v) {
        if (v instanceof Map<?, ?> m) {
            StringBuilder sb = new StringBuilder("{");
            new TreeMap<>(m).forEach((k, child) -> {
                if (sb.length() > 1) {
                    sb.append(',');
                }
                sb.append('"').append(k).append("\":").append(canonical(child));
            });
            return sb.append('}').toString();
        }
        if (v instanceof List<?> l) {
            StringBuilder sb = new StringBuilder("[");
            for (Object e : l) {
                if (sb.length() > 1) {
                    sb.append(',');
                }
                sb.append(canonical(e));
            }
            return sb.append(']').toString();
        }
        return String.valueOf(v);
    }

    private static String digest(String s) {
        try {
            byte[] d = MessageDigest.getInstance("SHA-256").digest(s.getBytes(StandardCharsets.UTF_8));
            return HexFormat.of().formatHex(d, 0, 8);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }
}
