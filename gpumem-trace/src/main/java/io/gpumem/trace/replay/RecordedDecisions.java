package io.gpumem.trace.replay;

import io.gpumem.engine.RequestStream;
import io.gpumem.history.TraceAction;
import java.util.Arrays;

/**
 * What a recording decided, laid beside the {@link RequestStream} an oracle replay plays: the address the recorded
 * run got for each ALLOC op, and the driver calls it recorded ({@code segment_alloc}, {@code segment_map},
 * {@code segment_free}, {@code segment_unmap}), so that {@link DeviceReplay} compares the model's decisions with
 * them without touching a trace entry per op. Built by {@link WindowStreams#compileForOracle} in the same pass
 * that compiles the stream.
 *
 * <p>Layout (parallel primitive arrays, no object per op or call):
 * <ul>
 *   <li>{@code address[k]}: the recorded address of ALLOC op {@code k} (0 for other ops);</li>
 *   <li>{@code callsBefore[k]}: how many recorded driver calls precede op {@code k}'s trace entry
 *       ({@code callsBefore[length]} is the total): the calls of an ALLOC op are those since the last comparison,
 *       and an EMPTY_CACHE op (the first entry of a run of {@code segment_free}/{@code segment_unmap} entries)
 *       owns the {@code runLength[k]} calls of its run, which start at {@code callsBefore[k]};</li>
 *   <li>{@code callEntry}, {@code callAction}, {@code callAddress}, {@code callSize}: each driver call's trace
 *       index, action, address and size, in trace order.</li>
 * </ul>
 * Frees the stream drops (of addresses where no block of the start state or the window is live: an
 * inconsistent or damaged recording) are kept by entry and address ({@code droppedEntry}, {@code droppedAddress}):
 * the replay frees whatever the model holds at that address, as a free by address would. Immutable once built.
 */
final class RecordedDecisions {

    final long[] address;
    final int[] callsBefore;
    final int[] runLength;
    final int[] callEntry;
    final TraceAction[] callAction;
    final long[] callAddress;
    final long[] callSize;
    final int calls;
    final int[] droppedEntry;
    final long[] droppedAddress;
    final int droppedFrees;
    final long oomEntries;
    /** Whether the trace has {@code free_completed} entries (frees happen at completion). */
    final boolean hasCompletions;

    private RecordedDecisions(Builder b, int length) {
        this.address = Arrays.copyOf(b.address, length);
        this.callsBefore = Arrays.copyOf(b.callsBefore, length + 1);
        this.callsBefore[length] = b.calls;
        this.runLength = Arrays.copyOf(b.runLength, length);
        this.calls = b.calls;
        this.callEntry = Arrays.copyOf(b.callEntry, calls);
        this.callAction = Arrays.copyOf(b.callAction, calls);
        this.callAddress = Arrays.copyOf(b.callAddress, calls);
        this.callSize = Arrays.copyOf(b.callSize, calls);
        this.droppedFrees = b.droppedFrees;
        this.droppedEntry = Arrays.copyOf(b.droppedEntry, droppedFrees);
        this.droppedAddress = Arrays.copyOf(b.droppedAddress, droppedFrees);
        this.oomEntries = b.oomEntries;
        this.hasCompletions = b.hasCompletions;
    }

    /** Collects the recorded decisions while {@link WindowStreams} compiles the stream; single use. */
    static final class Builder {
        private long[] address;
        private int[] callsBefore;
        private int[] runLength;
        private int[] callEntry = new int[64];
        private TraceAction[] callAction = new TraceAction[64];
        private long[] callAddress = new long[64];
        private long[] callSize = new long[64];
        private int calls;
        private int[] droppedEntry = new int[4];
        private long[] droppedAddress = new long[4];
        private int droppedFrees;
        private long oomEntries;
        private boolean hasCompletions;

        /** A builder sized for about {@code expectedOps} ops before it grows. */
        Builder(int expectedOps) {
            int n = Math.max(16, expectedOps);
            address = new long[n];
            callsBefore = new int[n];
            runLength = new int[n];
        }

        /** A recorded driver call at trace entry {@code entry}. */
        void call(int entry, TraceAction action, long addr, long size) {
            if (calls == callEntry.length) {
                int n = calls * 2;
                callEntry = Arrays.copyOf(callEntry, n);
                callAction = Arrays.copyOf(callAction, n);
                callAddress = Arrays.copyOf(callAddress, n);
                callSize = Arrays.copyOf(callSize, n);
            }
            callEntry[calls] = entry;
            callAction[calls] = action;
            callAddress[calls] = addr;
            callSize[calls++] = size;
        }

        /** Op {@code k} was just added; {@code recordedAddress} is its recorded address (ALLOC) or 0. */
        void op(int k, long recordedAddress) {
            if (k == address.length) {
                int n = k * 2;
                address = Arrays.copyOf(address, n);
                callsBefore = Arrays.copyOf(callsBefore, n);
                runLength = Arrays.copyOf(runLength, n);
            }
            address[k] = recordedAddress;
            callsBefore[k] = calls;
        }

        /** One more driver call belongs to the release run that EMPTY_CACHE op {@code k} stands for. */
        void extendRun(int k) {
            runLength[k]++;
        }

        void droppedFree(int entry, long addr) {
            if (droppedFrees == droppedEntry.length) {
                droppedEntry = Arrays.copyOf(droppedEntry, droppedFrees * 2);
                droppedAddress = Arrays.copyOf(droppedAddress, droppedFrees * 2);
            }
            droppedEntry[droppedFrees] = entry;
            droppedAddress[droppedFrees++] = addr;
        }

        void hasCompletions(boolean completions) {
            hasCompletions = completions;
        }

        void oomEntry() {
            oomEntries++;
        }

        RecordedDecisions build(int length) {
            return new RecordedDecisions(this, length);
        }
    }
}
