package io.gpumem.plan;

import java.util.Arrays;

/**
 * The compressed time axis of a set of buffers: the distinct lifetime ends, sorted, cut time into segments
 * (segment s is [points[s], points[s + 1])), and each buffer lives over the segments [segLo, segHi). Nothing
 * changes inside a segment, so the peak live bytes, the planner's lower bound, is the highest per-segment sum.
 * Built with one primitive sort of packed (time, end) keys, or, when the clock's span is too wide to pack, a sort
 * and binary searches: O(m log m) time, O(m) memory. Design notes: offset-planner.md §2.
 */
final class TimeAxis {

    /** Number of segments (at least 1). */
    final int segments;

    final int[] segLo;
    final int[] segHi;

    /** @param lower lifetimes [lower, upper) of buffers, lower below upper */
    TimeAxis(long[] lower, long[] upper) {
        int m = lower.length;
        segLo = new int[m];
        segHi = new int[m];
        long min = Long.MAX_VALUE;
        long max = Long.MIN_VALUE;
        for (int u = 0; u < m; u++) {
            min = Math.min(min, lower[u]);
            max = Math.max(max, upper[u]);
        }
        int bits = 64 - Long.numberOfLeadingZeros(Math.max(1, 2L * m));
        segments = m > 0 && max - min >= 0 && max - min < 1L << (62 - bits)
                ? packed(lower, upper, min, bits)
                : searched(lower, upper);
    }

    /** One sort of (time − min, end) keys: ends at one time get one point index. */
    private int packed(long[] lower, long[] upper, long min, int bits) {
        int m = lower.length;
        long[] keys = new long[2 * m];
        for (int u = 0; u < m; u++) {
            keys[2 * u] = (lower[u] - min) << bits | 2L * u;
            keys[2 * u + 1] = (upper[u] - min) << bits | 2L * u + 1;
        }
        Arrays.sort(keys);
        long mask = (1L << bits) - 1;
        int point = -1;
        long time = -1;
        for (long k : keys) {
            long t = k >>> bits;
            if (t != time) {
                time = t;
                point++;
            }
            int end = (int) (k & mask);
            if ((end & 1) == 0) {
                segLo[end >> 1] = point;
            } else {
                segHi[end >> 1] = point;
            }
        }
        return Math.max(1, point);
    }

    /** Distinct times sorted, each end found by binary search (times too far apart to pack). */
    private int searched(long[] lower, long[] upper) {
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
        for (int u = 0; u < m; u++) {
            segLo[u] = Arrays.binarySearch(times, 0, t, lower[u]);
            segHi[u] = Arrays.binarySearch(times, 0, t, upper[u]);
        }
        return Math.max(1, t - 1);
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

    /** Buffers live at an average segment (segments weighted alike, not by their length in time). */
    double meanLive() {
        long total = 0;
        for (int u = 0; u < segLo.length; u++) {
            total += segHi[u] - segLo[u];
        }
        return (double) total / segments;
    }
}
