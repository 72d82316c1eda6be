package io.gpumem.trace.replay;

import io.gpumem.alloc.AddressTable;
import io.gpumem.engine.RequestStream;
import io.gpumem.history.Frame;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.io.EntryFields;
import io.gpumem.trace.window.FreeMatches;
import io.gpumem.trace.window.WindowStart;
import java.util.Arrays;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * Compiles a device's trace window into the engine's {@link RequestStream}: the rebuilt start state, then one op
 * per request of the window, every free matched to the block it frees (frees of blocks the start state does not
 * hold are dropped), and the release runs the user asked for ({@link WhatIfReplay#classifyReleaseRuns}) as
 * {@code empty_cache}. A trace with {@code free_completed} entries frees at completion, one without at
 * {@code free_requested}. Each op keeps its trace entry; with {@code withHistory} also its stack (as a site) and
 * its recorded time, for runs that record history. What-if runs may also ask each request the recording saw fail
 * ({@code askFailed}): an {@code oom} entry with a size becomes an alloc of that size and its free, both at that entry.
 *
 * <p>An oracle replay ({@link #compileForOracle}) compiles the same stream with every release run as an
 * {@code empty_cache} (with unlimited memory the model never retries after an OOM, so every recorded release is
 * one it must make itself), and keeps the recording's decisions beside it ({@link RecordedDecisions}).
 */
final class WindowStreams {

    private WindowStreams() {}

    private static final TraceAction[] ACTIONS = TraceAction.values();
    private static final int ALLOC = TraceAction.ALLOC.ordinal();
    private static final int FREE_REQUESTED = TraceAction.FREE_REQUESTED.ordinal();
    private static final int FREE_COMPLETED = TraceAction.FREE_COMPLETED.ordinal();
    private static final int SEGMENT_FREE = TraceAction.SEGMENT_FREE.ordinal();
    private static final int SEGMENT_UNMAP = TraceAction.SEGMENT_UNMAP.ordinal();
    private static final int OOM = TraceAction.OOM.ordinal();

    /**
     * The window's requests for what-if runs; with {@code askFailed}, each request the recording saw fail (an
     * {@code oom} entry, an RMM log's failed allocation) is asked again where it failed, and freed at once when
     * served.
     */
    static RequestStream compile(
            List<TraceEntry> trace,
            WindowStart start,
            boolean[] userEmptyCache,
            boolean withHistory,
            boolean askFailed) {
        return compile(trace, start, userEmptyCache, withHistory, askFailed, null);
    }

    /** The stream an oracle replay plays, with the recording's decisions; {@code decisions} collects them. */
    static RequestStream compileForOracle(
            List<TraceEntry> trace, WindowStart start, RecordedDecisions.Builder decisions) {
        return compile(trace, start, null, false, false, decisions);
    }

    static boolean isRelease(TraceAction a) {
        return a == TraceAction.SEGMENT_FREE || a == TraceAction.SEGMENT_UNMAP;
    }

    private static RequestStream compile(
            List<TraceEntry> trace,
            WindowStart start,
            boolean @Nullable [] emptyCacheAt,
            boolean withHistory,
            boolean askFailed,
            RecordedDecisions.@Nullable Builder decisions) {
        List<SegmentInfo> startState = start.segments();
        FreeMatches frees = start.frees();
        if (frees.entries() != trace.size()) {
            throw new IllegalArgumentException(
                    "device " + start.device() + ": the start state was rebuilt from a trace of " + frees.entries()
                            + " entries, not this one of " + trace.size());
        }
        RequestStream.Builder b = RequestStream.builder(frees.opsAtMost()).startState(startState);
        // Start blocks by address, for the frees the rebuild matched to one (frees of window allocs need no lookup).
        AddressTable<Void> startSlots = AddressTable.forInts(2 * startState.size()); // about a block per segment
        int[] next = {0};
        RequestStream.forEachLiveBlock(startState, (seg, blk) -> {
            if (blk.address() != 0) {
                startSlots.putInt(blk.address(), next[0], -1);
            }
            next[0]++;
        });
        int startBlocks = next[0];
        boolean hasCompletions = frees.hasCompletions();
        if (decisions != null) {
            decisions.hasCompletions(hasCompletions);
            decisions.expectSlots(startBlocks + frees.allocEntries());
        }
        Compilation c = new Compilation(
                b,
                EntryFields.of(trace),
                trace,
                frees,
                startSlots,
                startBlocks,
                emptyCacheAt,
                withHistory,
                askFailed,
                decisions);
        for (int from = 0; from < trace.size(); from += Compilation.CHUNK) {
            c.run(from, Math.min(trace.size(), from + Compilation.CHUNK));
        }
        return b.build();
    }

    /** Gives the last op its entry's stack (as a site) and recorded time. */
    private static void stamp(RequestStream.Builder b, TraceEntry e) {
        List<Frame> f = e.frames();
        if (f != null) {
            b.atSite(b.site(f));
        }
        b.at(e.timeUs());
    }

    /** Keeps what an entry recorded beside its op, if any: a driver call, an OOM. */
    private static void recordOnly(RecordedDecisions.Builder decisions, int i, TraceAction a) {
        if (a.isSegmentEvent()) {
            decisions.call(i);
        } else if (a == TraceAction.OOM) {
            decisions.oomEntry();
        }
    }

    /**
     * The compile's loop, a chunk of trace entries at a time, with the state it carries from entry to entry (whether
     * the previous entry was a release, the asks so far): a class of its own rather than a loop of the compile so
     * that the JIT compiles this small method early (and from the launcher's ahead-of-time profile), where a cold
     * command would walk millions of entries in the interpreter and in profiled code until it had compiled the whole
     * compile.
     */
    private static final class Compilation {
        /** Entries per call of {@link #run}: enough to make the call's cost nothing, few enough to compile it soon. */
        static final int CHUNK = 1 << 10;

        private final RequestStream.Builder b;
        private final EntryFields fields;
        private final List<TraceEntry> trace;
        private final FreeMatches frees;
        private final AddressTable<Void> startSlots;
        private final int startBlocks;
        private final boolean hasCompletions;
        private final boolean @Nullable [] emptyCacheAt;
        private final boolean withHistory;
        private final boolean askFailed;
        private final RecordedDecisions.@Nullable Builder decisions;
        private boolean inRelease;
        /** Alloc entries compiled so far (the ordinal the next one has among the window's alloc entries). */
        private int allocOrdinal;
        /**
         * The alloc ordinals at which a failed request was asked again ({@code askCount} of them, ascending): each took
         * a slot of its own, so the slot of alloc {@code m} is {@code startBlocks + m} plus the asks at or before it.
         */
        private int[] asks = new int[0];

        private int askCount;
        /** The chunk's columns, read in bulk before its loop. */
        private final byte[] actions = new byte[CHUNK];

        private final long[] addrs = new long[CHUNK];
        private final long[] sizes = new long[CHUNK];
        private final long[] streams = new long[CHUNK];

        Compilation(
                RequestStream.Builder b,
                EntryFields fields,
                List<TraceEntry> trace,
                FreeMatches frees,
                AddressTable<Void> startSlots,
                int startBlocks,
                boolean @Nullable [] emptyCacheAt,
                boolean withHistory,
                boolean askFailed,
                RecordedDecisions.@Nullable Builder decisions) {
            this.b = b;
            this.fields = fields;
            this.trace = trace;
            this.frees = frees;
            this.startSlots = startSlots;
            this.startBlocks = startBlocks;
            this.hasCompletions = frees.hasCompletions();
            this.emptyCacheAt = emptyCacheAt;
            this.withHistory = withHistory;
            this.askFailed = askFailed;
            this.decisions = decisions;
        }

        /**
         * Entries {@code from} to {@code to} (exclusive), in order; the state carried between entries is copied into
         * locals for the chunk and back after it, so the loop keeps it in registers.
         */
        void run(int from, int to) {
            RequestStream.Builder b = this.b;
            boolean @Nullable [] emptyCacheAt = this.emptyCacheAt;
            RecordedDecisions.@Nullable Builder decisions = this.decisions;
            boolean inRelease = this.inRelease;
            byte[] actions = this.actions;
            long[] addrs = this.addrs;
            long[] sizes = this.sizes;
            long[] streams = this.streams;
            fields.actionOrdinals(from, to, actions);
            fields.addrs(from, to, addrs);
            fields.sizes(from, to, sizes);
            fields.streams(from, to, streams);
            for (int i = from; i < to; i++) {
                int j = i - from;
                int a = actions[j];
                boolean release = a == SEGMENT_FREE || a == SEGMENT_UNMAP;
                // Without a user's choice (an oracle), every run of release entries is an empty_cache.
                boolean emptyCache = emptyCacheAt != null ? emptyCacheAt[i] : release && !inRelease;
                inRelease = release;
                if (a == ALLOC) {
                    int slot = b.alloc(sizes[j], streams[j], i);
                    allocOrdinal++;
                    if (decisions != null) {
                        decisions.alloc(slot, addrs[j]);
                    }
                } else if (a == FREE_COMPLETED || (a == FREE_REQUESTED && !hasCompletions)) {
                    int match = frees.of(i);
                    int s = match >= 0
                            ? slotOfAlloc(match)
                            : match == FreeMatches.START_BLOCK ? startSlots.getInt(addrs[j], -1) : -1;
                    if (s >= 0 && b.isLive(s)) {
                        b.free(s, i);
                    } else {
                        if (decisions != null) {
                            decisions.droppedFree(i);
                        }
                        continue;
                    }
                } else if (emptyCache) {
                    b.emptyCache(i);
                } else if (a == OOM && askFailed && sizes[j] > 0) {
                    // The request that failed, asked again. Served, it is freed at once: what the program would have
                    // done with it is unknown, and the window goes on as recorded.
                    int failed = b.alloc(sizes[j], streams[j], i);
                    if (askCount == asks.length) {
                        asks = Arrays.copyOf(asks, Math.max(4, askCount * 2));
                    }
                    asks[askCount++] = allocOrdinal;
                    if (withHistory) {
                        stamp(b, trace.get(i));
                    }
                    b.free(failed, i);
                } else {
                    if (decisions != null) {
                        recordOnly(decisions, i, ACTIONS[a]);
                    }
                    continue;
                }
                if (decisions != null) {
                    recordOnly(decisions, i, ACTIONS[a]);
                }
                if (withHistory) {
                    stamp(b, trace.get(i));
                }
            }
            this.inRelease = inRelease;
        }

        /** The slot of the window's alloc entry of ordinal {@code m}: after the start blocks and the asks before it. */
        private int slotOfAlloc(int m) {
            if (askCount == 0) {
                return startBlocks + m;
            }
            int lo = 0; // the asks at ordinals <= m (made before alloc m): an upper bound, as ordinals repeat
            int hi = askCount;
            while (lo < hi) {
                int mid = (lo + hi) >>> 1;
                if (asks[mid] <= m) {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            return startBlocks + m + lo;
        }
    }
}
