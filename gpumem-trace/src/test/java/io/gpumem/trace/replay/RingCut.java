package io.gpumem.trace.replay;

import io.gpumem.history.MemorySnapshot;
import io.gpumem.history.TraceEntry;
import java.util.List;

/** The replay tests' history ring: a one-device recording as a ring would have kept it, from an entry on. */
final class RingCut {
    private RingCut() {}

    /** {@code end} with its trace cut to the entries from index {@code from} on (its segments and settings kept). */
    static MemorySnapshot from(MemorySnapshot end, int from) {
        List<TraceEntry> all = end.deviceTraces().get(0);
        return new MemorySnapshot(
                end.segments(), List.of(List.copyOf(all.subList(from, all.size()))), end.allocatorSettings());
    }
}
