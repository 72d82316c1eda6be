package io.gpumem.trace.align;

import io.gpumem.alloc.AddressTable;
import java.util.Arrays;
import java.util.Locale;

/**
 * A one-to-one matching of the allocation requests of two recordings of the same program (e.g. one training step
 * recorded at context 128 and at 256): request {@code a} of the first is matched to request {@link #matchOfA(int)}
 * of the second, or to none. A matched request's free is matched too (the free of its block).
 *
 * <h2>Design</h2>
 *
 * Two runs of one program at two sizes issue the same requests in the same order; only sizes change, by a law of the
 * size (see {@link SizeLaw}). What differs besides: the windows may start at different points or hold a different
 * number of steps; some requests exist in one run only (a workspace, a kernel that picks another algorithm at
 * another size). So alignment is an order-preserving matching of two sequences of <em>tokens</em> that maximises
 * the number of matches: their longest common subsequence.
 *
 * <p><b>Tokens.</b> Each request becomes an int that must be equal in both runs for the two requests to match. When
 * both recordings carry stack frames, the token is the pair (call stack, stream rank): the same line of the same code
 * on the same stream. Sizes are left out on purpose: they are what differs. A script edited between the runs moves
 * line numbers (the shared inference recordings differ in the driver script's lines), so when full stacks match
 * less than {@link #GOOD_ENOUGH} of the smaller recording, reduced stacks are tried (the Python frames without their
 * line numbers but the allocating one; C++ frames only where no Python frame exists) and the better matching kept. Without frames (on either side) the token
 * is built from what a size change leaves alone: the stream rank, the request's lifetime in requests (how many
 * requests come before its free, bucketed by powers of two, or "never freed in the window") and whether it asks for
 * the same size as the request before it. That is weaker, so a frameless alignment matches more by chance; the
 * size laws then say how much of it is consistent.
 *
 * <p><b>Algorithm.</b> Myers' O((N+M)·D) difference algorithm in its linear-space form (find the middle snake of the
 * edit graph from both ends, split there, recurse), after removing the common prefix and suffix of each sub-problem
 * and, once up front, every token absent from the other sequence (it can match nothing). D is the number of
 * unmatched requests, small for two sizes of one program, so ~20k requests align in milliseconds.
 * Without frames, the "same size" bit is a hint only: where two laws cross (two requests in a row that differ in
 * size at most values have one size at one value) it flips, so the requests a first pass leaves unmatched between two
 * matched pairs are matched again on tokens without it, gap by gap where a gap holds as many requests of each
 * recording (a flip changes tokens, not counts), and a pair taken one place off is re-matched with its gaps; the
 * first pass's other pairs and their order stand. On the shared families without frames this adds matches (most
 * of them the frames' own pairs) and no row that fits no law (see gpumem-trace/README.md). Two unrelated
 * programs share few tokens; with frames those vanish up front, without frames D is large and the work is bounded by
 * a budget of edit-graph steps ({@link #WORK_BUDGET}); a sub-problem that runs out of budget is left unmatched,
 * which only makes an unrelated pair look more unrelated. Every step is deterministic (no hashing order, no clock).
 *
 * <p>Ties between equally long matchings (the same token repeated in each layer of a model) are broken the way
 * Myers' algorithm breaks them; any of them gives the same per-site figures, since repeated layers repeat sizes.
 */
public final class RequestAlignment {

    /** Matched fraction of the smaller recording above which the full call stacks are kept as the signal. */
    static final double GOOD_ENOUGH = 0.9;

    /** Edit-graph steps allowed per alignment: ~1 s of work; beyond it a sub-problem stays unmatched. */
    static final long WORK_BUDGET = 1_500_000_000L;

    private final RequestSequence a;
    private final RequestSequence b;
    private final int[] matchOfA;
    private final int[] matchOfB;
    private final int matched;
    private final Signal signal;

    private RequestAlignment(RequestSequence a, RequestSequence b, int[] matchOfA, int[] matchOfB, Signal signal) {
        this.a = a;
        this.b = b;
        this.matchOfA = matchOfA;
        this.matchOfB = matchOfB;
        this.signal = signal;
        int n = 0;
        for (int m : matchOfA) {
            if (m >= 0) {
                n++;
            }
        }
        this.matched = n;
    }

    /**
     * Aligns two sequences built with one {@link FrameSignatures} table (their site indices must be comparable).
     */
    public static RequestAlignment align(RequestSequence a, RequestSequence b) {
        if (!(a.framed() && b.framed())) {
            return align(a, b, Signal.ORDER);
        }
        RequestAlignment full = align(a, b, Signal.STACKS);
        if (full.matchedFractionOfSmaller() >= GOOD_ENOUGH) {
            return full;
        }
        RequestAlignment loose = align(a, b, Signal.STACKS_WITHOUT_LINES);
        return loose.matched > full.matched ? loose : full;
    }

    /** Aligns on the given signal (the tokens: see the design notes). */
    public static RequestAlignment align(RequestSequence a, RequestSequence b, Signal signal) {
        AddressTable<Void> ids = AddressTable.forInts();
        int[] ta = tokens(a, signal, true, ids);
        int[] tb = tokens(b, signal, true, ids);
        int[] matchOfA = new int[ta.length];
        int[] matchOfB = new int[tb.length];
        Arrays.fill(matchOfA, -1);
        Arrays.fill(matchOfB, -1);
        long[] work = {0};
        match(ta, 0, ta.length, tb, 0, tb.length, ids.size(), matchOfA, matchOfB, work);
        if (signal == Signal.ORDER) {
            // "same size as the previous request" is a hint only: it flips where two sizes that follow each other
            // coincide at one size (two laws crossing), so requests left unmatched between two matched pairs are
            // matched again without it, within that gap (the order of the matched pairs stands). A flip changes a
            // token, not how many requests there are, so only a gap with as many requests on each side is matched
            // again: an uneven gap is requests one recording lacks, and the weaker tokens would pair them by chance
            AddressTable<Void> weakIds = AddressTable.forInts();
            int[] wa = tokens(a, signal, false, weakIds);
            int[] wb = tokens(b, signal, false, weakIds);
            int i = 0;
            int j = 0;
            for (int r = 0; r <= wa.length; r++) {
                if (r < wa.length && matchOfA[r] < 0) {
                    continue;
                }
                int end = r < wa.length ? matchOfA[r] : wb.length;
                if (r > i && end - j == r - i) {
                    match(wa, i, r, wb, j, end, weakIds.size(), matchOfA, matchOfB, work);
                }
                i = r + 1;
                j = end + 1;
            }
            repairAcrossPairs(wa, wb, weakIds.size(), matchOfA, matchOfB, work);
        }
        return new RequestAlignment(a, b, matchOfA, matchOfB, signal);
    }

    /**
     * The first pass may take a request one place too early or too late where the hint's flip leaves two requests of
     * a recording with one token (a pair, then requests of one recording left over on one side of it and of the other
     * recording on the other side, none of which a gap can match). Such a pair and the gaps either side of it, when
     * they hold as many requests of each recording (as the gaps matched again do), are matched again on the tokens
     * without the hint: the pair's own requests match there too, so the region never loses a match, and pairs outside
     * it stand.
     */
    private static void repairAcrossPairs(
            int[] wa, int[] wb, int tokenCount, int[] matchOfA, int[] matchOfB, long[] work) {
        int prevA = -1;
        int prevB = -1;
        for (int r = 0; r < wa.length; r++) {
            int m = matchOfA[r];
            if (m < 0) {
                continue;
            }
            int nextA = r + 1;
            while (nextA < wa.length && matchOfA[nextA] < 0) {
                nextA++;
            }
            int nextB = nextA < wa.length ? matchOfA[nextA] : wb.length;
            boolean aBefore = r - prevA > 1;
            boolean bBefore = m - prevB > 1;
            boolean aAfter = nextA - r > 1;
            boolean bAfter = nextB - m > 1;
            if (((aBefore && !bBefore && bAfter && !aAfter) || (bBefore && !aBefore && aAfter && !bAfter))
                    && nextA - prevA == nextB - prevB) {
                matchOfA[r] = -1;
                matchOfB[m] = -1;
                match(wa, prevA + 1, nextA, wb, prevB + 1, nextB, tokenCount, matchOfA, matchOfB, work);
                int last = nextA - 1;
                while (last > prevA && matchOfA[last] < 0) {
                    last--;
                }
                if (last == prevA) {
                    // out of work budget (the pair's tokens are equal without the hint, so only that matches none)
                    matchOfA[r] = m;
                    matchOfB[m] = r;
                } else {
                    r = last; // on from the region's last pair
                }
            }
            prevA = r;
            prevB = matchOfA[r];
        }
    }

    /**
     * Matches {@code ta[aFrom, aTo)} with {@code tb[bFrom, bTo)} (a longest common subsequence), writing the pairs into
     * {@code matchOfA} and {@code matchOfB}; {@code work} is the edit-graph steps spent so far, shared with the other
     * calls of one alignment against {@link #WORK_BUDGET}.
     */
    private static void match(
            int[] ta,
            int aFrom,
            int aTo,
            int[] tb,
            int bFrom,
            int bTo,
            int tokenCount,
            int[] matchOfA,
            int[] matchOfB,
            long[] work) {
        // tokens present on one side only can match nothing: drop them before the quadratic-in-D part
        int[] ia = shared(ta, aFrom, aTo, tb, bFrom, bTo, tokenCount);
        int[] ib = shared(tb, bFrom, bTo, ta, aFrom, aTo, tokenCount);
        int[] sa = new int[ia.length];
        int[] sb = new int[ib.length];
        for (int i = 0; i < ia.length; i++) {
            sa[i] = ta[ia[i]];
        }
        for (int i = 0; i < ib.length; i++) {
            sb[i] = tb[ib[i]];
        }
        Myers myers = new Myers(sa, sb, work[0]);
        myers.diff(0, sa.length, 0, sb.length);
        work[0] = myers.work;
        for (int i = 0; i < sa.length; i++) {
            int j = myers.match[i];
            if (j >= 0) {
                matchOfA[ia[i]] = ib[j];
                matchOfB[ib[j]] = ia[i];
            }
        }
    }

    /** Indices in {@code [from, to)} of {@code t} whose token occurs in {@code other[otherFrom, otherTo)}. */
    private static int[] shared(int[] t, int from, int to, int[] other, int otherFrom, int otherTo, int tokenCount) {
        boolean[] present = new boolean[tokenCount];
        for (int i = otherFrom; i < otherTo; i++) {
            present[other[i]] = true;
        }
        int[] out = new int[to - from];
        int n = 0;
        for (int i = from; i < to; i++) {
            if (present[t[i]]) {
                out[n++] = i;
            }
        }
        return Arrays.copyOf(out, n);
    }

    /**
     * The requests' tokens: each distinct key gets the next id in {@code ids}, stored under key + 1 (a table key is
     * non-zero). No key is −1: under a site that would take stream rank 2^20 − 1, and under a lifetime bucket
     * its low 8 bits are never all set. {@code sameSize} says whether an {@link Signal#ORDER} token holds the "same
     * size as the previous request" bit.
     */
    static int[] tokens(RequestSequence s, Signal signal, boolean sameSize, AddressTable<Void> ids) {
        int n = s.size();
        int[] out = new int[n];
        int[] allocEntries = new int[n];
        for (int r = 0; r < n; r++) {
            allocEntries[r] = s.allocEntryOf(r);
        }
        for (int r = 0; r < n; r++) {
            long key;
            if (signal != Signal.ORDER) {
                int site =
                        signal == Signal.STACKS ? s.siteOf(r) : s.signatures().withoutLines(s.siteOf(r));
                key = ((long) site << 20) | s.streamOf(r);
            } else {
                int free = s.freeEntryOf(r);
                int bucket;
                if (free < 0) {
                    bucket = 63;
                } else {
                    int pos = Arrays.binarySearch(allocEntries, free);
                    int before = pos >= 0 ? pos : -pos - 1;
                    int lifetime = before - r;
                    bucket = 64 - Long.numberOfLeadingZeros(lifetime + 1L);
                }
                boolean same = sameSize && r > 0 && s.sizeOf(r) == s.sizeOf(r - 1);
                key = ((long) s.streamOf(r) << 8) | ((long) bucket << 1) | (same ? 1 : 0);
            }
            int id = ids.getInt(key + 1, -1);
            if (id < 0) {
                id = ids.size();
                ids.putInt(key + 1, id, -1);
            }
            out[r] = id;
        }
        return out;
    }

    public RequestSequence first() {
        return a;
    }

    public RequestSequence second() {
        return b;
    }

    /** The request of the second recording matched to request {@code r} of the first, −1 when none. */
    public int matchOfA(int r) {
        return matchOfA[r];
    }

    /** The request of the first recording matched to request {@code r} of the second, −1 when none. */
    public int matchOfB(int r) {
        return matchOfB[r];
    }

    /** Number of matched pairs. */
    public int matched() {
        return matched;
    }

    public int onlyInFirst() {
        return a.size() - matched;
    }

    public int onlyInSecond() {
        return b.size() - matched;
    }

    /** Matched pairs as a fraction of the smaller recording's requests. */
    public double matchedFractionOfSmaller() {
        return (double) matched / Math.min(a.size(), b.size());
    }

    /** Matched pairs as a fraction of the larger recording's requests: the lesser of the two sides' fractions. */
    public double matchedFractionOfLarger() {
        return (double) matched / Math.max(a.size(), b.size());
    }

    /** What the tokens were made of. */
    public Signal signal() {
        return signal;
    }

    /** What makes two requests' tokens equal, strongest first. */
    public enum Signal {
        /** Call stack (with line numbers) and stream rank. */
        STACKS,
        /**
         * Reduced call stack (see {@link FrameSignatures#withoutLines}) and stream rank: for a script edited between
         * runs, or operators that take another native path at another size.
         */
        STACKS_WITHOUT_LINES,
        /**
         * Stream rank, lifetime in requests and "same size as the previous request" (a hint: see the design notes):
         * for recordings without frames.
         */
        ORDER;

        public String wireName() {
            return name().toLowerCase(Locale.ROOT);
        }

        /** The signal in words, as {@code diff}'s text and page say what the requests were matched by. */
        public String words() {
            return switch (this) {
                case STACKS -> "call stacks";
                case STACKS_WITHOUT_LINES -> "call stacks without moved lines";
                case ORDER -> "order and lifetimes, no frames";
            };
        }
    }

    /**
     * Myers' linear-space difference over two int sequences; fills {@link #match} (index in {@code y} for each
     * index of {@code x}, −1 when unmatched). Recursion depth grows with log D, not with the lengths.
     */
    private static final class Myers {
        final int[] x;
        final int[] y;
        final int[] match;
        long work;

        Myers(int[] x, int[] y, long work) {
            this.x = x;
            this.y = y;
            this.match = new int[x.length];
            this.work = work;
            Arrays.fill(match, -1);
        }

        void diff(int xLo, int xHi, int yLo, int yHi) {
            while (xLo < xHi && yLo < yHi && x[xLo] == y[yLo]) {
                match[xLo++] = yLo++;
            }
            while (xLo < xHi && yLo < yHi && x[xHi - 1] == y[yHi - 1]) {
                match[--xHi] = --yHi;
            }
            if (xLo == xHi || yLo == yHi) {
                return;
            }
            bisect(xLo, xHi, yLo, yHi);
        }

        /** Finds where a forward and a backward furthest-reaching path meet, then solves both halves. */
        private void bisect(int xLo, int xHi, int yLo, int yHi) {
            int n = xHi - xLo;
            int m = yHi - yLo;
            int maxD = (n + m + 1) / 2;
            int offset = maxD;
            int length = 2 * maxD + 2;
            int[] forward = new int[length];
            int[] backward = new int[length];
            Arrays.fill(forward, -1);
            Arrays.fill(backward, -1);
            forward[offset + 1] = 0;
            backward[offset + 1] = 0;
            int delta = n - m;
            boolean oddDelta = (delta & 1) != 0;
            int k1start = 0;
            int k1end = 0;
            int k2start = 0;
            int k2end = 0;
            for (int d = 0; d < maxD; d++) {
                if (work > WORK_BUDGET) {
                    return; // out of budget: this sub-problem stays unmatched
                }
                work += 2L * d + 2;
                for (int k1 = -d + k1start; k1 <= d - k1end; k1 += 2) {
                    int k1off = offset + k1;
                    int x1 = k1 == -d || (k1 != d && forward[k1off - 1] < forward[k1off + 1])
                            ? forward[k1off + 1]
                            : forward[k1off - 1] + 1;
                    int y1 = x1 - k1;
                    while (x1 < n && y1 < m && x[xLo + x1] == y[yLo + y1]) {
                        x1++;
                        y1++;
                    }
                    forward[k1off] = x1;
                    if (x1 > n) {
                        k1end += 2;
                    } else if (y1 > m) {
                        k1start += 2;
                    } else if (oddDelta) {
                        int k2off = offset + delta - k1;
                        if (k2off >= 0 && k2off < length && backward[k2off] != -1 && x1 >= n - backward[k2off]) {
                            split(xLo, xHi, yLo, yHi, x1, y1);
                            return;
                        }
                    }
                }
                for (int k2 = -d + k2start; k2 <= d - k2end; k2 += 2) {
                    int k2off = offset + k2;
                    int x2 = k2 == -d || (k2 != d && backward[k2off - 1] < backward[k2off + 1])
                            ? backward[k2off + 1]
                            : backward[k2off - 1] + 1;
                    int y2 = x2 - k2;
                    while (x2 < n && y2 < m && x[xHi - x2 - 1] == y[yHi - y2 - 1]) {
                        x2++;
                        y2++;
                    }
                    backward[k2off] = x2;
                    if (x2 > n) {
                        k2end += 2;
                    } else if (y2 > m) {
                        k2start += 2;
                    } else if (!oddDelta) {
                        int k1off = offset + delta - k2;
                        if (k1off >= 0 && k1off < length && forward[k1off] != -1) {
                            int x1 = forward[k1off];
                            int y1 = offset + x1 - k1off;
                            if (x1 >= n - x2) {
                                split(xLo, xHi, yLo, yHi, x1, y1);
                                return;
                            }
                        }
                    }
                }
            }
            // no common token at all: nothing to match
        }

        private void split(int xLo, int xHi, int yLo, int yHi, int x1, int y1) {
            diff(xLo, xLo + x1, yLo, yLo + y1);
            diff(xLo + x1, xHi, yLo + y1, yHi);
        }
    }
}
