package io.gpumem.trace.replay;

import static io.gpumem.testing.TestSizes.MiB;

import io.gpumem.alloc.Pool;
import io.gpumem.history.BlockInfo;
import io.gpumem.history.BlockState;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.io.SourceFormat;
import io.gpumem.trace.io.TraceReaders;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.window.RecordedConfig;
import io.gpumem.trace.window.WindowRebuilder;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/** Small trace windows built by hand, and their what-if replays (windows rebuilt under the recorded config). */
final class HandWindows {

    /** The size of each live block of {@link #loop}: 1.5 MiB, its own rounded size. */
    static final long BLOCK = 3 * MiB / 2;

    private static final long BASE = 0x7f0000000000L;

    private HandWindows() {}

    /** The replay of device {@code device} of {@code s}, from the start the recorded configuration rebuilds. */
    static WhatIfReplay replay(TraceSnapshot s, int device) {
        return new WhatIfReplay(s, device, new WindowRebuilder(RecordedConfig.of(s)).rebuild(s, device));
    }

    /** An ops script, given as its text, read as a trace ({@code gpumem compare} reads a script file so). */
    static TraceSnapshot script(String text) {
        try {
            Path f = Files.createTempFile("hand-window", ".ops");
            try {
                Files.writeString(f, text);
                return TraceReaders.read(f);
            } finally {
                Files.delete(f);
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** A recorded snapshot (addresses are the allocator's) of these segments and per-device traces. */
    static TraceSnapshot snapshot(
            List<SegmentInfo> segments, List<List<TraceEntry>> traces, Map<String, Object> extra) {
        return new TraceSnapshot("hand", SourceFormat.GENERATED, segments, traces, null, null, extra, true);
    }

    /**
     * A warm loop body on device 0: at its start one 20 MiB segment holds {@code live} blocks of {@link #BLOCK}
     * bytes, then free memory; the window frees them all and allocates {@code again} blocks of the same size anew,
     * left live (its loop closure is {@code again / live}). At its end the segment holds those.
     */
    static TraceSnapshot loop(int live, int again) {
        List<TraceEntry> trace = new ArrayList<>();
        for (int k = 0; k < live; k++) {
            trace.add(TraceEntry.of(TraceAction.FREE_REQUESTED, BASE + k * BLOCK, BLOCK, 0));
        }
        List<BlockInfo> end = new ArrayList<>();
        for (int k = 0; k < again; k++) {
            trace.add(TraceEntry.of(TraceAction.ALLOC, BASE + k * BLOCK, BLOCK, 0));
            end.add(BlockInfo.of(BASE + k * BLOCK, BLOCK, BLOCK, BlockState.ACTIVE_ALLOCATED));
        }
        end.add(BlockInfo.of(BASE + again * BLOCK, 20 * MiB - again * BLOCK, 0, BlockState.INACTIVE));
        SegmentInfo segment = SegmentInfo.ofBlocks(0, BASE, 0, Pool.LARGE, false, end);
        return snapshot(List.of(segment), List.of(trace), Map.of());
    }
}
