package io.gpumem.cli.trace;

import io.gpumem.trace.replay.ProgressListener;
import java.io.PrintStream;

/**
 * Progress of a long replay on standard error, only when gpumem runs on a terminal ({@link java.io.Console#isTerminal}:
 * standard input and output both attached to one; never when output is redirected, so logs and JSON stay clean). Redraws one line at most five times a second, after the first
 * half second, and erases it when done.
 */
public final class TerminalProgress implements ProgressListener {

    private final PrintStream err;
    private final String label;
    private final String unit;
    private final long startNanos = System.nanoTime();
    private long lastDraw;
    private boolean drawn;

    private TerminalProgress(PrintStream err, String label, String unit) {
        this.err = err;
        this.label = label;
        this.unit = unit;
    }

    /**
     * A listener that draws on a terminal, or {@link ProgressListener#NONE} when not on one. {@code isTerminal()} is
     * the test; the null check stays because System.console() is still null off a terminal under
     * {@code -Djdk.console=java.base}, which SystemConsoleNull (written for the default JDK 22+ console) does not
     * allow for.
     */
    @SuppressWarnings("SystemConsoleNull")
    public static ProgressListener forTerminal(String label, String unit) {
        var console = System.console();
        if (console == null || !console.isTerminal()) {
            return ProgressListener.NONE;
        }
        return new TerminalProgress(System.err, label, unit);
    }

    @Override
    public void progress(long done, long total) {
        long now = System.nanoTime();
        if (done >= total) {
            if (drawn) {
                err.print("\r\033[K");
                err.flush();
            }
            return;
        }
        if (now - startNanos < 500_000_000L || now - lastDraw < 200_000_000L) {
            return;
        }
        lastDraw = now;
        drawn = true;
        long pct = total == 0 ? 100 : done * 100 / total;
        err.print("\r" + label + ": " + pct + "% (" + done + " of " + total + " " + unit + ")\033[K");
        err.flush();
    }
}
