package io.gpumem.trace.replay;

import java.util.List;

/**
 * Fidelity of an oracle replay of one device trace.
 *
 * @param allocs          recorded "alloc" entries replayed
 * @param exact           of those, placed by the model at exactly the recorded address
 * @param segmentEvents   recorded {@code segment_*} entries
 * @param segmentMatched  of those, reproduced by the model with the same action, address and size, in order
 * @param releaseRuns     runs of recorded {@code segment_free}/{@code segment_unmap} (replayed as empty_cache)
 * @param endSegments     segments in the snapshot's end state for this device, plus any the model holds at an
 *                        address where the snapshot has none
 * @param endSegmentsSame of those, recorded segments equal to the model's: same stream, pool and kind, and block by
 *                        block (address, size, state)
 * @param firstMismatch   the first difference, or {@code null}
 * @param notes           explanations (entries skipped and why)
 */
public record DeviceFidelity(
        int device,
        long entries,
        long allocs,
        long exact,
        long segmentEvents,
        long segmentMatched,
        long releaseRuns,
        long endSegments,
        long endSegmentsSame,
        Mismatch firstMismatch,
        List<String> notes) {

    /** Every alloc placed as recorded, every driver call reproduced, and the end state the recorded one. */
    public boolean isExact() {
        return exact == allocs && segmentMatched == segmentEvents && endSegmentsSame == endSegments;
    }
}
