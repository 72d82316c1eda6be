package io.gpumem.trace.replay;

import io.gpumem.engine.RequestStream;
import java.util.Arrays;

/**
 * What a recording decided, laid beside the {@link RequestStream} an oracle replay plays: the address the recorded
 * run got for each ALLOC op, and where its driver calls ({@code segment_alloc}, {@code segment_map},
 * {@code segment_free}, {@code segment_unmap}) stand relative to the ops, so that {@link DeviceReplay} compares the
 * model's decisions with them without touching a trace entry per op. Built by
 * {@link WindowStreams#compileForOracle} in the same pass that compiles the stream.
 *
 * <p>Layout (primitive arrays, no object per op):
 * <ul>
 *   <li>{@code address[k]}: the recorded address of ALLOC op {@code k} (0 for other ops);</li>
 *   <li>{@code calls}: the trace indices of the recorded driver calls, in trace order (the entries themselves are
 *       read only when a call is compared: a few per hundred requests);</li>
 *   <li>{@code callsBefore[k]}: how many recorded driver calls precede op {@code k}'s trace entry
 *       ({@code callsBefore[length]} is the total): an ALLOC op is compared with the calls since the last
 *       comparison, and an EMPTY_CACHE op (the first entry of a run of {@code segment_free}/{@code segment_unmap}
 *       entries) owns the {@code runLength[k]} calls of its run, which start at {@code callsBefore[k]}.</li>
 * </ul>
 * Frees the stream drops (of addresses where no block of the start state or the window is live: an inconsistent or
 * damaged recording) are kept by trace index ({@code dropped}): the replay frees whatever the model holds at the
 * recorded address, as a free by address would. The per-op arrays may be longer than the stream (the builder's,
 * sized from a bound, kept when close to it); nothing reads them past its length. Immutable once built.
 */
final class RecordedDecisions {

    final long[] address;
    final int[] callsBefore;
    final int[] runLength;
    final int[] calls;
    final int[] dropped;
    final long oomEntries;
    /** Whether the trace has {@code free_completed} entries (frees happen at completion). */
    final boolean hasCompletions;

    private RecordedDecisions(Builder b, int length) {
        b.ensureOps(length + 1);
        boolean adopt = b.address.length - length <= b.address.length / 8;
        this.address = adopt ? b.address : Arrays.copyOf(b.address, length);
        this.callsBefore = adopt ? b.callsBefore : Arrays.copyOf(b.callsBefore, length + 1);
        this.callsBefore[length] = b.callCount;
        this.runLength = adopt ? b.runLength : Arrays.copyOf(b.runLength, length);
        this.calls = Arrays.copyOf(b.calls, b.callCount);
        this.dropped = Arrays.copyOf(b.dropped, b.droppedCount);
        this.oomEntries = b.oomEntries;
        this.hasCompletions = b.hasCompletions;
    }

    /** Collects the recorded decisions while {@link WindowStreams} compiles the stream; single use. */
    static final class Builder {
        /** Per op (one more for the total of {@code callsBefore}); sized from the compile's bound on ops. */
        private long[] address;

        private int[] callsBefore;
        private int[] runLength;
        private int[] calls = new int[64];
        private int callCount;
        private int[] dropped = new int[4];
        private int droppedCount;
        private long oomEntries;
        private boolean hasCompletions;

        /** A builder for a stream of about {@code ops} ops (it grows past them; a builder builds once). */
        Builder(int ops) {
            int n = ops + 1;
            address = new long[n];
            callsBefore = new int[n];
            runLength = new int[n];
        }

        /** Makes room for {@code n} ops. */
        private void ensureOps(int n) {
            if (n > address.length) {
                int grown = Math.max(n, address.length * 2);
                address = Arrays.copyOf(address, grown);
                callsBefore = Arrays.copyOf(callsBefore, grown);
                runLength = Arrays.copyOf(runLength, grown);
            }
        }

        /** The driver call recorded at trace entry {@code entry}. */
        void call(int entry) {
            calls = append(calls, callCount++, entry);
        }

        /** Op {@code k} was just added; {@code recordedAddress} is its recorded address (ALLOC) or 0. */
        void op(int k, long recordedAddress) {
            ensureOps(k + 1);
            address[k] = recordedAddress;
            callsBefore[k] = callCount;
        }

        /** One more driver call belongs to the release run that EMPTY_CACHE op {@code k} stands for. */
        void extendRun(int k) {
            runLength[k]++;
        }

        /** The free recorded at trace entry {@code entry} frees no block the stream knows. */
        void droppedFree(int entry) {
            dropped = append(dropped, droppedCount++, entry);
        }

        void hasCompletions(boolean completions) {
            hasCompletions = completions;
        }

        void oomEntry() {
            oomEntries++;
        }

        private static int[] append(int[] to, int at, int value) {
            int[] out = at == to.length ? Arrays.copyOf(to, at * 2) : to;
            out[at] = value;
            return out;
        }

        RecordedDecisions build(int length) {
            return new RecordedDecisions(this, length);
        }
    }
}
