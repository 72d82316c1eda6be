package io.gpumem.report;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.engine.RunOutcome;
import io.gpumem.history.BlockInfo;
import io.gpumem.history.Frame;
import io.gpumem.history.SegmentInfo;
import io.gpumem.trace.analysis.DeviceAnalysis;
import io.gpumem.trace.analysis.MemoryState;
import io.gpumem.trace.analysis.TraceStates;
import io.gpumem.trace.category.PeakCategories;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.session.TraceSession;
import io.gpumem.trace.window.WindowStart;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;

/**
 * Everything the report shows for one device: the analysis {@code gpumem analyze} prints (taken as computed,
 * not recomputed), the what-if rows the user added, the timeline, and the segment maps at the analysed moment
 * (the OOM, if any) and at peak allocated.
 *
 * @param extraRows what-if rows beyond the recommender's (user configurations, the demo's table)
 * @param categories what the live bytes are for, as {@code analyze} prints it (the timeline by category too)
 * @param notes     what could not be drawn and why
 */
record DeviceReport(
        int device,
        DeviceAnalysis analysis,
        List<RunOutcome> extraRows,
        PeakCategories categories,
        Timeline timeline,
        List<SegmentMap> maps,
        List<String> notes) {

    static DeviceReport of(
            TraceSession session, DeviceAnalysis analysis, List<RunOutcome> extraRows, PeakCategories categories) {
        return of(session, analysis, extraRows, categories, null);
    }

    /**
     * As {@link #of(TraceSession, DeviceAnalysis, List, PeakCategories)}, with the timeline and the state at peak
     * allocated as {@link #walk} made them ahead of the analysis ({@code null}: made now); when they were made for
     * other moments than the analysed one, they are made again.
     */
    static DeviceReport of(
            TraceSession session,
            DeviceAnalysis analysis,
            List<RunOutcome> extraRows,
            PeakCategories categories,
            Walked walked) {
        int d = analysis.device();
        int analysedEntry = analysis.end() - 1;
        MemoryState analysed = analysis.analysis().state();
        if (walked == null || !walked.timeline().keepsLifetimesAfter(analysedEntry)) {
            walked = walk(session, d, analysed.capacity(), analysedEntry).get();
        }
        Timeline timeline = walked.timeline();
        List<String> notes = new ArrayList<>(walked.notes());
        List<SegmentMap> maps = new ArrayList<>();
        SegmentMap analysedMap = SegmentMap.of(
                analysed.oom().isPresent() ? "at the OOM: " + analysed.label() : analysed.label(),
                analysed,
                timeline,
                timeline.lifetimesAfter(analysedEntry));
        int peak = timeline.peakIndex;
        SegmentMap peakMap = null;
        if (peak >= 0 && peak != analysedEntry) {
            if (walked.atPeak() != null) {
                peakMap = SegmentMap.of(
                        "at peak allocated (after entry #" + peak + ")",
                        walked.atPeak(),
                        timeline,
                        timeline.lifetimesAtPeak());
            } else {
                notes.add("the state at peak allocated (entry #" + peak + ") could not be rebuilt: "
                        + walked.peakFailure());
            }
        }
        if (analysed.oom().isPresent() || peakMap == null) {
            maps.add(analysedMap);
            if (peakMap != null) {
                maps.add(peakMap);
            }
        } else {
            maps.add(peakMap);
            maps.add(analysedMap);
        }
        return new DeviceReport(d, analysis, List.copyOf(extraRows), categories, timeline, List.copyOf(maps), notes);
    }

    /**
     * The parts of a device's report that need the trace and its window but not the analysis: the timeline, walked
     * to keep the lifetimes at {@code moments}, and the state at its peak allocated, rebuilt with
     * {@code capacity} when a moment differs from the peak.
     *
     * @param notes       what could not be drawn and why (the window's start state)
     * @param atPeak      the state at {@link Timeline#peakIndex}, or {@code null} when not rebuilt
     * @param peakFailure why the state at the peak could not be rebuilt, or {@code null}
     */
    record Walked(Timeline timeline, List<String> notes, MemoryState atPeak, String peakFailure) {}

    /**
     * Takes from {@code session}, on the calling thread (a session is confined to one), what the walk needs, and
     * returns the walk, which reads only the trace and the window and so may run on any thread. Exceptions of the
     * timeline itself propagate from {@link Supplier#get}; a start state or a peak state that cannot be rebuilt is
     * noted instead.
     */
    static Supplier<Walked> walk(TraceSession session, int d, long capacity, int... moments) {
        TraceSnapshot snapshot = session.trace();
        List<String> notes = new ArrayList<>();
        AllocatorConfig recorded;
        try {
            recorded = session.recordedConfig();
        } catch (RuntimeException e) {
            recorded = AllocatorConfig.defaults();
        }
        AllocatorConfig config = recorded;
        WindowStart windowStart = null;
        try {
            // the session's window, rebuilt once for the compare rows, the recommender and this timeline alike
            windowStart = session.window(d).start();
        } catch (RuntimeException e) {
            notes.add("the trace window's start state could not be rebuilt (" + e.getMessage()
                    + "); the timeline starts from zero");
        }
        WindowStart start = windowStart;
        return () -> {
            Map<Long, List<Frame>> endFrames = new HashMap<>();
            for (SegmentInfo s : snapshot.segmentsOf(d)) {
                for (BlockInfo b : s.blocks()) {
                    if (b.frames() != null && !b.frames().isEmpty()) {
                        endFrames.put(b.address(), b.frames());
                    }
                }
            }
            Timeline timeline = new Timeline(
                    snapshot.traceOf(d), start, config, new Sites(), endFrames, ReportJson.MAX_POINTS, moments);
            int peak = timeline.peakIndex;
            MemoryState atPeak = null;
            String peakFailure = null;
            if (peak >= 0 && Arrays.stream(moments).anyMatch(m -> m != peak)) {
                try {
                    atPeak = TraceStates.afterEntry(snapshot, d, peak, capacity);
                } catch (RuntimeException e) {
                    peakFailure = e.getMessage();
                }
            }
            return new Walked(timeline, List.copyOf(notes), atPeak, peakFailure);
        };
    }
}
