package io.gpumem.trace.io;

import io.gpumem.history.Frame;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * The fields of a device trace's entries that a replay reads entry by entry (action, address, size, stream, and
 * the frames a request's site is taken from), by index: straight from the columns when the trace is stored as
 * {@link TraceColumns} (no record built per entry), else from the records of any other list. What the window
 * rebuild, its compile and the passes of the analysis over a whole trace walk.
 */
public interface EntryFields {

    TraceAction action(int index);

    long addr(int index);

    long size(int index);

    long stream(int index);

    /** The entry's frames, null when it has none (the list the entry itself would hold). */
    @Nullable
    List<Frame> frames(int index);

    /**
     * Copies the actions of entries {@code from} to {@code to} (exclusive), as {@link TraceAction#ordinal()}s, into
     * {@code out[0 .. to - from)}: a loop over a chunk of entries reads them from a byte array, not one call each.
     */
    default void actionOrdinals(int from, int to, byte[] out) {
        for (int i = from; i < to; i++) {
            out[i - from] = (byte) action(i).ordinal();
        }
    }

    /** Copies the {@code addr} of entries {@code from} to {@code to} (exclusive) into {@code out[0 .. to - from)}. */
    default void addrs(int from, int to, long[] out) {
        for (int i = from; i < to; i++) {
            out[i - from] = addr(i);
        }
    }

    /** Copies the {@code size} of entries {@code from} to {@code to} (exclusive) into {@code out[0 .. to - from)}. */
    default void sizes(int from, int to, long[] out) {
        for (int i = from; i < to; i++) {
            out[i - from] = size(i);
        }
    }

    /** Copies the stream of entries {@code from} to {@code to} (exclusive) into {@code out[0 .. to - from)}. */
    default void streams(int from, int to, long[] out) {
        for (int i = from; i < to; i++) {
            out[i - from] = stream(i);
        }
    }

    /** The fields of {@code trace}: its columns when it has them (the columns, or a range of them). */
    static EntryFields of(List<TraceEntry> trace) {
        if (trace instanceof EntryFields columns) {
            return columns;
        }
        return new EntryFields() {
            @Override
            public TraceAction action(int index) {
                return trace.get(index).action();
            }

            @Override
            public long addr(int index) {
                return trace.get(index).addr();
            }

            @Override
            public long size(int index) {
                return trace.get(index).size();
            }

            @Override
            public long stream(int index) {
                return trace.get(index).stream();
            }

            @Override
            public @Nullable List<Frame> frames(int index) {
                return trace.get(index).frames();
            }
        };
    }
}
