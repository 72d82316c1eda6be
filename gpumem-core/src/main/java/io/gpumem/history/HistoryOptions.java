package io.gpumem.history;

/**
 * Arguments of {@code torch.cuda.memory._record_memory_history(enabled, context, stacks, max_entries)}
 * (allocator.md §10.1).
 *
 * @param enabled    {@link Enabled#NONE} turns recording off and clears the buffer; {@link Enabled#STATE} keeps
 *                   stacks for live blocks only (the trace buffer holds one entry); {@link Enabled#ALL} also keeps
 *                   the alloc/free history
 * @param context    which stacks are captured: none, live allocations only, also on trace entries, also at free
 * @param maxEntries ring-buffer size: the most recent entries are kept (minimum 1)
 */
public record HistoryOptions(Enabled enabled, Context context, long maxEntries) {

    /** {@code enabled} argument. */
    public enum Enabled {
        NONE,
        STATE,
        ALL
    }

    /** {@code context} argument; maps to PyTorch's RecordContext NEVER, STATE, ALLOC, ALL. */
    public enum Context {
        NONE,
        STATE,
        ALLOC,
        ALL
    }

    public HistoryOptions {
        if (enabled == null || context == null) {
            throw new IllegalArgumentException("enabled and context must not be null (use NONE)");
        }
        if (maxEntries < 0) {
            throw new IllegalArgumentException("maxEntries must be >= 0, got " + maxEntries);
        }
    }

    /** PyTorch's defaults: {@code enabled="all", context="all", max_entries=sys.maxsize}. */
    public static HistoryOptions all() {
        return new HistoryOptions(Enabled.ALL, Context.ALL, Long.MAX_VALUE);
    }

    /** Like {@link #all()} but keeping only the most recent {@code maxEntries} entries. */
    public static HistoryOptions all(long maxEntries) {
        return new HistoryOptions(Enabled.ALL, Context.ALL, maxEntries);
    }

    /** {@code enabled=None}: stop recording and clear the history. */
    public static HistoryOptions off() {
        return new HistoryOptions(Enabled.NONE, Context.NONE, 1);
    }
}
