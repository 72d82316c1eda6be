package io.gpumem.trace.replay;

import io.gpumem.engine.RequestStream;
import java.util.Arrays;

/**
 * What a recording decided, laid beside the {@link RequestStream} an oracle replay plays: the address the recorded
 * run got for each slot's alloc, and which trace entries are its driver calls ({@code segment_alloc},
 * {@code segment_map}, {@code segment_free}, {@code segment_unmap}), so that {@link DeviceReplay} compares the
 * model's decisions with them without touching a trace entry per op. Built by {@link WindowStreams#compileForOracle}
 * in the same pass that compiles the stream.
 *
 * <p>Layout (primitive arrays, nothing per op: the player walks the ops and these side by side):
 * <ul>
 *   <li>{@code address[slot]}: the recorded address of the ALLOC op that fills {@code slot} (0 for the start state's
 *       slots, which no op of the window fills);</li>
 *   <li>{@code calls}: the trace indices of the recorded driver calls, ascending (the entries themselves are read
 *       only when a call is compared: a few per hundred requests). An op is compared with the calls before its
 *       entry that no earlier op was, so the player finds them with a cursor that only moves forward; an
 *       EMPTY_CACHE op (the first entry of a run of {@code segment_free}/{@code segment_unmap} entries) owns the
 *       calls of its run, the release entries that follow its own one after another in the trace.</li>
 * </ul>
 * Frees the stream drops (of addresses where no block of the start state or the window is live: an inconsistent or
 * damaged recording) are kept by trace index ({@code dropped}): the replay frees whatever the model holds at the
 * recorded address, as a free by address would. {@code address} may be longer than the stream's slots (the
 * builder's, sized from a bound, kept when close to it); nothing reads it past them. Immutable once built.
 */
final class RecordedDecisions {

    final long[] address;
    final int[] calls;
    final int[] dropped;
    final long oomEntries;
    /** Whether the trace has {@code free_completed} entries (frees happen at completion). */
    final boolean hasCompletions;

    private RecordedDecisions(Builder b, int slots) {
        b.ensureSlots(slots);
        boolean adopt = b.address.length - slots <= b.address.length / 8;
        this.address = adopt ? b.address : Arrays.copyOf(b.address, slots);
        this.calls = Arrays.copyOf(b.calls, b.callCount);
        this.dropped = Arrays.copyOf(b.dropped, b.droppedCount);
        this.oomEntries = b.oomEntries;
        this.hasCompletions = b.hasCompletions;
    }

    /** Collects the recorded decisions while {@link WindowStreams} compiles the stream; single use. */
    static final class Builder {
        /** By slot; sized by {@link #expectSlots} (it grows past that). */
        private long[] address = new long[0];

        private int[] calls = new int[64];
        private int callCount;
        private int[] dropped = new int[4];
        private int droppedCount;
        private long oomEntries;
        private boolean hasCompletions;

        /** Makes room for {@code n} slots at once (the compile knows the start state's and the window's). */
        void expectSlots(int n) {
            ensureSlots(n);
        }

        private void ensureSlots(int n) {
            if (n > address.length) {
                address = Arrays.copyOf(address, Math.max(n, address.length * 2));
            }
        }

        /** The driver call recorded at trace entry {@code entry} (entries come in ascending order). */
        void call(int entry) {
            calls = append(calls, callCount++, entry);
        }

        /** The ALLOC op just added fills {@code slot}; the recording gave it {@code recordedAddress}. */
        void alloc(int slot, long recordedAddress) {
            ensureSlots(slot + 1);
            address[slot] = recordedAddress;
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

        /** The decisions of a stream of {@code slots} slots. */
        RecordedDecisions build(int slots) {
            return new RecordedDecisions(this, slots);
        }
    }
}
