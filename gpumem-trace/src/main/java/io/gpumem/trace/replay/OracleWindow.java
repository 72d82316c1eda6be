package io.gpumem.trace.replay;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.engine.RequestStream;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.window.WindowRebuilder;
import io.gpumem.trace.window.WindowStart;
import java.util.List;

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
 */
record OracleWindow(
        int device,
        List<TraceEntry> trace,
        WindowStart start,
        RequestStream stream,
        RecordedDecisions recorded,
        int peakLiveBlocks) {

    static OracleWindow prepare(TraceSnapshot snapshot, int device, AllocatorConfig config) {
        List<TraceEntry> trace = snapshot.traceOf(device);
        WindowStart start = new WindowRebuilder(config).rebuild(snapshot, device);
        RecordedDecisions.Builder decisions = new RecordedDecisions.Builder();
        RequestStream stream = WindowStreams.compileForOracle(trace, start, decisions);
        return new OracleWindow(device, trace, start, stream, decisions.build(stream.slots()), stream.peakLiveBlocks());
    }

    /** Whether the window has a trace entry that completes a free (else frees happen at their request). */
    boolean hasCompletions() {
        return recorded.hasCompletions;
    }
}
