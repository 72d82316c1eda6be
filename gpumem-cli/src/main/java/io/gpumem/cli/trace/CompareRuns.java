package io.gpumem.cli.trace;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.policy.PolicySpec;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.replay.ProgressListener;
import io.gpumem.trace.replay.WhatIfReplay;
import io.gpumem.engine.RunOutcome;
import io.gpumem.trace.window.WindowRebuilder;
import io.gpumem.trace.window.WindowStart;
import java.util.ArrayList;
import java.util.List;

/**
 * The rows of {@code gpumem compare} for one device, computed in one place so that every command showing compare
 * rows ({@code compare}, {@code compare --html}, {@code report --policy}) shows the same figures: the window is
 * rebuilt under the recorded configuration, each configuration is replayed by {@link WhatIfReplay} (in that order,
 * one per core), then each policy, all at one capacity.
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

    /**
     * Runs the configurations and policies on device {@code d}.
     *
     * @param recordedConfig the configuration the trace was recorded under (rebuilds the window's start)
     * @param configs        configurations to replay (compare passes the recorded one first)
     * @param policies       policies to replay after them
     * @param capacityBytes  the capacity, or {@code null} for the recorded capacity
     * @throws IllegalArgumentException or {@link IllegalStateException} when the snapshot is inconsistent
     */
    public static CompareRuns run(TraceSnapshot trace, int d, AllocatorConfig recordedConfig,
                                  List<AllocatorConfig> configs, List<PolicySpec> policies, Long capacityBytes,
                                  ProgressListener progress) {
        WindowStart start = new WindowRebuilder(recordedConfig).rebuild(trace, d);
        WhatIfReplay replay = new WhatIfReplay(trace, d, start);
        long capacity = capacityBytes != null ? capacityBytes : replay.recordedCapacity(recordedConfig);
        int total = configs.size() + policies.size();
        progress.progress(0, total);
        List<RunOutcome> rows = new ArrayList<>();
        if (!configs.isEmpty()) {
            // one configuration per core: each replay is single-threaded and independent of the others
            rows.addAll(replay.evaluateAll(configs, capacity, Runtime.getRuntime().availableProcessors(),
                    finished -> progress.progress(finished, total)));
        }
        for (int i = 0; i < policies.size(); i++) {
            rows.add(replay.evaluate(policies.get(i), capacity));
            progress.progress(configs.size() + i + 1, total);
        }
        return new CompareRuns(start, replay, capacity, rows);
    }

    /**
     * The rows as the HTML report's what-if table shows them: labelled as compare's table labels them
     * ({@code recorded (...)}, a configuration, or a policy name with its options).
     */
    public List<RunOutcome> reportRows() {
        List<RunOutcome> outcomes = new ArrayList<>();
        for (RunOutcome r : rows) {
            outcomes.add(r.toBuilder().label(CompareCommand.label(r)).build());
        }
        return outcomes;
    }
}
