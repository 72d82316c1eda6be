package io.gpumem.trace.replay;

import io.gpumem.alloc.AllocatorInternals;
import io.gpumem.alloc.Pool;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.history.BlockInfo;
import io.gpumem.history.BlockState;
import io.gpumem.history.SegmentInfo;
import io.gpumem.trace.io.EntryFields;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.window.WindowStart;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.ToLongFunction;
import org.jspecify.annotations.Nullable;

/**
 * A window's start state with each free block's requested size replaced by a mark of its own, to find where each
 * start free block's object is at the window's end (docs/replay-method.md §2 "Free space").
 *
 * <p>PyTorch leaves a stale requested size on a free block: the request its block object last served. The model
 * keeps it as PyTorch does (a split leaves the object, with its value, as the high remainder; a merge keeps the
 * absorbing block's; with expandable segments unmapping a free block's pages makes its object the unmapped block,
 * and a map makes that a free block again), and decides nothing by it. So a window played from the marked start
 * makes the decisions it makes from the start itself, and a mark at the end stands on the block its start object
 * became. Marks are {@link #FIRST_MARK} and up, far above any request a device serves, so no mark is taken for a
 * request, and no request for a mark.
 *
 * <p>{@link #withRecordedStaleSizes} uses it for a written replay: the rebuild ({@code WindowRebuilder}) recovers a
 * start free block's value only where its object survives as the end state's free block ending where the start block
 * ends, which it does unless the window unmaps the block's pages and maps them again; the marks follow the object
 * there too, and the recorded end state shows its value.
 */
final class FreeBlockMarks {

    /** The first mark: 2^50 bytes, a thousand TiB. */
    static final long FIRST_MARK = 1L << 50;

    private final WindowStart marked;
    /** The start free blocks (unmarked) by mark, less {@link #FIRST_MARK}. */
    private final List<BlockInfo> startFree;

    private FreeBlockMarks(WindowStart marked, List<BlockInfo> startFree) {
        this.marked = marked;
        this.startFree = startFree;
    }

    /** {@code start} with its free blocks marked, in address order within each segment, segments in order. */
    static FreeBlockMarks of(WindowStart start) {
        List<BlockInfo> startFree = new ArrayList<>();
        List<SegmentInfo> segments = withFreeBlocks(start, b -> {
            startFree.add(b);
            return FIRST_MARK + startFree.size() - 1;
        });
        return new FreeBlockMarks(withSegments(start, segments), List.copyOf(startFree));
    }

    /** The marked start state. */
    WindowStart start() {
        return marked;
    }

    /** The start free block whose mark {@code requestedSize} is, or null when it is no mark. */
    @Nullable
    BlockInfo startBlock(long requestedSize) {
        long k = requestedSize - FIRST_MARK;
        return k >= 0 && k < startFree.size() ? startFree.get((int) k) : null;
    }

    /** The requested size a block showing {@code value} shows when played from the unmarked start. */
    long unmark(long value) {
        BlockInfo b = startBlock(value);
        return b != null ? b.requestedSize() : value;
    }

    /**
     * {@code window} for a replay that writes its snapshot: its start's free blocks given the stale requested size
     * the recorded end state shows for their objects, where the rebuild's own rule cannot follow them; else
     * {@code window} itself.
     *
     * <p>Only a model that can unmap pages needs it: under expandable segments, in a window with a release run (the
     * model unmaps only in an {@code empty_cache} op, which a run of {@code segment_unmap} or {@code segment_free}
     * entries compiles to). Elsewhere a start free block's object survives the window only as the free block ending
     * where it ended, which the rebuild reads already, and {@code replay --check} without a snapshot reads no free
     * block's requested size, so it never pays for this second play.
     *
     * <p>The window is played once from the marked start (an uncounted model, no trace written). Where the model ends
     * with a free block holding the mark of start block k and the recording's end state has a free block of the same
     * address and size, k gets that block's recorded requested size. Marks win over the rebuild's value: a start
     * block's value shows in the written snapshot only on the block its mark reaches, so the recorded value there is
     * the one that writes the recorded block; where the replay is exact the mark follows the object as PyTorch's did,
     * so it is the true value; and where the two differ the rebuild's rule read another object (the window unmapped
     * the start block's pages, and a block made since ends where it ended) or the replay drifted.
     *
     * @param totalMemory the device memory the replay assumes (it sizes expandable reservations)
     */
    static OracleWindow withRecordedStaleSizes(
            TraceSnapshot snapshot, OracleWindow window, AllocatorConfig config, long totalMemory) {
        if (!config.expandableSegments() || !hasReleaseRun(window)) {
            return window;
        }
        FreeBlockMarks marks = of(window.start());
        if (marks.startFree.isEmpty()) {
            return window;
        }
        OracleWindow markedWindow = OracleWindow.prepare(snapshot, window.device(), marks.start());
        DeviceReplay replay = new DeviceReplay(markedWindow, config, totalMemory, false);
        replay.run(ProgressListener.NONE, 0, markedWindow.trace().size());
        Map<Long, BlockInfo> recordedFree = new HashMap<>();
        for (SegmentInfo seg : snapshot.segmentsOf(window.device())) {
            for (BlockInfo b : seg.blocks()) {
                if (b.state() == BlockState.INACTIVE && b.has(BlockInfo.REQUESTED_SIZE) && b.requestedSize() >= 0) {
                    recordedFree.put(b.address(), b);
                }
            }
        }
        Map<Long, Long> recordedByStartAddress = new HashMap<>();
        replay.model().visitSegments(new AllocatorInternals.SegmentVisitor() {
            @Override
            public void segment(long address, long stream, Pool pool, boolean expandable) {}

            @Override
            public void block(long address, long size, long requestedSize, BlockState state) {
                BlockInfo start = marks.startBlock(requestedSize);
                BlockInfo recorded = recordedFree.get(address);
                if (state == BlockState.INACTIVE && start != null && recorded != null && recorded.size() == size) {
                    recordedByStartAddress.put(start.address(), recorded.requestedSize());
                }
            }
        });
        if (recordedByStartAddress.isEmpty()) {
            return window;
        }
        List<SegmentInfo> segments = withFreeBlocks(
                window.start(), b -> recordedByStartAddress.getOrDefault(b.address(), b.requestedSize()));
        return OracleWindow.prepare(snapshot, window.device(), withSegments(window.start(), segments));
    }

    /** Whether the window's recorded driver calls include a release ({@code segment_free}, {@code segment_unmap}). */
    private static boolean hasReleaseRun(OracleWindow window) {
        EntryFields fields = EntryFields.of(window.trace());
        for (int call : window.recorded().calls) {
            if (WindowStreams.isRelease(fields.action(call))) {
                return true;
            }
        }
        return false;
    }

    /** The segments of {@code start} with each free block's requested size {@code size} says, the rest as they are. */
    private static List<SegmentInfo> withFreeBlocks(WindowStart start, ToLongFunction<BlockInfo> size) {
        List<SegmentInfo> segments = new ArrayList<>(start.segments().size());
        for (SegmentInfo seg : start.segments()) {
            List<BlockInfo> blocks = new ArrayList<>(seg.blocks().size());
            for (BlockInfo b : seg.blocks()) {
                blocks.add(
                        b.state() == BlockState.INACTIVE
                                ? BlockInfo.of(b.address(), b.size(), size.applyAsLong(b), b.state())
                                : b);
            }
            segments.add(SegmentInfo.ofBlocks(
                    seg.device(), seg.address(), seg.stream(), seg.pool(), seg.expandable(), List.copyOf(blocks)));
        }
        return List.copyOf(segments);
    }

    /** {@code start} with {@code segments} in place of its own (the same ranges and live blocks). */
    private static WindowStart withSegments(WindowStart start, List<SegmentInfo> segments) {
        return new WindowStart(
                start.device(),
                segments,
                start.preWindowFreed(),
                start.inferredSizes(),
                start.frees(),
                start.segmentAllocBeforeWindow(),
                start.reservationsMadeInWindow(),
                start.reservationReach(),
                start.reservationFloor());
    }
}
