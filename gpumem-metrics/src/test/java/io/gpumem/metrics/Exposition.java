package io.gpumem.metrics;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A strict reader of Prometheus's text exposition format (version 0.0.4) for the tests: every line is a
 * {@code # HELP}, a {@code # TYPE} with a known type, or a sample {@code name{label="value",...} number}; any
 * other line fails. Samples are keyed by name plus labels as written.
 */
public final class Exposition {
    private static final Pattern SAMPLE =
            Pattern.compile("([a-zA-Z_:][a-zA-Z0-9_:]*)(\\{(?:[a-zA-Z_][a-zA-Z0-9_]*=\"(?:[^\"\\\\]|\\\\.)*\",?)*\\})? "
                    + "(-?[0-9.eE+-]+|NaN|[+-]Inf)( -?[0-9]+)?");
    private static final Pattern TYPE =
            Pattern.compile("# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)");

    private Exposition() {}

    /** Samples by {@code name{labels}}, and types by metric family name under {@code "#TYPE name"}. */
    public static Map<String, String> parse(String body) {
        Map<String, String> out = new LinkedHashMap<>();
        for (String line : body.lines().toList()) {
            if (line.isEmpty() || line.startsWith("# HELP ")) {
                continue;
            }
            Matcher t = TYPE.matcher(line);
            if (t.matches()) {
                out.put("#TYPE " + t.group(1), t.group(2));
                continue;
            }
            Matcher m = SAMPLE.matcher(line);
            if (!m.matches()) {
                throw new AssertionError("not a line of the exposition format: '" + line + "'");
            }
            out.put(m.group(1) + (m.group(2) == null ? "" : m.group(2)), m.group(3));
        }
        return out;
    }

    /** The value of the sample {@code name} whose labels include every {@code key="value"} given. */
    public static double value(Map<String, String> samples, String name, String... labels) {
        for (Map.Entry<String, String> e : samples.entrySet()) {
            String key = e.getKey();
            if (!key.equals(name) && !key.startsWith(name + "{")) {
                continue;
            }
            boolean all = true;
            for (String l : labels) {
                all &= key.contains(l);
            }
            if (all) {
                return Double.parseDouble(e.getValue());
            }
        }
        throw new AssertionError("no sample " + name + " with " + String.join(",", labels) + " in " + samples.keySet());
    }
}
