package io.gpumem.plan;

/**
 * The planner's answer for one {@link LifetimeProblem}: an offset per buffer (in the problem's buffer order),
 * the planned peak (highest offset + placed size), the lower bound it is measured against and how it was found.
 * Design notes: offset-planner.md §1.3.
 *
 * <p>A class rather than a record: a record's equals and hashCode would compare the offsets array by identity.
 * The offsets array is handed over, not copied (a plan can hold millions of buffers): the planner builds it for
 * this plan alone, and {@link #offsets()} callers read it without writing.
 */
public final class OffsetPlan {

    private final LifetimeProblem problem;
    private final long[] offsets;
    private final long plannedPeak;
    private final long peakLive;
    private final long solveNanos;
    private final String method;
    private final int improvementRounds;

    public OffsetPlan(
            LifetimeProblem problem,
            long[] offsets,
            long plannedPeak,
            long peakLive,
            long solveNanos,
            String method,
            int improvementRounds) {
        this.problem = problem;
        this.offsets = offsets;
        this.plannedPeak = plannedPeak;
        this.peakLive = peakLive;
        this.solveNanos = solveNanos;
        this.method = method;
        this.improvementRounds = improvementRounds;
    }

    public LifetimeProblem problem() {
        return problem;
    }

    /** The offset of each buffer, in the problem's buffer order (the plan's own array: read it, never write it). */
    public long[] offsets() {
        return offsets;
    }

    /** Highest offset + placed size over all buffers. */
    public long plannedPeak() {
        return plannedPeak;
    }

    /** The lower bound: the most bytes live at one time. */
    public long peakLive() {
        return peakLive;
    }

    public long solveNanos() {
        return solveNanos;
    }

    /** How the plan was found (the search or order pass that won it); empty for an empty problem. */
    public String method() {
        return method;
    }

    public int improvementRounds() {
        return improvementRounds;
    }

    /** Planned peak over peak live bytes (1.0 = optimal); 1.0 for an empty problem. */
    public double ratio() {
        return peakLive == 0 ? 1.0 : (double) plannedPeak / peakLive;
    }

    public long offset(int buffer) {
        return offsets[buffer];
    }

    @Override
    public String toString() {
        return "OffsetPlan[buffers=" + offsets.length + ", plannedPeak=" + plannedPeak + ", peakLive=" + peakLive
                + ", method=" + method + ", improvementRounds=" + improvementRounds + "]";
    }
}
