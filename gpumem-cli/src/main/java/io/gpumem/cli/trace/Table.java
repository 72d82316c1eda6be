package io.gpumem.cli.trace;

import java.util.List;
import java.util.Locale;

/** A plain-text table: the first column left-aligned, the others right-aligned, two spaces apart. */
final class Table {

    private Table() {}

    /** Renders rows of cells (the first row is the heading), one line each. */
    static String render(List<String[]> cells) {
        int columns = cells.get(0).length;
        int[] width = new int[columns];
        for (String[] row : cells) {
            for (int i = 0; i < row.length; i++) {
                width[i] = Math.max(width[i], row[i].length());
            }
        }
        StringBuilder sb = new StringBuilder();
        for (String[] row : cells) {
            for (int i = 0; i < row.length; i++) {
                if (i == 0) {
                    sb.append(String.format(Locale.ROOT, "%-" + width[i] + "s", row[i]));
                } else {
                    sb.append("  ").append(String.format(Locale.ROOT, "%" + width[i] + "s", row[i]));
                }
            }
            sb.append('\n');
        }
        return sb.toString();
    }
}
