package io.gpumem.trace.category;

import io.gpumem.size.ByteSize;
import io.gpumem.trace.analysis.Percent;
import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Renders {@link PeakCategories} as the text {@code gpumem analyze} and {@code gpumem demo} print after the
 * recommendations: the split by category (at the peak, at the failing request of an OOM, at the end), the rules behind
 * the split at the peak, notes, and the remedies ranked. The HTML report shows the same lines ({@link #lines} holds
 * the figures both print), so that every figure of the text appears on the page.
 */
public final class CategoryPrinter {
    private CategoryPrinter() {}

    /** Prints the categories and the remedies. */
    public static void print(PeakCategories p, PrintWriter out) {
        out.println();
        out.println(heading(p));
        boolean oom = p.atFailure() != null;
        String row = "  %-16s %12s %7s" + (oom ? " %14s" : "") + " %12s%n";
        List<Object> header = new ArrayList<>(List.of("category", "at peak", "share"));
        if (oom) {
            header.add("at the OOM");
        }
        header.add("at end");
        out.printf(Locale.ROOT, row, header.toArray());
        for (String[] cells : lines(p)) {
            out.printf(Locale.ROOT, row, (Object[]) cells);
        }
        out.println("  by rule at the peak: " + rules(p.rulesAtPeak()));
        for (String n : p.notes()) {
            out.println("note: " + n);
        }
        out.println();
        if (p.remedies().isEmpty()) {
            out.println("remedies at the peak: none (no category at the peak that a remedy shrinks)");
        } else {
            out.println("remedies at the peak (best first):");
            int i = 1;
            for (CategoryRemedy r : p.remedies()) {
                out.println("  " + i++ + ". " + r.target() + ": " + r.remedy() + " saves "
                        + ByteSize.formatSigned(r.saves()));
                out.println("     model: " + r.model());
                out.println("     PyTorch today: " + today(r));
            }
        }
        out.flush();
    }

    /** The heading of the split: the peak, and what the bytes are counted at. */
    public static String heading(PeakCategories p) {
        return "what the live bytes are for (requests at their rounded size): peak allocated "
                + ByteSize.formatSigned(p.peakAllocated())
                + (p.peakEntry() >= 0 ? " after entry #" + p.peakEntry() : "")
                + (p.atFailure() != null && p.atFailure().entry() >= 0
                        ? "; the OOM at entry #" + p.atFailure().entry()
                        : "");
    }

    /**
     * One row per category, then a total row: name, bytes at the peak, share of the peak, bytes at the OOM (when
     * there is one), bytes at the end.
     */
    public static List<String[]> lines(PeakCategories p) {
        List<String[]> rows = new ArrayList<>();
        for (ByteCategory c : ByteCategory.values()) {
            rows.add(row(
                    p,
                    c.key(),
                    p.atPeak().get(c),
                    p.atFailure() == null ? 0 : p.atFailure().get(c),
                    p.atEnd().get(c)));
        }
        rows.add(row(
                p,
                "total",
                p.atPeak().total(),
                p.atFailure() == null ? 0 : p.atFailure().total(),
                p.atEnd().total()));
        return rows;
    }

    private static String[] row(PeakCategories p, String name, long peak, long failure, long end) {
        List<String> cells = new ArrayList<>();
        cells.add(name);
        cells.add(ByteSize.formatSigned(peak));
        cells.add(p.peakAllocated() > 0 ? Percent.of(peak / (double) p.peakAllocated()) : "-");
        if (p.atFailure() != null) {
            cells.add(ByteSize.formatSigned(failure));
        }
        cells.add(ByteSize.formatSigned(end));
        return cells.toArray(String[]::new);
    }

    /** Bytes per rule, largest first, with each rule's category and confidence. */
    public static String rules(Map<CategoryRule, Long> rules) {
        if (rules.isEmpty()) {
            return "nothing live";
        }
        List<String> parts = new ArrayList<>();
        rules.entrySet().stream()
                .sorted(Map.Entry.<CategoryRule, Long>comparingByValue().reversed())
                .forEach(e -> parts.add(PeakCategories.ruleName(e.getKey()) + " " + ByteSize.formatSigned(e.getValue())
                        + " (" + e.getKey().category().key() + ", " + confidence(e.getKey()) + ")"));
        return String.join("; ", parts);
    }

    private static String confidence(CategoryRule rule) {
        return rule.confidence() == CategoryRule.Confidence.NONE
                ? "no rule applies"
                : rule.confidence().name().toLowerCase(Locale.ROOT) + " confidence";
    }

    /** Whether and how a PyTorch user applies the remedy today. */
    public static String today(CategoryRemedy r) {
        return (r.pytorchToday() ? "yes: " : "no: ") + r.how();
    }
}
