package io.gpumem.trace.analysis;

import io.gpumem.history.BlockInfo;
import io.gpumem.history.BlockState;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.io.TraceFormatException;
import io.gpumem.trace.io.TraceSnapshot;
import java.util.List;
import java.util.TreeSet;

/**
 * Builds the analysis input from a snapshot read by {@code io.gpumem.trace.io}: the end-state segments of
 * one device, the recorded configuration, and the {@code oom} entry that ended the trace, if any.
 *
 * <p>An {@code oom} entry is attached to the end state only when nothing after it changed the allocator
 * (no alloc, free or segment entry follows): then the end state is the state the request failed in, as when
 * a program dumps its snapshot from an OOM handler. Otherwise the state at the entry needs a replay
 * ({@code --at}).
 */
public final class SnapshotStates {
    private SnapshotStates() {}

    /** The devices that have segments or trace entries, ascending. */
    public static List<Integer> devices(TraceSnapshot snapshot) {
        TreeSet<Integer> devices = new TreeSet<>();
        for (SegmentInfo s : snapshot.segments()) {
            devices.add(s.device());
        }
        for (int d = 0; d < snapshot.deviceTraces().size(); d++) {
            if (!snapshot.deviceTraces().get(d).isEmpty()) {
                devices.add(d);
            }
        }
        return List.copyOf(devices);
    }

    /**
     * The end state of {@code device}.
     *
     * @param capacity the device capacity, or {@link MemoryState#UNKNOWN}
     * @throws TraceFormatException naming the segment when a block's state is unknown or blocks do not tile it
     */
    public static MemoryState endState(TraceSnapshot snapshot, int device, long capacity) {
        MemoryState.Builder b = MemoryState.builder()
                .label(snapshot.source() + ", end state")
                .device(device)
                .capacity(capacity);
        String conf = snapshot.recordedConfString();
        if (conf != null) {
            b.allocatorConf(conf);
        }
        for (SegmentInfo s : snapshot.segmentsOf(device)) {
            b.segment(segment(snapshot.source(), s));
        }
        List<TraceEntry> trace = snapshot.traceOf(device);
        int oomIndex = trailingOom(trace);
        if (oomIndex >= 0) {
            b.oom(OomEvent.recorded(trace.get(oomIndex), oomIndex));
        }
        try {
            return b.build();
        } catch (IllegalArgumentException ex) {
            throw new TraceFormatException(snapshot.source(), "segments of device " + device, ex.getMessage());
        }
    }

    /** Index of an {@code oom} entry after which the allocator state did not change, or −1. */
    static int trailingOom(List<TraceEntry> trace) {
        return TraceStates.oomInForce(trace, trace.size() - 1);
    }

    /**
     * A file's segment as the analysis takes it: as recorded, except that a {@code total_size} that disagrees with
     * the blocks (an inconsistent snapshot analysed under {@code --lenient}) gives way to the blocks' sum.
     */
    static SegmentInfo segment(String source, SegmentInfo s) {
        long sum = 0;
        for (BlockInfo blk : s.blocks()) {
            if (blk.state() == BlockState.UNKNOWN) {
                throw new TraceFormatException(
                        source,
                        "segment 0x" + Long.toHexString(s.address()) + ", block 0x" + Long.toHexString(blk.address()),
                        "unknown block state '" + blk.stateName() + "'");
            }
            sum += blk.size();
        }
        if (sum == s.totalSize()) {
            return s;
        }
        return new SegmentInfo(
                s.device(),
                s.address(),
                sum,
                s.allocatedSize(),
                s.activeSize(),
                s.requestedSize(),
                s.stream(),
                s.pool(),
                s.expandable(),
                s.frames(),
                s.blocks(),
                s.poolId(),
                s.keys());
    }
}
