package io.gpumem.trace.workload;

import io.gpumem.history.TraceEntry;
import io.gpumem.trace.io.TraceSnapshot;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The request stream of one device trace: its {@code alloc} entries and the {@code free_requested} entries
 * that free them, as {@link MemoryOp}s (plus the request of an {@code oom} entry that ends the range), so that a recorded window can be re-run from scratch under another
 * configuration (the minimal what-if of the analysis).
 *
 * <p>What it leaves out, by construction: blocks allocated before the window (their frees have no alloc and
 * are skipped, and whatever they occupied is not modelled), recorded {@code empty_cache()} calls, and
 * stream-use delays ({@code free_completed} is taken to follow the request at once). The figures are
 * therefore those of the window's own requests on an empty device: a lower bound of the real job's.
 */
public final class TraceWorkload implements AllocationWorkload {
    private final List<MemoryOp> ops;
    private final int allocationCount;
    private final String description;

    private TraceWorkload(List<MemoryOp> ops, int allocationCount, String description) {
        this.ops = List.copyOf(ops);
        this.allocationCount = allocationCount;
        this.description = description;
    }

    /**
     * The requests of entries [0, {@code endExclusive}) of {@code device}'s trace.
     */
    public static TraceWorkload of(TraceSnapshot snapshot, int device, int endExclusive) {
        List<TraceEntry> trace = snapshot.traceOf(device);
        int end = Math.min(endExclusive, trace.size());
        List<MemoryOp> ops = new ArrayList<>();
        Map<Long, Integer> live = new HashMap<>();
        int next = 0;
        int skippedFrees = 0;
        for (int i = 0; i < end; i++) {
            TraceEntry e = trace.get(i);
            switch (e.action()) {
                case ALLOC -> {
                    if (e.size() <= 0) {
                        continue;
                    }
                    int id = next++;
                    Integer previous = live.put(e.addr(), id);
                    if (previous != null) {
                        // an address handed out twice without a free between: the earlier block was freed
                        // outside the window's record; free it first so the stream stays balanced
                        ops.add(new MemoryOp.Free(previous));
                    }
                    ops.add(new MemoryOp.Alloc(id, e.size(), e.stream(), TensorKind.TEMPORARY, "alloc #" + i));
                }
                case FREE_REQUESTED -> {
                    Integer id = live.remove(e.addr());
                    if (id != null) {
                        ops.add(new MemoryOp.Free(id));
                    } else {
                        skippedFrees++;
                    }
                }
                case OOM -> {
                    // the request that failed at the analysed point: part of the stream, so that the baseline
                    // reproduces the OOM and the alternatives show whether they would have served it
                    if (i == end - 1 && e.size() > 0) {
                        ops.add(new MemoryOp.Alloc(
                                next++, e.size(), e.stream(), TensorKind.TEMPORARY, "failed request #" + i));
                    }
                }
                default -> {}
            }
        }
        String description = "the " + next + " requests of device " + device + "'s trace"
                + (end < trace.size() ? " up to entry " + (end - 1) : "")
                + (skippedFrees > 0 ? " (" + skippedFrees + " frees of blocks from before the window skipped)" : "");
        return new TraceWorkload(ops, next, description);
    }

    @Override
    public List<MemoryOp> ops() {
        return ops;
    }

    @Override
    public int allocationCount() {
        return allocationCount;
    }

    @Override
    public String describe() {
        return description;
    }
}
