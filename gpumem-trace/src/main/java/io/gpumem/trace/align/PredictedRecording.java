package io.gpumem.trace.align;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.history.BlockInfo;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.io.SourceFormat;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.window.RecordedConfig;
import io.gpumem.trace.window.WindowRebuilder;
import io.gpumem.trace.window.WindowStart;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * The recording a program would make at a value never run, written from {@link SizeLaws}: the reference
 * recording's requests in their order, each at its law's size at the target value, as a trace any replay reads
 * (so the engine plays it like any other source; no second replay path).
 *
 * <p>What it holds: first one {@code alloc} per block live at the reference window's start (weights, optimizer
 * state: kept at their recorded size, since the window says nothing of how they scale), then every {@code alloc}
 * and free of the reference window, driver calls left out (the replay makes its own). A request with a law gets the
 * law's size; one without (no law fits, or some recording lacks it) keeps the reference's size and is counted as
 * unpredicted. Frees of blocks allocated before the window free the start blocks above. The start is an empty
 * allocator: the cache state a warm window began with is not predicted (the first step warms the cache).
 *
 * <p>Addresses are the reference's, used only to pair each free with its alloc (the reference never has two live
 * blocks at one address), so {@linkplain TraceSnapshot#addressesRecorded() addresses are not recorded decisions}.
 */
public final class PredictedRecording {

    private final TraceSnapshot trace;
    private final long at;
    private final int predicted;
    private final int unpredicted;
    private final int startBlocks;

    private PredictedRecording(TraceSnapshot trace, long at, int predicted, int unpredicted, int startBlocks) {
        this.trace = trace;
        this.at = at;
        this.predicted = predicted;
        this.unpredicted = unpredicted;
        this.startBlocks = startBlocks;
    }

    /**
     * Writes the reference recording of {@code laws} (read from {@code referenceTrace}, device {@code device}) at
     * value {@code at}.
     *
     * @throws IllegalArgumentException when a law gives a size of zero or less (or beyond a long) at {@code at},
     *                                  naming the value and the request
     */
    public static PredictedRecording of(SizeLaws laws, TraceSnapshot referenceTrace, int device, long at) {
        RequestSequence ref = laws.reference();
        long[] sizeOfRequest = new long[ref.size()];
        for (int r = 0; r < ref.size(); r++) {
            sizeOfRequest[r] = -1;
        }
        int predicted = 0;
        for (int row = 0; row < laws.rows(); row++) {
            SizeLaw law = laws.law(row);
            if (law == null) {
                continue;
            }
            long size = law.at(at);
            if (size <= 0) {
                throw new IllegalArgumentException("at " + at + " the size law " + law + " of request "
                        + laws.referenceRequest(row) + " of " + ref.source() + " gives "
                        + (size == Long.MIN_VALUE ? "a size beyond 2^63" : size + " bytes")
                        + ": no program can make that request");
            }
            sizeOfRequest[laws.referenceRequest(row)] = size;
            predicted++;
        }
        AllocatorConfig config = RecordedConfig.of(referenceTrace);
        WindowStart start = new WindowRebuilder(config).rebuild(referenceTrace, device);
        List<TraceEntry> entries = referenceTrace.traceOf(device);
        List<TraceEntry> out = new ArrayList<>(entries.size() + 64);
        int startBlocks = 0;
        for (SegmentInfo s : start.segments()) {
            for (BlockInfo b : s.blocks()) {
                if (b.isAllocated()) {
                    out.add(TraceEntry.of(
                            TraceAction.ALLOC,
                            b.address(),
                            b.requestedSize() > 0 ? b.requestedSize() : b.size(),
                            s.stream()));
                    startBlocks++;
                }
            }
        }
        int r = 0;
        for (TraceEntry e : entries) {
            switch (e.action()) {
                case ALLOC -> {
                    long size = sizeOfRequest[r] > 0 ? sizeOfRequest[r] : e.size();
                    r++;
                    out.add(new TraceEntry(
                            e.action(), e.addr(), size, e.stream(), e.timeUs(), e.frames(), e.deviceFree(), e.keys()));
                }
                case FREE_REQUESTED, FREE_COMPLETED -> out.add(e);
                default -> {}
            }
        }
        String source = "predicted at " + at + " from " + ref.source();
        TraceSnapshot predictedTrace = new TraceSnapshot(
                source,
                SourceFormat.PYTORCH_SNAPSHOT,
                List.of(),
                List.of(out),
                referenceTrace.allocatorSettings(),
                null,
                Map.of(),
                false);
        return new PredictedRecording(predictedTrace, at, predicted, ref.size() - predicted, startBlocks);
    }

    /** The predicted recording: device 0 holds the predicted trace; no end-state segments. */
    public TraceSnapshot trace() {
        return trace;
    }

    /** The value predicted at. */
    public long at() {
        return at;
    }

    /** Requests whose size a law gives. */
    public int predictedRequests() {
        return predicted;
    }

    /** Requests kept at the reference's size (no law, or not aligned in every recording). */
    public int unpredictedRequests() {
        return unpredicted;
    }

    /** Blocks live at the reference window's start, allocated first at their recorded size. */
    public int startBlocks() {
        return startBlocks;
    }
}
