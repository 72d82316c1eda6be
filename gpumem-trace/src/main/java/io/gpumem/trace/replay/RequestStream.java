package io.gpumem.trace.replay;

import io.gpumem.alloc.AddressTable;
import io.gpumem.history.BlockInfo;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.window.WindowStart;
import java.util.List;

/**
 * A device trace compiled for fast what-if replays: the requests as parallel primitive arrays, with every free
 * already matched to the block it frees, so a replay touches no hash map and boxes nothing per entry.
 *
 * <p>Blocks are numbered by <i>slot</i>: slots {@code 0 .. startBlocks-1} are the live blocks of the rebuilt
 * start state (in the order {@link #forEachStartBlock} visits them), the following slots are the window's
 * allocs in trace order. A replay keeps the address its allocator returned for each slot in a {@code long[]}.
 *
 * <p>Ops: {@link #ALLOC} (slot, size, stream), {@link #FREE} (slot; frees of blocks the start state does not
 * hold are dropped at compile time), {@link #EMPTY_CACHE} (a release run the user asked for, see
 * {@link WhatIfReplay#classifyReleaseRuns}). A trace with {@code free_completed} entries frees at completion,
 * one without at {@code free_requested}.
 */
final class RequestStream {

    static final byte ALLOC = 1;
    static final byte FREE = 2;
    static final byte EMPTY_CACHE = 3;

    final byte[] op;
    final int[] slot;
    final long[] size;
    final long[] stream;
    /** Index into {@link #streams} of each op's stream. */
    final int[] streamIndex;
    /** The distinct stream handles of the trace and the start state, in ascending order. */
    final long[] streams;
    final int length;
    final int startBlocks;
    final int slots;
    /** Number of ALLOC ops. */
    final int allocs;
    /** Entries of the trace each op came from (for diagnostics). */
    final int[] entry;

    RequestStream(List<TraceEntry> trace, WindowStart start, boolean[] userEmptyCache) {
        int n = trace.size();
        byte[] op = new byte[n];
        int[] slot = new int[n];
        long[] size = new long[n];
        long[] stream = new long[n];
        int[] entry = new int[n];
        AddressTable<Void> live = AddressTable.forInts(1024);
        int[] next = {0};
        forEachStartBlock(start, (seg, b) -> live.putInt(b.address(), next[0]++, -1));
        int startCount = next[0];
        int slots = startCount;
        boolean hasCompletions = false;
        for (TraceEntry e : trace) {
            if (e.action() == TraceAction.FREE_COMPLETED) {
                hasCompletions = true;
                break;
            }
        }
        int k = 0;
        for (int i = 0; i < n; i++) {
            TraceEntry e = trace.get(i);
            TraceAction a = e.action();
            if (a == TraceAction.ALLOC) {
                op[k] = ALLOC;
                slot[k] = slots;
                size[k] = e.size();
                stream[k] = e.stream();
                entry[k++] = i;
                if (e.addr() != 0) {
                    live.putInt(e.addr(), slot[k - 1], -1);
                }
                slots++;
            } else if (a == TraceAction.FREE_COMPLETED || (a == TraceAction.FREE_REQUESTED && !hasCompletions)) {
                int s = e.addr() == 0 ? -1 : live.removeInt(e.addr(), -1);
                if (s >= 0) {
                    op[k] = FREE;
                    slot[k] = s;
                    entry[k++] = i;
                }
            } else if (userEmptyCache[i]) {
                op[k] = EMPTY_CACHE;
                entry[k++] = i;
            }
        }
        java.util.TreeSet<Long> distinct = new java.util.TreeSet<>(Long::compareUnsigned);
        for (int j = 0; j < k; j++) {
            if (op[j] == ALLOC) {
                distinct.add(stream[j]);
            }
        }
        for (SegmentInfo seg : start.segments()) {
            distinct.add(seg.stream());
        }
        this.streams = distinct.stream().mapToLong(Long::longValue).toArray();
        this.streamIndex = new int[k];
        for (int j = 0; j < k; j++) {
            if (op[j] == ALLOC) {
                streamIndex[j] = streamIndexOf(stream[j]);
            }
        }
        this.op = op;
        this.slot = slot;
        this.size = size;
        this.stream = stream;
        this.entry = entry;
        this.length = k;
        this.startBlocks = startCount;
        this.slots = slots;
        int a = 0;
        for (int j = 0; j < k; j++) {
            a += op[j] == ALLOC ? 1 : 0;
        }
        this.allocs = a;
    }

    /** Index of a stream handle in {@link #streams}. */
    int streamIndexOf(long handle) {
        for (int i = 0; i < streams.length; i++) {
            if (streams[i] == handle) {
                return i;
            }
        }
        throw new IllegalArgumentException("stream " + handle + " is not in the trace");
    }

    interface StartBlockVisitor {
        void visit(SegmentInfo segment, BlockInfo block);
    }

    /** Visits the allocated blocks of the start state in slot order. */
    static void forEachStartBlock(WindowStart start, StartBlockVisitor v) {
        for (SegmentInfo seg : start.segments()) {
            for (BlockInfo b : seg.blocks()) {
                if (b.isAllocated()) {
                    v.visit(seg, b);
                }
            }
        }
    }
}
