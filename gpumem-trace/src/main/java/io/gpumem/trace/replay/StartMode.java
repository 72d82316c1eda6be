package io.gpumem.trace.replay;

import java.util.Locale;

/**
 * Where a what-if replay of a trace window starts ({@code --start} of {@code compare}, {@code analyze} and
 * {@code report}). A window recorded after the program's first step starts warm: its segments are the cache the
 * earlier steps left, and replayed from that start every configuration inherits them. The steady state is the
 * answer to "what would this configuration reserve once the loop has run a while": the window iterated from its
 * live blocks alone until reserved memory stops changing ({@link WhatIfReplay}).
 */
public enum StartMode {
    /** Steady state when the window starts warm and closes as a loop body, else the window's recorded start. */
    AUTO,
    /** The window from its rebuilt start state, recorded segments kept. */
    WINDOW,
    /** The window iterated from its live blocks alone, whatever its start. */
    STEADY;

    /** The option value ({@code auto}, {@code window}, {@code steady}). */
    public String optionValue() {
        return name().toLowerCase(Locale.ROOT);
    }
}
