package io.gpumem.plan;

import java.util.Arrays;

/**
 * The compressed time axis of a set of buffers: the distinct lifetime ends, sorted, cut time into segments
 * (segment s is [points[s], points[s + 1])), and each buffer lives over the segments [segLo, segHi). Nothing
 * changes inside a segment, so the peak live bytes, the planner's lower bound, is the highest per-segment sum.
 * Built with primitive sorts and binary searches, O(m log m) time, O(m) memory.
 */
final class TimeAxis {

    /** Number of segments (at least 1). */
    final int segments;
    final int[] segLo;
    final int[] segHi;

    /** @param lower lifetimes [lower, upper) of buffers, lower below upper */
    TimeAxis(long[] lower, long[] upper) {
        int m = lower.length;
        long[] times = new long[2 * m];
        System.arraycopy(lower, 0, times, 0, m);
        System.arraycopy(upper, 0, times, m, m);
        Arrays.sort(times);
        int t = 0;
        for (int i = 0; i < times.length; i++) {
            if (i == 0 || times[i] != times[i - 1]) {
                times[t++] = times[i];
            }
        }
        segments = Math.max(1, t - 1);
        segLo = new int[m];
        segHi = new int[m];
        for (int u = 0; u < m; u++) {
            segLo[u] = Arrays.binarySearch(times, 0, t, lower[u]);
            segHi[u] = Arrays.binarySearch(times, 0, t, upper[u]);
        }
    }

    /** The most bytes live over one segment, buffer u taking {@code size[u]} over its segments. */
    long peak(long[] size) {
        long[] delta = new long[segments + 1];
        for (int u = 0; u < segLo.length; u++) {
            delta[segLo[u]] += size[u];
            delta[segHi[u]] -= size[u];
        }
        long live = 0;
        long peak = 0;
        for (int s = 0; s < segments; s++) {
            live += delta[s];
            peak = Math.max(peak, live);
        }
        return peak;
    }
}
