package io.gpumem.plan;

import java.util.Arrays;
import org.jspecify.annotations.Nullable;

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
 * height is one range query, stopped as soon as it is known to exceed the lowest lift found so far or to leave no
 * room) and the lowest loaded segment (read at the root); a change to segments [a, b) refreshes their leaves and
 * ancestors, O(b − a + log S). The buffers live over a segment are found by a stabbing query: each buffer is
 * listed at the O(log S) tree nodes that tile its lifetime, so the lists on a leaf's path to the root hold exactly
 * the buffers live there. Each list keeps its unplaced buffers in front (a placement swaps the buffer behind them;
 * undoing it in LIFO order only moves the boundary back), so a node reads only unplaced buffers: O(log S + k) for
 * the k unplaced buffers live at its segment, plus one range query each.
 *
 * <p><b>Control.</b> The search is iterative (an explicit frame stack, no recursion or thread); every change is
 * undone on backtracking from one undo stack. It stops at a node, work (list entries and tree updates counted) or
 * time limit, or, with {@code descentOnly}, at the first frame it would have to backtrack out of; a later call
 * resumes where it stopped. Memory: O(m log S) for the lists; frames O(depth); undo records O(sum of the segments
 * the current path changed), at most the sum of all lifetimes in segments plus one per lift.
 *
 * <p>Design notes: offset-planner.md §4 (branching §4.2, pruning §4.3, data structures §4.4).
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
    // Segment tree, node v at tree[4v ..]: MAX the highest sky in its range, LOW the lowest sky among loaded
    // segments (NONE if none is loaded), LOW_AT the leftmost segment with it; interleaved so that a node's
    // fields, and two siblings, share a cache line.
    private static final int MAX = 0;
    private static final int LOW = 1;
    private static final int LOW_AT = 2;
    private final long[] tree;
    private final int[] coverStart; // per tree node v: its buffers are coverIds[coverStart[v] .. coverStart[v+1])
    private final int[] coverIds;
    private final int[] coverActive; // per tree node: its unplaced buffers are the first coverActive[v] entries
    private final int[] coverEntry; // per list position: which of its buffer's entries sits there
    private final int[] entryStart; // per buffer u: its entries are entryStart[u] .. entryStart[u+1]
    private final int[] entryNode; // per entry: the tree node
    private final int[] entryAt; // per entry: its position in coverIds
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
    private int[] frameCandEnd = new int[256];
    private int[] frameNext = new int[256]; // next candidate index; candEnd = lift next; candEnd + 1 = exhausted
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
        int entries = coverStart[2 * leaves];
        coverIds = new int[entries];
        coverEntry = new int[entries];
        entryStart = new int[m + 1];
        entryNode = new int[entries];
        entryAt = new int[entries];
        coverActive = new int[2 * leaves];
        int[] fill = Arrays.copyOf(coverStart, 2 * leaves);
        int k = 0;
        for (int u = 0; u < m; u++) {
            entryStart[u] = k;
            for (int a = segLo[u] + leaves, b = segHi[u] + leaves; a < b; a >>= 1, b >>= 1) {
                if ((a & 1) == 1) {
                    k = addEntry(u, a++, fill, k);
                }
                if ((b & 1) == 1) {
                    k = addEntry(u, --b, fill, k);
                }
            }
        }
        entryStart[m] = k;
        for (int v = 0; v < 2 * leaves; v++) {
            coverActive[v] = coverCount[v];
        }
        tree = new long[8 * leaves];
        for (int v = 1; v < 2 * leaves; v++) {
            tree[4 * v + LOW] = NONE;
        }
        for (int s = 0; s < segments; s++) {
            setLeaf(s);
        }
        for (int v = leaves - 1; v >= 1; v--) {
            pull(v);
        }
        offset = new long[m];
    }

    private int addEntry(int u, int node, int[] fill, int k) {
        int at = fill[node]++;
        coverIds[at] = u;
        coverEntry[at] = k;
        entryNode[k] = node;
        entryAt[k] = at;
        return k + 1;
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
    long @Nullable [] search(long nodeLimit, long workLimit, long deadlineNanos, boolean descentOnly) {
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
            if (nodes >= nodeLimit || work >= workLimit || ((nodes & 255) == 0 && System.nanoTime() > deadlineNanos)) {
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
        int low = (int) tree[4 + LOW_AT];
        long level = sky[low];
        long lift = NONE;
        int start = depth == 0 ? 0 : frameCandEnd[depth - 1];
        int end = start;
        for (int v = low + leaves; v >= 1; v >>= 1) {
            work += coverActive[v] + 1;
            for (int i = coverStart[v], e = i + coverActive[v]; i < e; i++) {
                int u = coverIds[i];
                long tooHigh = capacity - size[u] + 1;
                // The landing height matters only up to the lowest lift so far or to where u no longer fits.
                long c = rangeMax(segLo[u], segHi[u], Math.min(lift, tooHigh));
                work += 4;
                if (c >= tooHigh) {
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
        placedCount++;
        deactivate(u);
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

    /** Moves u out of the unplaced front of each of its lists (swapping it with the last unplaced entry). */
    private void deactivate(int u) {
        for (int k = entryStart[u]; k < entryStart[u + 1]; k++) {
            int v = entryNode[k];
            int at = entryAt[k];
            int last = coverStart[v] + --coverActive[v];
            int w = coverEntry[last];
            coverIds[at] = coverIds[last];
            coverEntry[at] = w;
            entryAt[w] = at;
            coverIds[last] = u;
            coverEntry[last] = k;
            entryAt[k] = last;
        }
        work += entryStart[u + 1] - entryStart[u];
    }

    /** Lifts segment {@code s} to {@code height}: the space below is proved empty. */
    private void raise(int s, long height) {
        violated = height + load[s] > capacity;
        reserveUndo(4);
        undo[undoTop++] = sky[s];
        sky[s] = height;
        undo[undoTop++] = s;
        undo[undoTop++] = s + 1L;
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
                placedCount--;
                // LIFO: the lists were not touched at or past u's slots since u left them, so u is back in.
                for (int k = entryStart[u]; k < entryStart[u + 1]; k++) {
                    coverActive[entryNode[k]]++;
                }
                long sz = size[u];
                for (int s = a; s < b; s++) {
                    load[s] += sz;
                }
            }
            refresh(a, b);
        }
    }

    private void setLeaf(int s) {
        int at = 4 * (s + leaves);
        tree[at + MAX] = sky[s];
        tree[at + LOW] = load[s] > 0 ? sky[s] : NONE;
        tree[at + LOW_AT] = s;
    }

    private void pull(int v) {
        long[] t = tree;
        int at = 4 * v;
        int l = 8 * v;
        int r = l + 4;
        t[at + MAX] = Math.max(t[l + MAX], t[r + MAX]);
        int from = t[l + LOW] <= t[r + LOW] ? l : r;
        t[at + LOW] = t[from + LOW];
        t[at + LOW_AT] = t[from + LOW_AT];
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

    /**
     * Highest sky over segments [a, b), or some value at least {@code enough} once one is seen: a plain scan for
     * short ranges, the tree for long ones.
     */
    private long rangeMax(int a, int b, long enough) {
        long best = 0;
        if (b - a <= 16) {
            for (int s = a; s < b && best < enough; s++) {
                best = Math.max(best, sky[s]);
            }
            return best;
        }
        for (a += leaves, b += leaves; a < b && best < enough; a >>= 1, b >>= 1) {
            if ((a & 1) == 1) {
                best = Math.max(best, tree[4 * a++ + MAX]);
            }
            if ((b & 1) == 1) {
                best = Math.max(best, tree[4 * --b + MAX]);
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
        frameCandEnd = Arrays.copyOf(frameCandEnd, n);
        frameNext = Arrays.copyOf(frameNext, n);
    }

    private void reserveUndo(int n) {
        if (undoTop + n > undo.length) {
            undo = Arrays.copyOf(undo, Math.max(2 * undo.length, undoTop + n));
        }
    }
}
