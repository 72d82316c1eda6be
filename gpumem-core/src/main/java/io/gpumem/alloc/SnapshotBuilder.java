package io.gpumem.alloc;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.history.BlockInfo;
import io.gpumem.history.BlockState;
import io.gpumem.history.Frame;
import io.gpumem.history.MemorySnapshot;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.jspecify.annotations.Nullable;

/**
 * Builds {@link MemorySnapshot}s the way PyTorch's {@code snapshot()} does (allocator.md §10): every block is visited
 * (free blocks of both pools, allocated blocks, blocks pending on events); each block that starts a segment
 * (no prev, or an unmapped prev) opens a reported segment that runs over the following mapped blocks, so an
 * expandable segment shows one segment per contiguous mapped run and unmapped space never appears. Segments
 * are sorted by address and a {@code snapshot} trace entry (size = total active bytes) is recorded after the
 * trace was copied, so it appears in the next snapshot.
 */
final class SnapshotBuilder {
    private SnapshotBuilder() {}

    static MemorySnapshot snapshot(AllocatorCore core) {
        List<TraceEntry> trace = core.trace.entries();
        List<SegmentInfo> segments = segments(core);
        return new MemorySnapshot(segments, List.of(trace), allocatorSettings(core.config, core.expandableEnabled()));
    }

    /** Blocks freed by the user but waiting on events, each once. */
    static Set<Block> pendingBlocks(AllocatorCore core) {
        Set<Block> out = Collections.newSetFromMap(new IdentityHashMap<>());
        for (ArrayDeque<StreamEvents.Pending> q : core.events.queues.values()) {
            for (StreamEvents.Pending p : q) {
                out.add(p.block());
            }
        }
        return out;
    }

    /** Every mapped block: free ones of both pools, allocated ones and pending ones. */
    static List<Block> allMappedBlocks(AllocatorCore core) {
        List<Block> all = new ArrayList<>(core.allocatedBlocks().size() * 2 + 16);
        all.addAll(core.smallBlocks.blocks.toList());
        all.addAll(core.largeBlocks.blocks.toList());
        core.allocatedBlocks().forEach(all::add);
        all.addAll(pendingBlocks(core));
        return all;
    }

    static List<SegmentInfo> segments(AllocatorCore core) {
        int device = core.device.index();
        long totalActive = 0;
        List<SegmentInfo> result = new ArrayList<>();
        for (Block head : allMappedBlocks(core)) {
            if (!startsSegment(head)) {
                continue;
            }
            List<BlockInfo> blocks = new ArrayList<>();
            long address = head.ptr;
            long at = address;
            for (Block b = head; b != null && b.mapped; b = b.next) {
                blocks.add(new BlockInfo(at, b.size, b.requestedSize, state(b), frames(b.contextWhenAllocated)));
                at += b.size;
            }
            SegmentInfo segment = SegmentInfo.ofBlocks(
                    device,
                    address,
                    head.stream,
                    head.pool.kind,
                    head.expandable != null,
                    frames(head.contextWhenSegmentAllocated),
                    blocks);
            totalActive += segment.activeSize();
            result.add(segment);
        }
        result.sort((a, b) -> Long.compareUnsigned(a.address(), b.address()));
        core.trace.record(TraceAction.SNAPSHOT, 0, totalActive, 0, null);
        return List.copyOf(result);
    }

    /**
     * Reports the segments {@link #segments} would build, each followed by its blocks, in no particular order:
     * nothing is built and nothing is recorded in the trace (a replay compares its end state this way).
     */
    static void visit(AllocatorCore core, AllocatorInternals.SegmentVisitor visitor) {
        // The blocks of allMappedBlocks, in its order, walked where they lie instead of copied into a list first
        // (the copy was a third of a replay's end-state comparison). Nothing here changes the allocator.
        SizeOrderedBlocks small = core.smallBlocks.blocks;
        for (Block b = small.first(); b != null; b = small.next(b)) {
            visitSegmentAt(b, visitor);
        }
        SizeOrderedBlocks large = core.largeBlocks.blocks;
        for (Block b = large.first(); b != null; b = large.next(b)) {
            visitSegmentAt(b, visitor);
        }
        core.allocatedBlocks().forEach(b -> visitSegmentAt(b, visitor));
        if (!core.events.queues.isEmpty()) {
            for (Block b : pendingBlocks(core)) {
                visitSegmentAt(b, visitor);
            }
        }
    }

    /** Reports the segment {@code head} opens, block by block; nothing when it opens none. */
    private static void visitSegmentAt(Block head, AllocatorInternals.SegmentVisitor visitor) {
        if (!startsSegment(head)) {
            return;
        }
        visitor.segment(head.ptr, head.stream, head.pool.kind, head.expandable != null);
        long at = head.ptr;
        for (Block b = head; b != null && b.mapped; b = b.next) {
            visitor.block(at, b.size, b.requestedSize, state(b));
            at += b.size;
        }
    }

    /** Whether a mapped block opens a reported segment: no predecessor, or an unmapped one. */
    private static boolean startsSegment(Block b) {
        return b.prev == null || !b.prev.mapped;
    }

    private static BlockState state(Block b) {
        if (b.allocated) {
            return BlockState.ACTIVE_ALLOCATED;
        }
        return b.eventCount > 0 || b.hasStreamUses() ? BlockState.ACTIVE_PENDING_FREE : BlockState.INACTIVE;
    }

    private static List<Frame> frames(@Nullable List<Frame> f) {
        return f == null ? List.of() : f;
    }

    /** {@code allocator_settings} with the keys and order of PyTorch 2.5's snapshot. */
    static Map<String, Object> allocatorSettings(AllocatorConfig c, boolean expandable) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("PYTORCH_CUDA_ALLOC_CONF", c.raw());
        m.put("max_split_size", c.maxSplitSizeReported());
        m.put("garbage_collection_threshold", c.garbageCollectionThreshold());
        m.put("expandable_segments", expandable);
        m.put("pinned_num_register_threads", (long) c.pinnedNumRegisterThreads());
        m.put("release_lock_on_cudamalloc", c.releaseLockOnCudaMalloc());
        m.put("pinned_use_cuda_host_register", c.pinnedUseCudaHostRegister());
        Map<String, Long> roundup = new LinkedHashMap<>();
        int[] table = c.roundupPower2DivisionsTable();
        long key = 1;
        for (int v : table) {
            roundup.put(Long.toString(key), (long) v);
            key *= 2;
        }
        m.put("roundup_power2_divisions", Collections.unmodifiableMap(roundup));
        return Collections.unmodifiableMap(m);
    }
}
