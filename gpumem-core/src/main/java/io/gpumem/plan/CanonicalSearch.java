package io.gpumem.plan;

import java.util.Arrays;

/**
 * Depth-first search for a plan whose peak is at most a capacity {@code C}, filling a skyline from its lowest
 * point upwards (the strip-packing view of the problem: time is the fixed horizontal position of each buffer,
 * the offset its height).
 *
 * <p><b>State.</b> Time is compressed to the segments between distinct lifetime ends. {@code sky[s]} is the height
 * already decided over segment s (placed buffers, or space proved empty); {@code load[s]} the bytes of unplaced
 * buffers live there; {@code cand[u]} the highest {@code sky} over u's lifetime, where u would land.
 *
 * <p><b>Branching.</b> Take the lowest segment that still has load (leftmost among equals). In any plan
 * consistent with the decisions so far, either one of the unplaced buffers live there sits exactly at its
 * bottom, which is possible only for those with {@code cand == sky}, tried largest first (identical buffers
 * once), or none does, and the space there stays empty up to the lowest landing height of the others: the
 * segment is lifted to it. Every plan that has buffers resting on one another or on 0 (which any plan can be
 * turned into by letting buffers fall) is reachable, so the search is complete given time.
 *
 * <p><b>Pruning.</b> Unplaced buffers live over s all land at or above {@code sky[s]}, so a node fails when
 * {@code sky[s] + load[s] > C} for some s, or when a buffer's landing height plus its size exceeds C.
 *
 * <p>The search runs on its own thread (recursion as deep as placements plus lifts) and stops at a node or time
 * budget; every change is undone on backtracking through one explicit stack.
 */
final class CanonicalSearch {

    private final int m;
    private final long[] size;
    private final int[] segLo;
    private final int[] segHi;
    private final long capacity;
    private final long[] sky;
    private final long[] load;
    private final long[] cand;
    private final boolean[] placed;
    private final long[] offset;
    private final int[] bySize;
    private long[] undo = new long[1 << 16];
    private int undoTop;
    private long nodes;
    private final long nodeBudget;
    private final long deadline;
    private boolean outOfBudget;

    /**
     * @param size   placed sizes of the live buffers
     * @param lower  lifetimes [lower, upper) of the live buffers (lower below upper)
     */
    CanonicalSearch(long[] size, long[] lower, long[] upper, long capacity, long nodeBudget, long deadlineNanos) {
        this.m = size.length;
        this.size = size;
        this.capacity = capacity;
        this.nodeBudget = nodeBudget;
        this.deadline = deadlineNanos;
        long[] times = new long[2 * m];
        for (int u = 0; u < m; u++) {
            times[2 * u] = lower[u];
            times[2 * u + 1] = upper[u];
        }
        Arrays.sort(times);
        int t = 0;
        for (int i = 0; i < times.length; i++) {
            if (i == 0 || times[i] != times[i - 1]) {
                times[t++] = times[i];
            }
        }
        long[] points = Arrays.copyOf(times, t);
        int segments = Math.max(0, t - 1);
        sky = new long[segments];
        load = new long[segments];
        segLo = new int[m];
        segHi = new int[m];
        for (int u = 0; u < m; u++) {
            segLo[u] = Arrays.binarySearch(points, lower[u]);
            segHi[u] = Arrays.binarySearch(points, upper[u]);
            for (int s = segLo[u]; s < segHi[u]; s++) {
                load[s] += size[u];
            }
        }
        cand = new long[m];
        placed = new boolean[m];
        offset = new long[m];
        Integer[] order = new Integer[m];
        for (int u = 0; u < m; u++) {
            order[u] = u;
        }
        Arrays.sort(order, (a, b) -> {
            int c = Long.compare(size[b], size[a]);
            return c != 0 ? c : Integer.compare(segHi[b] - segLo[b], segHi[a] - segLo[a]);
        });
        bySize = new int[m];
        for (int u = 0; u < m; u++) {
            bySize[u] = order[u];
        }
    }

    /** Offsets of a plan with peak ≤ capacity, or null when the budget ran out or none exists. */
    long[] solve() {
        boolean[] found = {false};
        Thread t = new Thread(null, () -> found[0] = search(0), "canonical-search", 1L << 29);
        t.start();
        try {
            t.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return null;
        }
        return found[0] ? offset.clone() : null;
    }

    long nodes() {
        return nodes;
    }

    boolean outOfBudget() {
        return outOfBudget;
    }

    private boolean search(int placedCount) {
        if (placedCount == m) {
            return true;
        }
        if (++nodes > nodeBudget || ((nodes & 255) == 0 && System.nanoTime() > deadline)) {
            outOfBudget = true;
            return false;
        }
        int low = lowestLoadedSegment();
        if (low < 0) {
            return false;
        }
        long level = sky[low];
        long lift = Long.MAX_VALUE;
        int mark = undoTop;
        int[] tried = null;
        int triedCount = 0;
        for (int u : bySize) {
            if (placed[u] || segLo[u] > low || segHi[u] <= low) {
                continue;
            }
            if (cand[u] + size[u] > capacity) {
                return false;
            }
            if (cand[u] != level) {
                lift = Math.min(lift, cand[u]);
                continue;
            }
            if (sameAsTried(u, tried, triedCount)) {
                continue;
            }
            if (tried == null) {
                tried = new int[4];
            } else if (triedCount == tried.length) {
                tried = Arrays.copyOf(tried, 2 * triedCount);
            }
            tried[triedCount++] = u;
            place(u, level);
            if (search(placedCount + 1)) {
                return true;
            }
            undoTo(mark, u);
            if (outOfBudget) {
                return false;
            }
        }
        // No (other) buffer rests at the bottom of this segment: its space up to the next landing height is empty.
        if (lift == Long.MAX_VALUE) {
            return false;
        }
        raise(low, low + 1, lift);
        if (search(placedCount)) {
            return true;
        }
        undoTo(mark, -1);
        return false;
    }

    /**
     * The lowest segment that still has unplaced load, leftmost among equals; −1 when some segment's load can no
     * longer fit under the capacity.
     */
    private int lowestLoadedSegment() {
        int low = -1;
        long lowSky = Long.MAX_VALUE;
        for (int s = 0; s < sky.length; s++) {
            long l = load[s];
            if (l > 0) {
                long h = sky[s];
                if (h + l > capacity) {
                    return -1;
                }
                if (h < lowSky) {
                    lowSky = h;
                    low = s;
                }
            }
        }
        return low;
    }

    private boolean sameAsTried(int u, int[] tried, int count) {
        for (int i = 0; i < count; i++) {
            int v = tried[i];
            if (size[v] == size[u] && segLo[v] == segLo[u] && segHi[v] == segHi[u]) {
                return true;
            }
        }
        return false;
    }

    private void place(int u, long at) {
        placed[u] = true;
        offset[u] = at;
        for (int s = segLo[u]; s < segHi[u]; s++) {
            load[s] -= size[u];
        }
        raise(segLo[u], segHi[u], at + size[u]);
    }

    /** Sets sky over [lo, hi) to {@code height} (not below it already) and the landing heights it raises. */
    private void raise(int lo, int hi, long height) {
        for (int s = lo; s < hi; s++) {
            push(s);
            push(sky[s]);
            sky[s] = height;
        }
        for (int v = 0; v < m; v++) {
            if (!placed[v] && segLo[v] < hi && lo < segHi[v] && cand[v] < height) {
                push(~v);
                push(cand[v]);
                cand[v] = height;
            }
        }
    }

    /** Undoes every change above {@code mark}, and the placement of {@code u} when u ≥ 0. */
    private void undoTo(int mark, int u) {
        while (undoTop > mark) {
            long old = undo[--undoTop];
            long key = undo[--undoTop];
            if (key < 0) {
                cand[(int) ~key] = old;
            } else {
                sky[(int) key] = old;
            }
        }
        if (u >= 0) {
            placed[u] = false;
            for (int s = segLo[u]; s < segHi[u]; s++) {
                load[s] += size[u];
            }
        }
    }

    private void push(long v) {
        if (undoTop == undo.length) {
            undo = Arrays.copyOf(undo, 2 * undo.length);
        }
        undo[undoTop++] = v;
    }
}
