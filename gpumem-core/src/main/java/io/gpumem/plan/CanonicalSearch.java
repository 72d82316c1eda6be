package io.gpumem.plan;

import java.util.Arrays;

/**
 * Depth-first search for a plan whose peak is at most a capacity {@code C}, filling a skyline from its lowest
 * point upwards (the strip-packing view of the problem: time is the fixed horizontal position of each buffer,
 * the offset its height). Its first descent, taken without backtracking, is itself a strong greedy ("fill the
 * lowest gap with the largest buffer that rests there"): on the shared traces it reaches the lower bound where
 * every order-based greedy stalls, so the planner runs it early.
 *
 * <p><b>State.</b> Time is compressed to the segments between distinct lifetime ends. {@code sky[s]} is the height
 * already decided over segment s (placed buffers, or space proved empty); {@code load[s]} the bytes of unplaced
 * buffers live there. A buffer u lands at {@code cand(u)}, the highest {@code sky} over its lifetime.
 *
 * <p><b>Branching.</b> Take the lowest segment that still has load (leftmost among equals). In any plan
 * consistent with the decisions so far, either one of the unplaced buffers live there sits exactly at its
 * bottom, which is possible only for those with {@code cand == sky}, tried largest first (identical buffers
 * once), or none does, and the space there stays empty up to the lowest landing height of the others: the
 * segment is lifted to it. Every plan that has buffers resting on one another or on 0 (which any plan can be
 * turned into by letting buffers fall) is reachable, so the search is complete given time.
 *
 * <p><b>Pruning.</b> Unplaced buffers live over s all land at or above {@code sky[s]}, so a node fails when
 * {@code sky[s] + load[s] > C} for a segment it changed, or when a buffer's landing height plus its size exceeds C.
 *
 * <p><b>Cost per node.</b> One segment tree over the segments keeps the highest sky of each range (a landing
 * height is one range query) and the lowest loaded segment (read at the root); a change to segments [a, b)
 * refreshes their leaves and ancestors, O(b − a + log S). The buffers live over a segment are found by a stabbing
 * query: each buffer is listed at the O(log S) tree nodes that tile its lifetime, so the lists on a leaf's path to
 * the root hold exactly the buffers live there. The search is iterative (an explicit frame stack, no recursion or
 * thread), every change is undone on backtracking from one undo stack, and it stops at a node or time budget.
 * Memory: O(m log S) for the lists, O(depth) for the frames and undo records.
 */
final class CanonicalSearch {

    private static final long NONE = Long.MAX_VALUE;

    private final int m;
    private final long[] size;
    private final int[] segLo;
    private final int[] segHi;
    private final int leaves;
    private final long capacity;
    private final long[] sky;
    private final long[] load;
    private final long[] treeMax;       // highest sky in the node's range
    private final long[] treeLow;       // lowest sky among loaded segments in the range, NONE if none is loaded
    private final int[] treeLowAt;      // leftmost segment with that sky
    private final int[] coverStart;     // per tree node: its buffers are coverIds[coverStart[v] .. coverStart[v+1])
    private final int[] coverIds;
    private final boolean[] placed;
    private final long[] offset;
    private int placedCount;
    private boolean violated;

    private long[] undo = new long[1 << 12];
    private int undoTop;

    // Frames of the depth-first search, by depth; depth is the open frame, −1 once the search is over.
    private int depth;
    private boolean started;
    private int[] frameLow = new int[256];
    private long[] frameLift = new long[256];
    private int[] frameMark = new int[256];
    private int[] frameCandStart = new int[256];
    private int[] frameCandEnd = new int[256];
    private int[] frameNext = new int[256];     // next candidate index; candEnd = lift next; candEnd + 1 = exhausted
    private int[] cands = new int[1024];

    private long nodes;
    private long work;
    private boolean outOfBudget;

    /**
     * @param size placed sizes of the live buffers (all positive)
     * @param axis their lifetimes on the compressed time axis
     */
    CanonicalSearch(long[] size, TimeAxis axis, long capacity) {
        this.m = size.length;
        this.size = size;
        this.capacity = capacity;
        int segments = axis.segments;
        int l = 1;
        while (l < segments) {
            l <<= 1;
        }
        leaves = l;
        sky = new long[segments];
        load = new long[segments];
        segLo = axis.segLo;
        segHi = axis.segHi;
        int[] coverCount = new int[2 * leaves + 1];
        for (int u = 0; u < m; u++) {
            for (int s = segLo[u]; s < segHi[u]; s++) {
                load[s] += size[u];
            }
            for (int a = segLo[u] + leaves, b = segHi[u] + leaves; a < b; a >>= 1, b >>= 1) {
                if ((a & 1) == 1) {
                    coverCount[a++]++;
                }
                if ((b & 1) == 1) {
                    coverCount[--b]++;
                }
            }
        }
        coverStart = new int[2 * leaves + 1];
        for (int v = 0; v < 2 * leaves; v++) {
            coverStart[v + 1] = coverStart[v] + coverCount[v];
        }
        coverIds = new int[coverStart[2 * leaves]];
        int[] fill = Arrays.copyOf(coverStart, 2 * leaves);
        for (int u = 0; u < m; u++) {
            for (int a = segLo[u] + leaves, b = segHi[u] + leaves; a < b; a >>= 1, b >>= 1) {
                if ((a & 1) == 1) {
                    coverIds[fill[a++]++] = u;
                }
                if ((b & 1) == 1) {
                    coverIds[fill[--b]++] = u;
                }
            }
        }
        treeMax = new long[2 * leaves];
        treeLow = new long[2 * leaves];
        treeLowAt = new int[2 * leaves];
        Arrays.fill(treeLow, NONE);
        for (int s = 0; s < segments; s++) {
            setLeaf(s);
        }
        for (int v = leaves - 1; v >= 1; v--) {
            pull(v);
        }
        placed = new boolean[m];
        offset = new long[m];
    }

    /**
     * Searches on from where the last call stopped. Returns the offsets of a plan with peak ≤ capacity, or null
     * when none exists ({@link #exhausted()}), the budget ran out ({@link #outOfBudget()}), or, with
     * {@code descentOnly}, when the first descent meets a dead end (a later call may resume with backtracking).
     *
     * @param nodeLimit   stop once this many nodes (in all calls together) have been visited
     * @param workLimit   stop once this much work (list entries read, tree updates; all calls) has been done
     * @param descentOnly never backtrack out of a frame: the greedy first descent
     */
    long[] search(long nodeLimit, long workLimit, long deadlineNanos, boolean descentOnly) {
        outOfBudget = false;
        if (depth < 0) {
            return null;
        }
        if (!started) {
            started = true;
            if (m == 0) {
                depth = -1;
                return new long[0];
            }
            for (long l : load) {
                if (l > capacity) {
                    depth = -1;
                    return null;
                }
            }
            if (!evaluate(0)) {
                depth = -1;
                return null;
            }
        }
        while (depth >= 0) {
            if (nodes >= nodeLimit || work >= workLimit
                    || ((nodes & 255) == 0 && System.nanoTime() > deadlineNanos)) {
                outOfBudget = true;
                return null;
            }
            if (!applyNext(depth)) {
                if (descentOnly) {
                    return null;
                }
                depth--;
                if (depth >= 0) {
                    undoTo(frameMark[depth]);
                }
                continue;
            }
            nodes++;
            if (violated) {
                undoTo(frameMark[depth]);
                continue;
            }
            if (placedCount == m) {
                depth = -1;
                return offset.clone();
            }
            depth++;
            if (!evaluate(depth)) {
                depth--;
                undoTo(frameMark[depth]);
            }
        }
        return null;
    }

    /** True once the search is over: it returned a plan, or proved that none within the capacity exists. */
    boolean exhausted() {
        return depth < 0;
    }

    boolean outOfBudget() {
        return outOfBudget;
    }

    long nodes() {
        return nodes;
    }

    long work() {
        return work;
    }

    /**
     * Opens the frame at {@code depth} on the current state: finds the lowest loaded segment and its candidates.
     * Returns false when the node fails (some buffer live there can no longer fit under the capacity).
     */
    private boolean evaluate(int depth) {
        ensureFrames(depth);
        int low = treeLowAt[1];
        long level = sky[low];
        long lift = NONE;
        int start = depth == 0 ? 0 : frameCandEnd[depth - 1];
        int end = start;
        for (int v = low + leaves; v >= 1; v >>= 1) {
            work += coverStart[v + 1] - coverStart[v] + 1;
            for (int i = coverStart[v], e = coverStart[v + 1]; i < e; i++) {
                int u = coverIds[i];
                if (placed[u]) {
                    continue;
                }
                long c = rangeMax(segLo[u], segHi[u]);
                work += 4;
                if (c + size[u] > capacity) {
                    return false;
                }
                if (c != level) {
                    lift = Math.min(lift, c);
                    continue;
                }
                if (end == cands.length) {
                    cands = Arrays.copyOf(cands, 2 * end);
                }
                // Insertion by size descending, then longer lifetime; identical buffers are kept once.
                int k = end;
                boolean duplicate = false;
                while (k > start) {
                    int w = cands[k - 1];
                    if (size[w] == size[u] && segLo[w] == segLo[u] && segHi[w] == segHi[u]) {
                        duplicate = true;
                        break;
                    }
                    if (size[w] > size[u] || (size[w] == size[u] && segHi[w] - segLo[w] >= segHi[u] - segLo[u])) {
                        break;
                    }
                    k--;
                }
                if (duplicate || sameInPrefix(u, start, k)) {
                    continue;
                }
                System.arraycopy(cands, k, cands, k + 1, end - k);
                cands[k] = u;
                end++;
            }
        }
        frameLow[depth] = low;
        frameLift[depth] = lift;
        frameMark[depth] = undoTop;
        frameCandStart[depth] = start;
        frameCandEnd[depth] = end;
        frameNext[depth] = start;
        return true;
    }

    private boolean sameInPrefix(int u, int start, int k) {
        for (int i = k - 1; i >= start && size[cands[i]] == size[u]; i--) {
            int w = cands[i];
            if (segLo[w] == segLo[u] && segHi[w] == segHi[u]) {
                return true;
            }
        }
        return false;
    }

    /** Applies the frame's next alternative (a placement, then the lift); false when none is left. */
    private boolean applyNext(int depth) {
        int next = frameNext[depth];
        int end = frameCandEnd[depth];
        int low = frameLow[depth];
        if (next < end) {
            frameNext[depth] = next + 1;
            place(cands[next], sky[low]);
            return true;
        }
        if (next == end && frameLift[depth] != NONE) {
            frameNext[depth] = next + 1;
            raise(low, frameLift[depth]);
            return true;
        }
        return false;
    }

    private void place(int u, long at) {
        violated = false;
        placed[u] = true;
        placedCount++;
        offset[u] = at;
        int a = segLo[u];
        int b = segHi[u];
        long top = at + size[u];
        long sz = size[u];
        reserveUndo(b - a + 3);
        long[] undo = this.undo;
        for (int s = a; s < b; s++) {
            undo[undoTop++] = sky[s];
            sky[s] = top;
            long l = load[s] - sz;
            load[s] = l;
            if (l > 0 && top + l > capacity) {
                violated = true;
            }
        }
        undo[undoTop++] = a;
        undo[undoTop++] = b;
        undo[undoTop++] = u;
        refresh(a, b);
    }

    /** Lifts segment {@code s} to {@code height}: the space below is proved empty. */
    private void raise(int s, long height) {
        violated = height + load[s] > capacity;
        reserveUndo(4);
        undo[undoTop++] = sky[s];
        sky[s] = height;
        undo[undoTop++] = s;
        undo[undoTop++] = s + 1;
        undo[undoTop++] = -1;
        refresh(s, s + 1);
    }

    /** Undoes every change above {@code mark}. */
    private void undoTo(int mark) {
        while (undoTop > mark) {
            int u = (int) undo[--undoTop];
            int b = (int) undo[--undoTop];
            int a = (int) undo[--undoTop];
            for (int s = b - 1; s >= a; s--) {
                sky[s] = undo[--undoTop];
            }
            if (u >= 0) {
                placed[u] = false;
                placedCount--;
                long sz = size[u];
                for (int s = a; s < b; s++) {
                    load[s] += sz;
                }
            }
            refresh(a, b);
        }
    }

    private void setLeaf(int s) {
        int v = s + leaves;
        treeMax[v] = sky[s];
        treeLow[v] = load[s] > 0 ? sky[s] : NONE;
        treeLowAt[v] = s;
    }

    private void pull(int v) {
        int l = 2 * v;
        int r = l + 1;
        treeMax[v] = Math.max(treeMax[l], treeMax[r]);
        if (treeLow[l] <= treeLow[r]) {
            treeLow[v] = treeLow[l];
            treeLowAt[v] = treeLowAt[l];
        } else {
            treeLow[v] = treeLow[r];
            treeLowAt[v] = treeLowAt[r];
        }
    }

    /** Recomputes the leaves of segments [a, b) and their ancestors. */
    private void refresh(int a, int b) {
        work += b - a + 8;
        for (int s = a; s < b; s++) {
            setLeaf(s);
        }
        int lo = (a + leaves) >> 1;
        int hi = (b - 1 + leaves) >> 1;
        while (lo >= 1) {
            for (int v = lo; v <= hi; v++) {
                pull(v);
            }
            lo >>= 1;
            hi >>= 1;
        }
    }

    /** Highest sky over segments [a, b): a plain scan for short ranges, the tree for long ones. */
    private long rangeMax(int a, int b) {
        long best = 0;
        if (b - a <= 16) {
            for (int s = a; s < b; s++) {
                best = Math.max(best, sky[s]);
            }
            return best;
        }
        for (a += leaves, b += leaves; a < b; a >>= 1, b >>= 1) {
            if ((a & 1) == 1) {
                best = Math.max(best, treeMax[a++]);
            }
            if ((b & 1) == 1) {
                best = Math.max(best, treeMax[--b]);
            }
        }
        return best;
    }

    private void ensureFrames(int depth) {
        if (depth < frameLow.length) {
            return;
        }
        int n = 2 * frameLow.length;
        frameLow = Arrays.copyOf(frameLow, n);
        frameLift = Arrays.copyOf(frameLift, n);
        frameMark = Arrays.copyOf(frameMark, n);
        frameCandStart = Arrays.copyOf(frameCandStart, n);
        frameCandEnd = Arrays.copyOf(frameCandEnd, n);
        frameNext = Arrays.copyOf(frameNext, n);
    }

    private void reserveUndo(int n) {
        if (undoTop + n > undo.length) {
            undo = Arrays.copyOf(undo, Math.max(2 * undo.length, undoTop + n));
        }
    }
}
