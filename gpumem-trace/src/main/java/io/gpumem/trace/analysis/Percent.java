package io.gpumem.trace.analysis;

import java.util.Locale;

/** Shares and ratios as the analysis reports print them: a percentage with one decimal ("37.5%"). */
final class Percent {

    private Percent() {
    }

    static String of(double ratio) {
        return String.format(Locale.ROOT, "%.1f%%", ratio * 100);
    }
}
