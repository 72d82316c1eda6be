package io.gpumem.trace.analysis;

import java.util.Locale;

/** Shares and ratios as the analysis reports print them: a percentage with one decimal ("37.5%"). */
public final class Percent {

    private Percent() {}

    public static String of(double ratio) {
        return String.format(Locale.ROOT, "%.1f%%", ratio * 100);
    }
}
