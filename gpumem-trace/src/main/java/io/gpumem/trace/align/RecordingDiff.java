package io.gpumem.trace.align;

import io.gpumem.size.ByteSize;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * An aligned comparison of two recordings of one program: per allocation site, the requests and bytes of each, and
 * what the site holds at each recording's peak allocated and peak reserved moments, so that the difference between
 * the two peaks splits into the sites that cause it.
 *
 * <p>A site is a call site when both recordings carry frames (the innermost Python line, or the ATen operator of a
 * frame list without Python: see {@link FrameSignatures#label}); without frames it is the request's position in
 * the first recording's {@link StepStructure step}, or its index in the warm-up before the steps repeat. A matched
 * pair counts under the first recording's site, so the two sides of a row are the same requests; a request present
 * in one recording only counts under its own site.
 *
 * <p>Invariants: over all sites (including {@link #BEFORE_WINDOW}, the blocks live from before the window, listed
 * unless it holds nothing at either recording's peaks), the bytes held at a recording's peak allocated add up to that
 * peak, and those held at its peak reserved add up to its allocated bytes at that moment; the rest of the peak
 * reserved is cached, unused memory.
 */
public final class RecordingDiff {

    /** The site of blocks allocated before the window began (no request of the window made them). */
    public static final String BEFORE_WINDOW = "(allocated before the window)";

    /**
     * Below this matched fraction of either recording's requests the two are not taken as one program
     * ({@link #sameProgram(RequestAlignment)}).
     */
    public static final double SAME_PROGRAM = 0.5;

    private final RequestAlignment alignment;
    private final List<Site> sites;

    private RecordingDiff(RequestAlignment alignment, List<Site> sites) {
        this.alignment = alignment;
        this.sites = sites;
    }

    /** Splits both recordings' requests and peaks by site. */
    public static RecordingDiff of(RequestAlignment alignment) {
        RequestSequence a = alignment.first();
        RequestSequence b = alignment.second();
        boolean byFrames = alignment.signal() != RequestAlignment.Signal.ORDER;
        StepStructure stepsA = byFrames ? null : StepStructure.of(a);
        StepStructure stepsB = byFrames ? null : StepStructure.of(b);
        Map<String, Site.Builder> byKey = new LinkedHashMap<>();
        for (int r = 0; r < a.size(); r++) {
            String key = key(a, r, stepsA);
            byKey.computeIfAbsent(key, Site.Builder::new).add(0, a, r, alignment.matchOfA(r) >= 0);
        }
        for (int r = 0; r < b.size(); r++) {
            int m = alignment.matchOfB(r);
            String key = m >= 0 ? key(a, m, stepsA) : key(b, r, stepsB);
            byKey.computeIfAbsent(key, Site.Builder::new).add(1, b, r, m >= 0);
        }
        Site.Builder before = byKey.computeIfAbsent(BEFORE_WINDOW, Site.Builder::new);
        long[] heldAtPeak = new long[2];
        long[] heldAtReserved = new long[2];
        for (Site.Builder s : byKey.values()) {
            for (int side = 0; side < 2; side++) {
                heldAtPeak[side] += s.atPeakAllocated[side];
                heldAtReserved[side] += s.atPeakReserved[side];
            }
        }
        RequestSequence[] both = {a, b};
        for (int side = 0; side < 2; side++) {
            before.atPeakAllocated[side] = both[side].peakAllocated() - heldAtPeak[side];
            before.atPeakReserved[side] = both[side].allocatedAtPeakReserved() - heldAtReserved[side];
        }
        List<Site> sites = new ArrayList<>();
        for (Site.Builder s : byKey.values()) {
            if (s == before && before.holdsNothing()) {
                continue; // both windows start empty: a row of zeros would say nothing
            }
            sites.add(s.build());
        }
        sites.sort(Comparator.comparingLong((Site s) -> -Math.abs(s.peakAllocatedDifference()))
                .thenComparingLong(s -> -Math.abs(s.peakReservedDifference()))
                .thenComparingLong(s -> -Math.abs(s.bytes(1) - s.bytes(0)))
                .thenComparing(Site::name));
        return new RecordingDiff(alignment, List.copyOf(sites));
    }

    private static String key(RequestSequence s, int r, StepStructure steps) {
        if (steps == null) {
            return s.siteOf(r) < 0 ? "(no frames)" : s.signatures().label(s.siteOf(r));
        }
        if (r < steps.warmUp()) {
            // before the steps repeat a request has no position in the step: named by its index, it shares its site
            // with the request at that index of the other recording's warm-up, never with a step's request
            return "warm-up request " + r;
        }
        return "step position " + steps.positionInStep(r);
    }

    public RequestAlignment alignment() {
        return alignment;
    }

    /** Whether enough requests match for the two to be taken as one program ({@link #sameProgram(RequestAlignment)}). */
    public boolean sameProgram() {
        return sameProgram(alignment);
    }

    /**
     * The one rule by which two aligned recordings are one program (diff's {@code same_program}, predict's refusal):
     * at least {@link #SAME_PROGRAM} of <em>each</em> recording's requests match. Two sizes of one program issue the
     * same requests, so most of both match; judging by the smaller alone would take a recording that another contains
     * (inference and the training whose forward pass it shares) for one program, and leave most of the larger's
     * requests without a counterpart.
     */
    public static boolean sameProgram(RequestAlignment alignment) {
        return alignment.matchedFractionOfLarger() >= SAME_PROGRAM;
    }

    /**
     * How much of each recording matched, in words, for the sentence that says two recordings are not one program:
     * "100.0% of A's 1280 requests and 19.3% of B's 6624 requests match (one program matches at least 50% of each)".
     */
    public static String matchedOfEach(RequestAlignment alignment, String first, String second) {
        int na = alignment.first().size();
        int nb = alignment.second().size();
        return String.format(
                Locale.ROOT,
                "%.1f%% of %s's %d requests and %.1f%% of %s's %d requests match (one program matches at least %.0f%%"
                        + " of each)",
                100.0 * alignment.matched() / na,
                first,
                na,
                100.0 * alignment.matched() / nb,
                second,
                nb,
                100 * SAME_PROGRAM);
    }

    /** Every site, largest difference at peak allocated first (then at peak reserved, then in bytes, then by name). */
    public List<Site> sites() {
        return sites;
    }

    /**
     * The part of the difference in peak allocated (second minus first) that the first {@code n} {@link #sites()}
     * make, as a fraction; NaN when the peaks are equal.
     */
    public double shareOfPeakAllocatedDifference(int n) {
        long delta = alignment.second().peakAllocated() - alignment.first().peakAllocated();
        if (delta == 0) {
            return Double.NaN;
        }
        long top = 0;
        for (int i = 0; i < Math.min(n, sites.size()); i++) {
            top += sites.get(i).peakAllocatedDifference();
        }
        return (double) top / delta;
    }

    /**
     * Whether both recordings hold their driver calls ({@link RequestSequence#reservedRecorded}), so that their
     * reserved bytes, and what the sites hold at each peak reserved, can be compared.
     */
    public boolean reservedRecorded() {
        return alignment.first().reservedRecorded() && alignment.second().reservedRecorded();
    }

    /**
     * A reserved-memory figure of {@code s} as the diff's text and page print it: its bytes, or {@code n/a} where
     * {@code s} holds no driver calls ({@link RequestSequence#reservedRecorded}) and the figure is 0 for want of data.
     */
    public static String reservedText(RequestSequence s, long bytes) {
        return s.reservedRecorded() ? ByteSize.format(bytes) : "n/a";
    }

    /**
     * The sentence the diff's text and page add when recording {@code side} ("A" or "B") reached its peak reserved
     * only at its window's start (reserved, then released before the window reserved as much again), so that its
     * figures at peak reserved are the start's blocks, not the window's; null otherwise.
     */
    public static @Nullable String peakReservedAtStart(RequestSequence s, String side) {
        return s.reservedRecorded() && s.peakReservedEntry() < 0 && s.peakReserved() > 0
                ? side + "'s peak reserved is its window's start, before any request of the window: at it only blocks"
                        + " from before the window are live."
                : null;
    }

    /** Cached, unused bytes at a recording's peak reserved (side 0 the first, 1 the second). */
    public long cachedAtPeakReserved(int side) {
        RequestSequence s = side == 0 ? alignment.first() : alignment.second();
        return s.peakReserved() - s.allocatedAtPeakReserved();
    }

    /**
     * One allocation site's figures in both recordings ({@code side} 0 is the first, 1 the second).
     */
    public static final class Site {
        private final String name;
        private final long[] requests;
        private final long[] matched;
        private final long[] bytes;
        private final long[] atPeakAllocated;
        private final long[] atPeakReserved;

        private Site(Builder b) {
            name = b.name;
            requests = b.requests.clone();
            matched = b.matched.clone();
            bytes = b.bytes.clone();
            atPeakAllocated = b.atPeakAllocated.clone();
            atPeakReserved = b.atPeakReserved.clone();
        }

        public String name() {
            return name;
        }

        public long requests(int side) {
            return requests[side];
        }

        /** Requests of this side matched to the other recording. */
        public long matched(int side) {
            return matched[side];
        }

        /** Bytes requested over the window (rounded sizes). */
        public long bytes(int side) {
            return bytes[side];
        }

        /** Bytes the site holds at that recording's peak allocated moment. */
        public long atPeakAllocated(int side) {
            return atPeakAllocated[side];
        }

        /** Bytes the site holds at that recording's peak reserved moment. */
        public long atPeakReserved(int side) {
            return atPeakReserved[side];
        }

        public long peakAllocatedDifference() {
            return atPeakAllocated[1] - atPeakAllocated[0];
        }

        public long peakReservedDifference() {
            return atPeakReserved[1] - atPeakReserved[0];
        }

        static final class Builder {
            final String name;
            final long[] requests = new long[2];
            final long[] matched = new long[2];
            final long[] bytes = new long[2];
            final long[] atPeakAllocated = new long[2];
            final long[] atPeakReserved = new long[2];

            Builder(String name) {
                this.name = name;
            }

            void add(int side, RequestSequence s, int r, boolean isMatched) {
                requests[side]++;
                if (isMatched) {
                    matched[side]++;
                }
                long size = s.roundedSizeOf(r);
                bytes[side] += size;
                if (s.peakAllocatedEntry() >= 0 && s.liveAt(r, s.peakAllocatedEntry())) {
                    atPeakAllocated[side] += size;
                }
                if (s.peakReservedEntry() >= 0 && s.liveAt(r, s.peakReservedEntry())) {
                    atPeakReserved[side] += size;
                }
            }

            Site build() {
                return new Site(this);
            }

            /** Whether the site holds no byte at either recording's peaks (it has no request of its own). */
            boolean holdsNothing() {
                for (int side = 0; side < 2; side++) {
                    if (requests[side] != 0 || atPeakAllocated[side] != 0 || atPeakReserved[side] != 0) {
                        return false;
                    }
                }
                return true;
            }
        }
    }
}
