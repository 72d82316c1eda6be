package io.gpumem.cli.trace;

import java.util.Locale;

/** Byte counts for tables: GiB with two decimals (what memory_viz and nvidia-smi users read). */
final class Sizes {

    private Sizes() {
    }

    static String gib(long bytes) {
        return String.format(Locale.ROOT, "%.2f GiB", bytes / (double) (1L << 30));
    }
}
