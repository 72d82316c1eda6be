package io.gpumem.trace.replay;

import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.io.EntryFields;
import java.util.List;

/**
 * What the recording itself says about reserved memory over a window: the reserved bytes at the start (from
 * the rebuilt state) plus every recorded driver call. {@code peakReserved} is the trace's own peak, the figure
 * a replay under the recorded configuration must reproduce; {@code capacity} is the device memory the run is
 * taken to have had for what-if replays (see {@link #of}).
 */
public record RecordedTotals(long startReserved, long peakReserved, long endReserved, long capacity, long oomEntries) {

    private static final long GRANULE = 2L << 20;

    /**
     * Walks the trace. The recorded capacity is the smallest that reproduces the recording: every recorded
     * driver allocation fitted, so it is at least the peak reserved; where an {@code oom} entry reports the
     * free device memory, reserved + free at that moment is used when larger. Rounded up to 2 MiB.
     */
    public static RecordedTotals of(long startReserved, List<TraceEntry> trace) {
        long reserved = startReserved;
        long peak = reserved;
        long capacity = 0;
        long ooms = 0;
        EntryFields fields = EntryFields.of(trace); // no record built per entry, but for the few OOMs
        for (int i = 0; i < trace.size(); i++) {
            switch (fields.action(i)) {
                case SEGMENT_ALLOC, SEGMENT_MAP -> {
                    reserved += fields.size(i);
                    peak = Math.max(peak, reserved);
                }
                case SEGMENT_FREE, SEGMENT_UNMAP -> reserved -= fields.size(i);
                case OOM -> {
                    ooms++;
                    TraceEntry e = trace.get(i);
                    if (e.has(TraceEntry.DEVICE_FREE)) {
                        capacity = Math.max(capacity, reserved + e.deviceFree());
                    }
                }
                default -> {}
            }
        }
        capacity = Math.max(capacity, peak);
        capacity = (capacity + GRANULE - 1) / GRANULE * GRANULE;
        return new RecordedTotals(startReserved, peak, reserved, capacity, ooms);
    }

    static boolean isRelease(TraceAction a) {
        return a == TraceAction.SEGMENT_FREE || a == TraceAction.SEGMENT_UNMAP;
    }
}
