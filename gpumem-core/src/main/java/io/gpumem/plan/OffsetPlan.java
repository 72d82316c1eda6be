package io.gpumem.plan;

/**
 * The planner's answer for one {@link LifetimeProblem}: an offset per buffer (in the problem's buffer order),
 * the planned peak (highest offset + placed size), the lower bound it is measured against and how it was found.
 * Design notes: offset-planner.md §1.3.
 */
public record OffsetPlan(LifetimeProblem problem, long[] offsets, long plannedPeak, long peakLive, long solveNanos,
                         String method, int improvementRounds) {

    /** Planned peak over peak live bytes (1.0 = optimal); 1.0 for an empty problem. */
    public double ratio() {
        return peakLive == 0 ? 1.0 : (double) plannedPeak / peakLive;
    }

    public long offset(int buffer) {
        return offsets[buffer];
    }
}
