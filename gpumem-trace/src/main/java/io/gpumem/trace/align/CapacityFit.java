package io.gpumem.trace.align;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.engine.RunOutcome;
import io.gpumem.policy.PolicySpec;
import io.gpumem.trace.replay.WhatIfReplay;
import io.gpumem.trace.session.TraceSession;
import io.gpumem.trace.window.RecordedConfig;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.function.Predicate;
import org.jspecify.annotations.Nullable;

/**
 * "Which batch size or context fits on this GPU?": for each configuration and policy, the largest value (a multiple
 * of a step, down to the step itself) whose predicted recording ({@link RecordingFamily#predict}) runs to its end on
 * a device of a given capacity, with compare's row for that value (its minimum capacity among the figures).
 *
 * <p>Search: memory grows with the value, so the fitting values form a prefix: starting at the largest recorded
 * value, doubling while it fits (the last doubling stops at {@link #LIMIT}'s last multiple), then bisecting between
 * the last value that fits and the first that does not (or between the step and the largest recorded value when even
 * that does not fit). Each value is predicted once and its window compiled once, shared by every row; a row's probe
 * is one run that stops at the first failed request. A value at which the laws give no program (a size of zero or
 * less) does not fit; recordings that are not one program are refused before the search, as {@code predict --at}
 * refuses them, never taken for a program that fits nowhere.
 *
 * <p>Invariants: a row's {@link LargestValue#value()} is 0 exactly when not even the step fits (or the step is past
 * {@link #LIMIT}); values searched never exceed {@link #LIMIT}, and a program that fits at every value gets the
 * largest multiple of the step within it.
 */
public final class CapacityFit {

    /** The largest value searched. */
    public static final long LIMIT = 1L << 40;

    private final RecordingFamily family;
    private final long capacity;
    private final long step;
    private final Map<Long, @Nullable Prediction> byValue = new HashMap<>();
    private int predictions;

    private CapacityFit(RecordingFamily family, long capacity, long step) {
        this.family = family;
        this.capacity = capacity;
        this.step = step;
    }

    /**
     * One row: the largest value that fits (0 when none) and compare's row for it ({@code null} when none).
     *
     * @param value  the largest fitting value, a multiple of the step; 0 when not even the step fits
     * @param outcome the row at that value, minimum capacity included
     */
    public record LargestValue(
            String config,
            String policy,
            boolean recorded,
            long value,
            @Nullable RunOutcome outcome) {}

    /** What the search cost: values predicted, replays run, in all rows. */
    public record SearchCost(int valuesPredicted, long replays) {}

    /**
     * The predicted window at one value and the configuration its recording was played under: the recorded
     * configuration of that value's reference, which is the one {@code predict --at} replays first.
     */
    private record Prediction(WhatIfReplay replay, AllocatorConfig recorded) {}

    /**
     * Searches each row.
     *
     * @param capacity device bytes the allocator may use
     * @param step     the values tried are its multiples (1: every integer)
     * @throws IllegalArgumentException when the recordings are not one program ({@link RecordingFamily#lawsFor}),
     *                                  before anything is searched
     */
    public static CapacityFit of(RecordingFamily family, long capacity, long step) {
        if (capacity <= 0 || step <= 0) {
            throw new IllegalArgumentException("capacity and step must be positive, got " + capacity + ", " + step);
        }
        // Every recording is the reference of some value the search may try, so each one's laws are fitted (and
        // the family checked as one program) here, before the search: a refusal must reach the caller as bad input,
        // not read as "this value does not fit". The laws are kept, so the search does not fit them again.
        for (int j = 0; j < family.size(); j++) {
            family.lawsFor(family.label(j));
        }
        return new CapacityFit(family, capacity, step);
    }

    /**
     * The rows: the recorded configuration first, then {@code others} and {@code policies}, in that order.
     *
     * <p>The recorded row runs each value under the recorded configuration of that value's reference (the recording
     * nearest it), as {@code predict --at} does, so that it is {@code --at}'s first row at its largest value whatever
     * order the recordings were given in; when the recordings were made under different configurations, the row's
     * configuration is that of its largest value's reference (of the step's when nothing fits).
     */
    public List<LargestValue> rows(List<AllocatorConfig> others, List<PolicySpec> policies) {
        List<LargestValue> out = new ArrayList<>();
        long recordedValue = largest(p -> p.replay().runOnce(p.recorded(), capacity) >= 0);
        if (recordedValue == 0) {
            AllocatorConfig c = RecordedConfig.of(family.trace(family.nearest(step)));
            out.add(new LargestValue(c.raw(), "pytorch", true, 0, null));
        } else {
            Prediction p = Objects.requireNonNull(replayAt(recordedValue));
            RunOutcome o = p.replay().evaluate(p.recorded(), true, capacity);
            out.add(new LargestValue(p.recorded().raw(), "pytorch", true, recordedValue, o));
        }
        for (AllocatorConfig c : others) {
            long v = largest(p -> p.replay().runOnce(c, capacity) >= 0);
            RunOutcome o =
                    v == 0 ? null : Objects.requireNonNull(replayAt(v)).replay().evaluate(c, false, capacity);
            out.add(new LargestValue(c.raw(), "pytorch", false, v, o));
        }
        for (PolicySpec policy : policies) {
            long v = largest(p -> p.replay().runsWithoutOom(policy, capacity));
            RunOutcome o =
                    v == 0 ? null : Objects.requireNonNull(replayAt(v)).replay().evaluate(policy, capacity);
            out.add(new LargestValue(policy.options(), policy.name(), false, v, o));
        }
        return out;
    }

    /** Values predicted and replays run so far (each prediction plays its program once). */
    public SearchCost cost() {
        long replays = predictions;
        for (Prediction p : byValue.values()) {
            if (p != null) {
                replays += p.replay().replayCounts()[0];
            }
        }
        return new SearchCost(predictions, replays);
    }

    private long largest(Predicate<Prediction> runs) {
        long limit = LIMIT / step;
        if (limit < 1) {
            return 0; // not even one step within the values searched
        }
        long top = Math.min(limit, Math.max(1, family.largestLabel() / step));
        long lo;
        long hi;
        if (fits(top, runs)) {
            lo = top;
            hi = -1;
            while (hi < 0) {
                if (lo == limit) {
                    return lo * step;
                }
                // doubling up to the last multiple searched, not past it: a program whose memory does not grow with
                // the value fits at the limit, which the search must reach
                long next = Math.min(lo * 2, limit);
                if (fits(next, runs)) {
                    lo = next;
                } else {
                    hi = next;
                }
            }
        } else {
            if (top == 1 || !fits(1, runs)) {
                return 0;
            }
            lo = 1;
            hi = top;
        }
        while (hi - lo > 1) {
            long mid = lo + (hi - lo) / 2;
            if (fits(mid, runs)) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        return lo * step;
    }

    private boolean fits(long multiple, Predicate<Prediction> runs) {
        Prediction p = replayAt(multiple * step);
        return p != null && runs.test(p);
    }

    /** The predicted window at {@code value}, predicted once; {@code null} when the laws give no program there. */
    private @Nullable Prediction replayAt(long value) {
        if (byValue.containsKey(value)) {
            return byValue.get(value);
        }
        // fitted and checked by of(): outside the try, so that a refusal could never pass for a value that does not fit
        family.lawsFor(value);
        Prediction p;
        try {
            predictions++;
            TraceSession session = family.predict(value).session();
            p = new Prediction(session.window(0).replay(), session.recordedConfig());
        } catch (IllegalArgumentException | IllegalStateException e) {
            p = null; // no program at this value (a law gives no positive size), or none that runs
        }
        byValue.put(value, p);
        return p;
    }
}
