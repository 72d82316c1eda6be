package io.gpumem.trace.replay;

import io.gpumem.alloc.AddressTable;
import io.gpumem.engine.RequestStream;
import io.gpumem.history.Frame;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.window.WindowStart;
import java.util.List;

/**
 * Compiles a device's trace window into the engine's {@link RequestStream}: the rebuilt start state, then one op
 * per request of the window, every free matched to the block it frees (frees of blocks the start state does not
 * hold are dropped), and the release runs the user asked for ({@link WhatIfReplay#classifyReleaseRuns}) as
 * {@code empty_cache}. A trace with {@code free_completed} entries frees at completion, one without at
 * {@code free_requested}. Each op keeps its trace entry; with {@code withHistory} also its stack (as a site) and
 * its recorded time, for runs that record history.
 */
final class WindowStreams {

    private WindowStreams() {}

    static RequestStream compile(
            List<TraceEntry> trace, WindowStart start, boolean[] userEmptyCache, boolean withHistory) {
        List<SegmentInfo> startState = start.segments();
        RequestStream.Builder b = RequestStream.builder().startState(startState);
        AddressTable<Void> live = AddressTable.forInts(1024);
        int[] next = {0};
        RequestStream.forEachLiveBlock(startState, (seg, blk) -> live.putInt(blk.address(), next[0]++, -1));
        boolean hasCompletions = TraceEntry.recordsFreeCompletions(trace);
        for (int i = 0; i < trace.size(); i++) {
            TraceEntry e = trace.get(i);
            TraceAction a = e.action();
            if (a == TraceAction.ALLOC) {
                int slot = b.alloc(e.size(), e.stream(), i);
                if (e.addr() != 0) {
                    live.putInt(e.addr(), slot, -1);
                }
            } else if (a == TraceAction.FREE_COMPLETED || (a == TraceAction.FREE_REQUESTED && !hasCompletions)) {
                int s = e.addr() == 0 ? -1 : live.removeInt(e.addr(), -1);
                if (s >= 0 && b.isLive(s)) {
                    b.free(s, i);
                } else {
                    continue;
                }
            } else if (userEmptyCache[i]) {
                b.emptyCache(i);
            } else {
                continue;
            }
            if (withHistory) {
                List<Frame> f = e.frames();
                if (f != null) {
                    b.atSite(b.site(f));
                }
                b.at(e.timeUs());
            }
        }
        return b.build();
    }
}
