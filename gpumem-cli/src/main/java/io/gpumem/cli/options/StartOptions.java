package io.gpumem.cli.options;

import io.gpumem.trace.replay.StartMode;
import io.gpumem.trace.session.TraceSession;
import java.util.Locale;
import picocli.CommandLine.Option;

/**
 * {@code --start auto|window|steady}: where the what-if replays of a trace window start ({@code compare},
 * {@code analyze}, {@code report}); see {@link StartMode}.
 */
public final class StartOptions {

    @Option(
            names = "--start",
            paramLabel = "MODE",
            description = "Where what-if replays start: auto (default: the steady state, the window iterated from its"
                    + " live blocks alone until reserved memory stops changing, when the window starts warm and"
                    + " repeats; else the recorded start), window (the recorded start, its cached segments kept) or"
                    + " steady.")
    String start = "auto";

    /**
     * The mode given.
     *
     * @throws BadInputException reading {@code bad --start: ...} for an unknown value
     */
    public StartMode mode() {
        for (StartMode m : StartMode.values()) {
            if (m.optionValue().equals(start.toLowerCase(Locale.ROOT))) {
                return m;
            }
        }
        throw new BadInputException("bad --start: '" + start + "' (expected auto, window or steady)");
    }

    /** Applies the mode to {@code session}'s replays; returns it. */
    public TraceSession apply(TraceSession session) {
        return session.startMode(mode());
    }
}
