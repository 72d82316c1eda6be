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
import io.gpumem.trace.io.SourceFormat;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.replay.WhatIfReplay;
import io.gpumem.trace.session.Beside;
import io.gpumem.trace.session.DeviceWindow;
import io.gpumem.trace.session.TraceSession;
import io.gpumem.trace.window.WindowStart;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;

/**
 * Everything the report shows for one device: the analysis {@code gpumem analyze} prints (taken as computed,
 * not recomputed), the what-if rows the user added, the timeline, and the segment maps at the analysed moment
 * (the OOM, if any) and at peak allocated.
 *
 * @param format    the file's format, as the page names it
 * @param stateRecorded whether the file records the allocator's state ({@link TraceSnapshot#addressesRecorded}): one
 *                  of requests only has no reserved bytes to draw, and its states are a replay's
 * @param replayedPeakReserved for a file of requests only that no compare run replayed, the peak reserved bytes of
 *                  its requests replayed under the recorded configuration with unlimited memory; −1 otherwise
 * @param extraRows what-if rows beyond the recommender's (user configurations, the demo's table)
 * @param categories what the live bytes are for, as {@code analyze} prints it (the timeline by category too)
 * @param notes     what could not be drawn and why
 */
record DeviceReport(
        int device,
        SourceFormat format,
        boolean stateRecorded,
        long replayedPeakReserved,
        DeviceAnalysis analysis,
        List<RunOutcome> extraRows,
        PeakCategories categories,
        Timeline timeline,
        List<SegmentMap> maps,
        List<String> notes) {

    static DeviceReport of(
            TraceSession session, DeviceAnalysis analysis, List<RunOutcome> extraRows, PeakCategories categories) {
        TraceSnapshot snapshot = session.trace();
        int d = analysis.device();
        List<String> notes = new ArrayList<>();
        AllocatorConfig config;
        try {
            config = session.recordedConfig();
        } catch (RuntimeException e) {
            config = AllocatorConfig.defaults();
        }
        WindowStart start = null;
        WhatIfReplay replay = null;
        RuntimeException windowFailure = null;
        try {
            // the session's window, rebuilt once for the compare rows, the recommender, this timeline and the states
            // a file of requests only is replayed to alike
            DeviceWindow w = session.window(d);
            start = w.start();
            replay = w.replay();
        } catch (RuntimeException e) {
            windowFailure = e;
            notes.add("the trace window's start state could not be rebuilt (" + e.getMessage()
                    + "); the timeline starts from zero");
        }
        // taken here, on the session's thread, for the state at the peak rebuilt beside the timeline
        Supplier<WhatIfReplay> window = windowOrFailure(replay, windowFailure);
        Map<Long, List<Frame>> endFrames = new HashMap<>();
        for (SegmentInfo s : snapshot.segmentsOf(d)) {
            for (BlockInfo b : s.blocks()) {
                if (b.frames() != null && !b.frames().isEmpty()) {
                    endFrames.put(b.address(), b.frames());
                }
            }
        }
        int analysedEntry = analysis.end() - 1;
        MemoryState analysed = analysis.analysis().state();
        // The state at peak allocated is rebuilt backwards from the end (a walk over every entry after the peak),
        // which need not wait for the timeline's walk: the classification counts bytes as the timeline does (round
        // sizes, held until a free completes), so its peak entry is the timeline's unless the trace lost a free; its
        // entry's state is rebuilt beside the timeline and taken if the timeline's peak is that entry.
        int expectedPeak = categories.peakEntry();
        Beside<MemoryState> stateAtExpectedPeak = expectedPeak >= 0 && expectedPeak != analysedEntry
                ? new Beside<>(() -> TraceStates.afterEntry(snapshot, d, expectedPeak, analysed.capacity(), window))
                        .start("gpumem-report-peak")
                : null;
        // one walk: the points, their split by site, and the lifetimes at the analysed moment and at the peak
        Timeline timeline = new Timeline(
                snapshot.traceOf(d), start, config, new Sites(), endFrames, ReportJson.MAX_POINTS, analysedEntry);
        List<SegmentMap> maps = new ArrayList<>();
        SegmentMap analysedMap = SegmentMap.of(
                analysed.oom().isPresent() ? "at the OOM: " + analysed.label() : analysed.label(),
                analysed,
                timeline,
                timeline.lifetimesAfter(analysedEntry));
        int peak = timeline.peakIndex;
        SegmentMap peakMap = null;
        if (peak >= 0 && peak != analysedEntry) {
            try {
                MemoryState atPeak = stateAtExpectedPeak != null && peak == expectedPeak
                        ? stateAtExpectedPeak.take()
                        : TraceStates.afterEntry(snapshot, d, peak, analysed.capacity(), window);
                peakMap = SegmentMap.of(
                        "at peak allocated (after entry #" + peak + ")", atPeak, timeline, timeline.lifetimesAtPeak());
            } catch (RuntimeException e) {
                notes.add("the state at peak allocated (entry #" + peak + ") could not be rebuilt: " + e.getMessage());
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
        long replayedPeakReserved = -1;
        if (!snapshot.addressesRecorded() && analysis.recommendations().baseline() == null) {
            // the file records no reserved bytes and no compare run replayed it: one replay says what it reserves
            try {
                replayedPeakReserved = window.get().runOnce(config, TraceStates.UNLIMITED);
            } catch (RuntimeException e) {
                notes.add("the requests could not be replayed for their peak reserved bytes (" + e.getMessage() + ")");
            }
        }
        return new DeviceReport(
                d,
                snapshot.format(),
                snapshot.addressesRecorded(),
                replayedPeakReserved,
                analysis,
                List.copyOf(extraRows),
                categories,
                timeline,
                List.copyOf(maps),
                notes);
    }

    /** The session's window replay, or a supplier that throws why the window could not be made. */
    private static Supplier<WhatIfReplay> windowOrFailure(
            @Nullable WhatIfReplay replay, @Nullable RuntimeException failure) {
        if (replay != null) {
            return () -> replay;
        }
        RuntimeException why = Objects.requireNonNull(failure, "a window or the reason it failed");
        return () -> {
            throw why;
        };
    }
}
