package io.gpumem.report;

import io.gpumem.history.Frame;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Allocation sites: a short, stable label per stack, so that the report groups requests by where in the
 * program they were made rather than by their full (often 60-frame) stacks.
 *
 * <p>Rule: the innermost Python frame outside the frameworks (not under {@code site-packages}, {@code torch/},
 * {@code <frozen ...>}) names the site as {@code file.py:line function}; failing that, the innermost Python
 * frame at all; for a C++-only stack (autograd's backward threads), the autograd node being applied; else the
 * innermost frame. Labels are interned: ids are dense from 0 in order of first use, and identical stack lists
 * (readers share them) are labelled once.
 */
final class Sites {
    /** Site of blocks allocated before the trace window began. */
    static final String BEFORE_TRACE = "(allocated before the trace)";
    /** Site of requests recorded without a stack. */
    static final String NO_STACK = "(no stack recorded)";

    private static final Pattern AUTOGRAD_NODE = Pattern.compile("torch::autograd::generated::(\\w+)::apply");

    private final Map<String, Integer> ids = new LinkedHashMap<>();
    private final List<String> labels = new ArrayList<>();
    private final IdentityHashMap<List<Frame>, Integer> byStack = new IdentityHashMap<>();

    /** The site id of a stack ({@code null} or empty: {@link #NO_STACK}). */
    int of(List<Frame> frames) {
        if (frames == null || frames.isEmpty()) {
            return id(NO_STACK);
        }
        Integer known = byStack.get(frames);
        if (known != null) {
            return known;
        }
        int id = id(label(frames));
        byStack.put(frames, id);
        return id;
    }

    /** The id of a label, interning it. */
    int id(String label) {
        Integer id = ids.get(label);
        if (id == null) {
            id = labels.size();
            ids.put(label, id);
            labels.add(label);
        }
        return id;
    }

    String label(int id) {
        return labels.get(id);
    }

    int size() {
        return labels.size();
    }

    List<String> labels() {
        return List.copyOf(labels);
    }

    /** The label of one stack, by the rule in the class comment. */
    static String label(List<Frame> frames) {
        for (Frame f : frames) {
            if (isPython(f) && !isFramework(f.filename())) {
                return shortName(f);
            }
        }
        for (Frame f : frames) {
            if (isPython(f)) {
                return shortName(f);
            }
        }
        for (Frame f : frames) {
            Matcher m = AUTOGRAD_NODE.matcher(f.name());
            if (m.find()) {
                return "backward: " + m.group(1);
            }
        }
        Frame first = frames.getFirst();
        return first.filename().isEmpty() || first.filename().equals("??") ? first.name() : shortName(first);
    }

    private static boolean isPython(Frame f) {
        return f.filename().endsWith(".py");
    }

    private static boolean isFramework(String file) {
        return file.contains("site-packages/")
                || file.contains("dist-packages/")
                || file.startsWith("<frozen")
                || file.contains("/torch/")
                || file.startsWith("torch/")
                || file.contains("/lib/python");
    }

    private static String shortName(Frame f) {
        String file = f.filename();
        int slash = file.lastIndexOf('/');
        String base = slash >= 0 ? file.substring(slash + 1) : file;
        return base + (f.line() > 0 ? ":" + f.line() : "") + " " + f.name();
    }
}
