package io.gpumem.trace.analysis;

import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.policy.PolicySpec;
import io.gpumem.trace.io.EntryFields;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.replay.WhatIfReplay;
import io.gpumem.trace.workload.TraceWorkload;
import io.gpumem.trace.workload.WorkloadWhatIf;
import java.util.ArrayList;
import java.util.List;
import java.util.function.LongFunction;
import java.util.function.Supplier;

/**
 * What {@code gpumem analyze} concludes for one device of a trace, computed once so that the text report
 * and the HTML report ({@code gpumem report}, {@code analyze --html}) show the same figures.
 *
 * <p>The state analysed is the end state, or the state after entry {@code at}, or, when the trace holds an
 * {@code oom} entry that later entries moved away from, the state at that entry (rebuilt by replaying the
 * trace). A file that records requests but no allocator state has its states replayed instead
 * ({@link TraceStates#afterEntry}): after entry {@code at}, its last {@code oom} entry or its peak of allocated bytes
 * ({@link TraceStates#peakAllocatedEntry}), or at the first request that fails on a device of {@code capacity}. Recommendations are backed by compare runs of the trace's window ({@link TraceWhatIf}, the
 * {@code gpumem compare} engine) when the analysis wants them; where that replay cannot run the window, by the
 * window's own requests on an empty device ({@link TraceWorkload}), said so in {@link #replayNotes}.
 *
 * @param device          the device
 * @param end             entries of the device's trace up to and including the analysed moment
 * @param analysis        the analysed state
 * @param whatIf          the compare runs, or {@code null} when none were run
 * @param recommendations the recommender's result
 * @param replayNotes     notes about how the compare runs were made (printed between the state and the recommendations)
 */
public record DeviceAnalysis(
        int device,
        int end,
        StateAnalysis analysis,
        WhatIf whatIf,
        Recommender.Result recommendations,
        List<String> replayNotes) {
    public DeviceAnalysis {
        replayNotes = List.copyOf(replayNotes);
    }

    /**
     * Analyses one device.
     *
     * @param at       analyse the state after this entry (0-based), or {@code null} for the default moment
     * @param capacity device capacity, or {@link MemoryState#UNKNOWN}
     * @param top      how many wasteful segments to keep
     * @param compare  whether to run the compare runs (when the analysis wants them and there are requests)
     * @param window   the device's trace window, rebuilt and compiled: what a file of requests only is replayed
     *                 with (asked for only then); the caller owns the window, so that it is rebuilt once however
     *                 many commands' figures use it (a {@code TraceSession})
     * @param whatIfs  the compare runs of that window at a usable capacity (capacity less memory held outside the
     *                 allocator, or {@link MemoryState#UNKNOWN})
     * @param policies policies beyond the exact allocator that the recommender also tries
     * @throws IllegalArgumentException when {@code at} is outside the device's trace
     */
    public static DeviceAnalysis of(
            TraceSnapshot snapshot,
            int device,
            Integer at,
            long capacity,
            int top,
            boolean compare,
            Supplier<WhatIfReplay> window,
            LongFunction<WhatIf> whatIfs,
            List<PolicySpec> policies) {
        List<TraceEntry> trace = snapshot.traceOf(device);
        MemoryState state;
        int end;
        if (!snapshot.addressesRecorded()) {
            // no end state to analyse: the state a replay of the requests reaches after the entry asked for, the last
            // recorded oom, or the peak of allocated bytes; a replay whose request fails stops there, the moment then
            int oom = TraceStates.lastOom(trace);
            int n = at != null ? at : oom >= 0 ? oom : TraceStates.peakAllocatedEntry(snapshot, device, window);
            state = TraceStates.afterEntry(snapshot, device, n, capacity, window);
            end = state.oom().map(o -> (int) o.entryIndex() + 1).orElse(n + 1);
        } else if (at != null) {
            state = TraceStates.afterEntry(snapshot, device, at, capacity);
            end = at + 1;
        } else {
            int oom = TraceStates.lastOom(trace);
            if (oom >= 0
                    && SnapshotStates.endState(snapshot, device, capacity).oom().isEmpty()) {
                state = TraceStates.afterEntry(snapshot, device, oom, capacity);
                end = oom + 1;
            } else {
                state = SnapshotStates.endState(snapshot, device, capacity);
                end = trace.size();
            }
        }
        StateAnalysis analysis = new StateAnalyzer(top).analyze(state);
        List<String> notes = new ArrayList<>();
        WhatIf whatIf = null;
        if (compare && hasRequests(trace) && Recommender.wantsCompareRuns(analysis)) {
            whatIf = compareRuns(
                    snapshot, device, end, capacity, analysis.diagnosis().outside(), whatIfs, policies, notes);
        }
        return new DeviceAnalysis(
                device, end, analysis, whatIf, new Recommender().recommend(analysis, whatIf, policies), notes);
    }

    /** Whether a trace holds at least one {@code alloc} entry (something to replay). */
    public static boolean hasRequests(List<TraceEntry> trace) {
        EntryFields fields = EntryFields.of(trace);
        for (int i = 0; i < trace.size(); i++) {
            if (fields.action(i) == TraceAction.ALLOC) {
                return true;
            }
        }
        return false;
    }

    private static WhatIf compareRuns(
            TraceSnapshot snapshot,
            int d,
            int end,
            long capacityBytes,
            long outside,
            LongFunction<WhatIf> whatIfs,
            List<PolicySpec> policies,
            List<String> notes) {
        long usable = capacityBytes > 0 ? capacityBytes - Math.max(0, outside) : MemoryState.UNKNOWN;
        try {
            WhatIf replay = whatIfs.apply(usable);
            // run every configuration now (the results are memoised), so that a failure falls back as a whole; the
            // policies the recommender will try run beside them, one run per core
            List<String> confs = Recommender.configurationsTried(
                    snapshot.recordedConfString() == null ? "" : snapshot.recordedConfString());
            replay.prefetch(confs, policies);
            for (String conf : confs) {
                replay.run(conf);
            }
            return replay;
        } catch (RuntimeException e) {
            notes.add("the window replay failed (" + e.getMessage() + "); the compare runs below replay the"
                    + " window's own requests on an empty device instead");
            long runCapacity = capacityBytes > 0 ? capacityBytes : WorkloadWhatIf.UNLIMITED;
            WorkloadWhatIf fallback =
                    new WorkloadWhatIf(TraceWorkload.of(snapshot, d, end), runCapacity, Math.max(0, outside), true);
            fallback.minCapacityNotSearched().ifPresent(notes::add);
            return fallback;
        }
    }
}
