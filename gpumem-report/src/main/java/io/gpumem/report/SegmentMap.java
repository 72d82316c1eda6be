package io.gpumem.report;

import io.gpumem.history.BlockInfo;
import io.gpumem.history.BlockState;
import io.gpumem.history.SegmentInfo;
import io.gpumem.trace.analysis.MemoryState;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * One segment map of the report: the segments of a {@link MemoryState} with, for each allocated block, the
 * site that asked for it and its lifetime (alloc entry, free entry), and the largest free block.
 *
 * <p>Invariants: {@code blockInfo.get(s)[b]} holds {site, allocated at, freed at} for block b of segment s
 * (site −1 for a free block; entries −1 when before the trace or never); {@code largestSegment} and
 * {@code largestBlock} locate the largest inactive block, both −1 when none is free.
 */
record SegmentMap(String title, MemoryState state, List<int[][]> blockInfo, int largestSegment, int largestBlock) {

    /**
     * Attributes the blocks of {@code state} using the blocks live at that moment ({@code live}: by address, {site,
     * alloc entry ({@link Timeline#BEFORE} for blocks older than the trace), entry that frees it}, as
     * {@link Timeline#lifetimesAfter} gives them).
     */
    static SegmentMap of(String title, MemoryState state, Timeline timeline, Map<Long, int[]> live) {
        List<int[][]> info = new ArrayList<>();
        int largestSegment = -1;
        int largestBlock = -1;
        long largestSize = -1;
        List<SegmentInfo> segments = state.segments();
        for (int s = 0; s < segments.size(); s++) {
            List<BlockInfo> blocks = segments.get(s).blocks();
            int[][] rows = new int[blocks.size()][];
            for (int b = 0; b < blocks.size(); b++) {
                BlockInfo blk = blocks.get(b);
                if (blk.state() == BlockState.INACTIVE) {
                    rows[b] = new int[] {-1, -1, -1};
                    if (blk.size() > largestSize) {
                        largestSize = blk.size();
                        largestSegment = s;
                        largestBlock = b;
                    }
                    continue;
                }
                int[] at = live.get(blk.address());
                if (at == null || at[1] == Timeline.BEFORE) {
                    long[] start = timeline.startBlocks.get(blk.address());
                    int site = start != null ? (int) start[1] : timeline.beforeSite;
                    Integer freed = timeline.startFreedAt.get(blk.address());
                    rows[b] = new int[] {site, -1, freed == null ? -1 : freed};
                } else {
                    rows[b] = at.clone();
                }
            }
            info.add(rows);
        }
        return new SegmentMap(title, state, info, largestSegment, largestBlock);
    }
}
