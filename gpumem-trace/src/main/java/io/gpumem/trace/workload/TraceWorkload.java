package io.gpumem.trace.workload;

import io.gpumem.engine.RequestStream;
import io.gpumem.history.Frame;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.io.TraceSnapshot;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The request stream of one device trace: its {@code alloc} entries and the {@code free_requested} entries
 * that free them (plus the request of an {@code oom} entry that ends the range), compiled into the engine's
 * {@link RequestStream} so that a recorded window can be re-run from scratch under another configuration (the
 * minimal what-if of the analysis). Each op keeps the index of the trace entry it came from; each alloc's stack is
 * one frame naming that entry ({@code alloc #N}, or {@code failed request #N} for the OOM).
 *
 * <p>What it leaves out, by construction: blocks allocated before the window (their frees have no alloc and
 * are skipped, and whatever they occupied is not modelled), recorded {@code empty_cache()} calls, and
 * stream-use delays ({@code free_completed} is taken to follow the request at once). The figures are
 * therefore those of the window's own requests on an empty device: a lower bound of the real job's.
 */
public final class TraceWorkload implements AllocationWorkload {
    private final RequestStream stream;
    private final String description;

    private TraceWorkload(RequestStream stream, String description) {
        this.stream = stream;
        this.description = description;
    }

    /**
     * The requests of entries [0, {@code endExclusive}) of {@code device}'s trace.
     */
    public static TraceWorkload of(TraceSnapshot snapshot, int device, int endExclusive) {
        List<TraceEntry> trace = snapshot.traceOf(device);
        int end = Math.min(endExclusive, trace.size());
        RequestStream.Builder b = AllocationWorkload.streamBuilder();
        Map<Long, Integer> live = new HashMap<>();
        int skippedFrees = 0;
        for (int i = 0; i < end; i++) {
            TraceEntry e = trace.get(i);
            switch (e.action()) {
                case ALLOC -> {
                    if (e.size() <= 0) {
                        continue;
                    }
                    Integer previous = live.remove(e.addr());
                    if (previous != null) {
                        // an address handed out twice without a free between: the earlier block was freed
                        // outside the window's record; free it first so the stream stays balanced
                        b.free(previous, i);
                    }
                    live.put(e.addr(), request(b, e, i, "alloc #"));
                }
                case FREE_REQUESTED -> {
                    Integer slot = live.remove(e.addr());
                    if (slot != null) {
                        b.free(slot, i);
                    } else {
                        skippedFrees++;
                    }
                }
                case OOM -> {
                    // the request that failed at the analysed point: part of the stream, so that the baseline
                    // reproduces the OOM and the alternatives show whether they would have served it
                    if (i == end - 1 && e.size() > 0) {
                        request(b, e, i, "failed request #");
                    }
                }
                default -> {}
            }
        }
        RequestStream stream = b.build();
        String description = "the " + stream.allocs() + " requests of device " + device + "'s trace"
                + (end < trace.size() ? " up to entry " + (end - 1) : "")
                + (skippedFrees > 0 ? " (" + skippedFrees + " frees of blocks from before the window skipped)" : "");
        return new TraceWorkload(stream, description);
    }

    /** Appends entry {@code i}'s request, its stack one frame named {@code what} and the entry's index. */
    private static int request(RequestStream.Builder b, TraceEntry e, int i, String what) {
        int slot = b.alloc(e.size(), e.stream(), i);
        b.atSite(b.site(List.of(new Frame(what + i, 0, "demo"))));
        return slot;
    }

    @Override
    public RequestStream stream() {
        return stream;
    }

    @Override
    public String describe() {
        return description;
    }
}
