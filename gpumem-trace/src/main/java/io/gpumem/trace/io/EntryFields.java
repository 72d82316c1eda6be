package io.gpumem.trace.io;

import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import java.util.List;

/**
 * The fields of a device trace's entries that a replay reads entry by entry (action, address, size, stream), by
 * index: straight from the columns when the trace is stored as {@link TraceColumns} (no record built per entry),
 * else from the records of any other list. What the window rebuild and its compile walk.
 */
public interface EntryFields {

    TraceAction action(int index);

    long addr(int index);

    long size(int index);

    long stream(int index);

    /** The fields of {@code trace}: its columns when it has them. */
    static EntryFields of(List<TraceEntry> trace) {
        if (trace instanceof TraceColumns columns) {
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
        };
    }
}
