package io.gpumem.policy;

import io.gpumem.alloc.Pool;
import io.gpumem.history.BlockInfo;
import io.gpumem.history.BlockState;
import io.gpumem.history.MemorySnapshot;
import io.gpumem.history.SegmentInfo;
import io.gpumem.policy.StitchAllocator.Arena;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * A {@link StitchAllocator}'s state as PyTorch snapshot segments, so that {@code _memory_viz.py} and gpumem's own
 * tools read it like the exact allocator's: one segment per run of mapped pages of an arena (an expandable
 * segment in PyTorch's terms), its blocks the allocated or pending blocks inside it (with their requests' stacks)
 * and the free space between them; the trace is the recorded history. Called with the allocator's lock held.
 */
final class StitchSnapshot {

    private StitchSnapshot() {}

    static MemorySnapshot of(StitchAllocator st) {
        List<SegmentInfo> segments = new ArrayList<>();
        IdentityHashMap<Arena, TreeMap<Long, StitchBlock>> held = new IdentityHashMap<>();
        for (StitchBlock b : st.liveBlocks()) {
            held.computeIfAbsent(b.arena(), x -> new TreeMap<>()).put(b.ptr, b);
        }
        for (StitchBlock b : st.pendingFrees) {
            held.computeIfAbsent(b.arena(), x -> new TreeMap<>()).put(b.ptr, b);
        }
        for (Arena a : st.arenas) {
            TreeMap<Long, StitchBlock> inArena = held.getOrDefault(a, new TreeMap<>());
            int p = 0;
            while (p < a.handle.length) {
                if (a.handle[p] == 0) {
                    p++;
                    continue;
                }
                int q = p;
                while (q < a.handle.length && a.handle[q] != 0) {
                    q++;
                }
                long start = a.base + (long) p * st.page;
                long end = a.base + (long) q * st.page;
                List<BlockInfo> blocks = new ArrayList<>();
                long at = start;
                for (StitchBlock b : inArena.subMap(start, end).values()) {
                    if (b.ptr > at) {
                        blocks.add(new BlockInfo(at, b.ptr - at, 0, BlockState.INACTIVE, List.of()));
                    }
                    boolean pending = !st.isLive(b);
                    blocks.add(new BlockInfo(
                            b.ptr,
                            b.size,
                            b.requested,
                            pending ? BlockState.ACTIVE_PENDING_FREE : BlockState.ACTIVE_ALLOCATED,
                            b.frames == null ? List.of() : b.frames));
                    at = b.ptr + b.size;
                }
                if (at < end) {
                    blocks.add(new BlockInfo(at, end - at, 0, BlockState.INACTIVE, List.of()));
                }
                segments.add(SegmentInfo.ofBlocks(
                        st.device.index(), start, Math.max(0, a.stream), Pool.LARGE, true, blocks));
                p = q;
            }
        }
        segments.sort((x, y) -> Long.compareUnsigned(x.address(), y.address()));
        return new MemorySnapshot(segments, List.of(st.history().entries()), Map.of("policy", StitchAllocator.NAME));
    }
}
