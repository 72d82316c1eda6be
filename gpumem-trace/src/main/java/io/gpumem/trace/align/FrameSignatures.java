package io.gpumem.trace.align;

import io.gpumem.history.Frame;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;

/**
 * Interns stack-frame lists as small integers, shared by the recordings being aligned, so that "same call stack"
 * is an int comparison. Two recordings of one program have equal frame lists for the same allocation site (file,
 * line and function do not depend on the sizes), which makes the index the strongest alignment signal there is.
 *
 * <p>Readers share identical frame lists between entries, so the identity cache answers most look-ups without
 * hashing a list of records. Not thread-safe: one table per alignment.
 */
public final class FrameSignatures {

    private final IdentityHashMap<List<Frame>, Integer> byIdentity = new IdentityHashMap<>();
    private final Map<List<Frame>, Integer> byValue = new HashMap<>();
    private final List<List<Frame>> lists = new ArrayList<>();
    private final List<String> labels = new ArrayList<>();
    private final Map<List<String>, Integer> withoutLinesIds = new HashMap<>();
    private final List<Integer> withoutLines = new ArrayList<>();

    /** The index of this frame list, a new one when not seen before. */
    public int intern(List<Frame> frames) {
        Integer known = byIdentity.get(frames);
        if (known != null) {
            return known;
        }
        Integer id = byValue.get(frames);
        if (id == null) {
            id = lists.size();
            lists.add(frames);
            labels.add(labelOf(frames));
            List<String> names = new ArrayList<>(frames.size());
            boolean python = false;
            for (Frame f : frames) {
                python |= f.filename().endsWith(".py");
            }
            for (Frame f : frames) {
                if (!python || f.filename().endsWith(".py")) {
                    int slash = f.filename().lastIndexOf('/');
                    names.add(f.filename().substring(slash + 1)
                            + '\0'
                            + f.name()
                            + (names.isEmpty() && python ? "\0" + f.line() : ""));
                }
            }
            withoutLines.add(withoutLinesIds.computeIfAbsent(names, k -> withoutLinesIds.size()));
            byValue.put(frames, id);
        }
        byIdentity.put(frames, id);
        return id;
    }

    /**
     * The index of signature {@code id}'s stack reduced to what survives an edited script and another kernel choice:
     * when the stack has Python frames, those alone (file name and function, and the line of the innermost one, the
     * allocating line of code); otherwise (e.g. a backward allocation made by the autograd engine) every frame's file
     * name and function. Equal for two runs of a script whose outer lines moved, or whose operator took another
     * native path at another size.
     */
    public int withoutLines(int id) {
        return withoutLines.get(id);
    }

    /** Number of distinct frame lists. */
    public int count() {
        return lists.size();
    }

    /** The frames of signature {@code id}, innermost first. */
    public List<Frame> frames(int id) {
        return lists.get(id);
    }

    /**
     * A short readable name of the allocation site: the innermost Python frame ({@code file.py:LINE function}),
     * else the innermost ATen operator ({@code at::_ops::NAME}, marked {@code (autograd)} when the autograd engine
     * called it: a backward allocation), else the innermost frame outside the allocator itself.
     */
    public String label(int id) {
        return labels.get(id);
    }

    static String labelOf(List<Frame> frames) {
        for (Frame f : frames) {
            if (f.filename().endsWith(".py")) {
                String file = f.filename();
                int slash = file.lastIndexOf('/');
                return file.substring(slash + 1) + ":" + f.line() + " " + f.name();
            }
        }
        boolean autograd = false;
        for (Frame f : frames) {
            autograd |= f.name().startsWith("torch::autograd::Engine::");
        }
        for (Frame f : frames) {
            String name = f.name();
            if (name.startsWith("at::_ops::")) {
                int end = name.indexOf("::", "at::_ops::".length());
                String op = end < 0 ? name : name.substring(0, end);
                return op + (autograd ? " (autograd)" : "");
            }
        }
        for (Frame f : frames) {
            String name = f.name();
            if (!name.startsWith("torch::unwind")
                    && !name.startsWith("torch::CapturedTraceback")
                    && !name.contains("gather_with_cpp")
                    && !name.contains("CachingAllocator")) {
                int paren = name.indexOf('(');
                return paren > 0 ? name.substring(0, paren) : name;
            }
        }
        return frames.isEmpty() ? "(no frames)" : frames.get(0).name();
    }
}
