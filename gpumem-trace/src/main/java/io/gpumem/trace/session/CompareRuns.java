package io.gpumem.trace.session;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.engine.ParallelRuns;
import io.gpumem.engine.RunOutcome;
import io.gpumem.policy.PolicyRegistry;
import io.gpumem.policy.PolicySpec;
import io.gpumem.trace.replay.ProgressListener;
import io.gpumem.trace.replay.WhatIfReplay;
import io.gpumem.trace.window.WindowStart;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Supplier;

/**
 * The rows of {@code gpumem compare} for one device, computed in one place ({@link TraceSession#compare}) so that
 * every command showing compare rows ({@code compare}, {@code compare --html}, {@code report --policy}) shows the
 * same figures: each configuration is replayed by the session's {@link WhatIfReplay} of the device's window and
 * each policy, all at one capacity, one run per core ({@link ParallelRuns}), the rows in that order.
 *
 * @param start    the rebuilt start of the window
 * @param replay   the replay engine (holds the recorded figures)
 * @param capacity the capacity the OOM column was computed at
 * @param rows     one row per configuration, then one per policy, in the order given
 */
public record CompareRuns(WindowStart start, WhatIfReplay replay, long capacity, List<RunOutcome> rows) {

    public CompareRuns {
        rows = List.copyOf(rows);
    }

    /** Replays the configurations, then the policies, on one device's window at {@code capacity}. */
    static CompareRuns run(
            DeviceWindow window,
            long capacity,
            List<AllocatorConfig> configs,
            List<PolicySpec> policies,
            ProgressListener progress) {
        WhatIfReplay replay = window.replay();
        int total = configs.size() + policies.size();
        progress.progress(0, total);
        // one run per core: each replay is single-threaded and independent of the others
        List<Supplier<RunOutcome>> runs = new ArrayList<>(total);
        for (int i = 0; i < configs.size(); i++) {
            AllocatorConfig c = configs.get(i);
            boolean isRecorded = i == 0;
            runs.add(() -> replay.evaluate(c, isRecorded, capacity));
        }
        for (PolicySpec p : policies) {
            runs.add(() -> replay.evaluate(p, capacity));
        }
        List<RunOutcome> rows =
                ParallelRuns.values(runs, ParallelRuns.threads(), finished -> progress.progress(finished, total));
        return new CompareRuns(window.start(), replay, capacity, rows);
    }

    /**
     * How compare's table names a row: {@code recorded (CONF)} for the recorded configuration, the configuration
     * (or {@code defaults}) for another, a policy's name with its options for a policy row.
     */
    public static String label(RunOutcome r) {
        return label(r.policy(), r.label(), r.recorded());
    }

    /**
     * {@link #label(RunOutcome)} of a row that has no outcome to show (a search that found no value): the policy's
     * name, its options or configuration ({@code label}), and whether it is the recorded configuration.
     */
    public static String label(String policy, String label, boolean recorded) {
        if (!PolicyRegistry.isExact(policy)) {
            return label == null || label.isEmpty() ? policy : policy + ":" + label;
        }
        String c = label == null || label.isEmpty() ? "defaults" : label;
        return recorded ? "recorded (" + c + ")" : c;
    }

    /**
     * The rows as the HTML report's what-if table shows them: labelled as compare's table labels them
     * ({@code recorded (...)}, a configuration, or a policy name with its options).
     */
    public List<RunOutcome> reportRows() {
        List<RunOutcome> outcomes = new ArrayList<>();
        for (RunOutcome r : rows) {
            outcomes.add(r.toBuilder().label(label(r)).build());
        }
        return outcomes;
    }
}
