package io.gpumem.trace.replay;

import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.io.AllocatorSnapshots;
import java.util.ArrayList;
import java.util.List;

/**
 * The device trace a replay writes ({@code replay --snapshot}), in the recording's vocabulary: what the model did,
 * with everything the recording knew about each request.
 *
 * <p>An entry the model reproduced (same action, address, size and stream as the recorded entry that caused it)
 * is written as recorded, with its frames, {@code time_us}, {@code compile_context}, {@code user_metadata} and
 * whatever else the file had, and with the keys the file had. An entry the model made differently, or that the
 * recording lacks (a driver call of a what-if), is the model's, carrying the frames, unknown keys and time of the
 * recorded request that caused it ({@link AllocatorSnapshots#entry(TraceEntry, TraceEntry)}).
 * Entries the allocator does not act on ({@code oom}, {@code snapshot}, annotations) are written as recorded.
 *
 * <p>The model frees a block at once, writing {@code free_requested} and {@code free_completed} together; the
 * recording writes the request where the program made it. So in a trace with completions the request is written
 * where it was recorded (at the block's model address) and the model's own copy is dropped; in a trace without
 * completions the model's completions are dropped, as the recording has none.
 */
final class ReplayedTrace {

    private final boolean hasCompletions;
    private final List<TraceEntry> entries = new ArrayList<>();

    ReplayedTrace(boolean hasCompletions) {
        this.hasCompletions = hasCompletions;
    }

    /** Writes a recorded entry, at {@code address} (the model's address of the block it names). */
    void addRecorded(TraceEntry recorded, long address) {
        entries.add(address == recorded.addr() ? recorded : recorded.withAddr(address));
    }

    /** Writes an entry the model made while serving the recorded request {@code cause}. */
    void addModel(TraceEntry model, TraceEntry cause) {
        TraceAction a = model.action();
        if ((a == TraceAction.FREE_REQUESTED && hasCompletions)
                || (a == TraceAction.FREE_COMPLETED && !hasCompletions)) {
            return;
        }
        if (cause.action() == a
                && cause.addr() == model.addr()
                && cause.size() == model.size()
                && cause.stream() == model.stream()) {
            entries.add(cause);
        } else {
            entries.add(AllocatorSnapshots.entry(model, cause));
        }
    }

    List<TraceEntry> entries() {
        return List.copyOf(entries);
    }
}
