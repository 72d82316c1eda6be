package io.gpumem.trace.replay;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.engine.RequestStream;
import io.gpumem.history.BlockInfo;
import io.gpumem.history.BlockState;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.io.EntryFields;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.window.WindowRebuilder;
import io.gpumem.trace.window.WindowStart;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * One device's window prepared for oracle replays: its start state rebuilt under the replayed configuration, and
 * the window compiled into the engine's {@link RequestStream} with the recording's decisions beside it
 * ({@link RecordedDecisions}). Read-only once built, so any number of {@link DeviceReplay}s may play it.
 *
 * @param device the device trace
 * @param trace its entries (for mismatch context and a written trace)
 * @param start the rebuilt start state
 * @param stream the compiled requests (every release run an {@code empty_cache})
 * @param recorded what the recording decided for each op
 * @param peakLiveBlocks the most blocks live at once in the stream (the size a replay gives its allocation table)
 * @param waitingAtEnd the blocks whose free was requested and not completed at the window's end, their
 *     recorded address to the segment's stream (see {@link #waitingAtEnd(TraceSnapshot, int)})
 */
record OracleWindow(
        int device,
        List<TraceEntry> trace,
        WindowStart start,
        RequestStream stream,
        RecordedDecisions recorded,
        int peakLiveBlocks,
        Map<Long, Long> waitingAtEnd) {

    static OracleWindow prepare(TraceSnapshot snapshot, int device, AllocatorConfig config) {
        return prepare(snapshot, device, new WindowRebuilder(config).rebuild(snapshot, device));
    }

    /**
     * The window of {@code device} played from {@code start} instead of the rebuilt state: a start state known
     * otherwise (the tests' ground truth, taken from the run itself), with the rebuild's free matches.
     */
    static OracleWindow prepare(TraceSnapshot snapshot, int device, WindowStart start) {
        List<TraceEntry> trace = snapshot.traceOf(device);
        RecordedDecisions.Builder decisions = new RecordedDecisions.Builder();
        RequestStream stream = WindowStreams.compileForOracle(trace, start, decisions);
        return new OracleWindow(
                device,
                trace,
                start,
                stream,
                decisions.build(stream.slots()),
                stream.peakLiveBlocks(),
                waitingAtEnd(snapshot, device));
    }

    /**
     * The end state's {@code active_pending_free} blocks (freed, waiting on another stream's events:
     * {@code record_stream}) whose free the window requested last or before it began: the last entry of the trace at
     * the block's address is a {@code free_requested}, or there is none. The model frees at {@code free_completed}, so
     * without them it would end holding these blocks allocated. Address to the segment's stream; empty
     * when the end state has no such block (then the trace is not walked).
     */
    static Map<Long, Long> waitingAtEnd(TraceSnapshot snapshot, int device) {
        Map<Long, Long> pending = new HashMap<>();
        for (SegmentInfo seg : snapshot.segmentsOf(device)) {
            for (BlockInfo b : seg.blocks()) {
                if (b.state() == BlockState.ACTIVE_PENDING_FREE) {
                    pending.put(b.address(), seg.stream());
                }
            }
        }
        if (pending.isEmpty()) {
            return Map.of();
        }
        EntryFields fields = EntryFields.of(snapshot.traceOf(device));
        Set<Long> seen = new HashSet<>(); // addresses whose last entry is found
        for (int i = snapshot.traceOf(device).size() - 1; i >= 0 && seen.size() < pending.size(); i--) {
            TraceAction a = fields.action(i);
            long addr = fields.addr(i);
            boolean block =
                    a == TraceAction.ALLOC || a == TraceAction.FREE_REQUESTED || a == TraceAction.FREE_COMPLETED;
            if (block && pending.containsKey(addr) && seen.add(addr) && a != TraceAction.FREE_REQUESTED) {
                pending.remove(addr); // allocated or freed for good last: not this window's waiting free
                seen.remove(addr);
            }
        }
        return Map.copyOf(pending);
    }

    /** Whether the window has a trace entry that completes a free (else frees happen at their request). */
    boolean hasCompletions() {
        return recorded.hasCompletions;
    }
}
