package io.gpumem.trace.align;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;

/**
 * The size law of every request that two or more recordings of one program share, labelled by the value each was
 * recorded at (e.g. context 128, 256, 512): the model a prediction of an unrecorded value writes its requests from.
 *
 * <p>The first recording is the reference: every other is {@linkplain RequestAlignment aligned} to it, and a
 * reference request matched in all of them is a <em>row</em> whose sizes (one per recording) are fitted with
 * {@link SizeLaw#fit}. A row no law fits, and a reference request some recording lacks, is counted, never dropped
 * silently: {@link #unfitted()} and {@link #unaligned()}. With three or more recordings {@link #leaveOneOut(int)}
 * says, for each recording, how many of its sizes the law fitted on the others predicts exactly: the check of the
 * method on data it did not see.
 *
 * <p>Invariants: {@code rows() + unaligned() == reference().size()}; {@code law(row)} is {@code null} exactly for
 * the {@code unfitted()} rows.
 */
public final class SizeLaws {

    private final List<RequestSequence> recordings;
    private final long[] labels;
    private final List<RequestAlignment> alignments;
    /** {@code requestOf[j][row]}: the request of recording j in that row. */
    private final int[][] requestOf;

    private final SizeLaw[] laws;
    private final int unfitted;

    private SizeLaws(
            List<RequestSequence> recordings,
            long[] labels,
            List<RequestAlignment> alignments,
            int[][] requestOf,
            SizeLaw[] laws) {
        this.recordings = recordings;
        this.labels = labels;
        this.alignments = alignments;
        this.requestOf = requestOf;
        this.laws = laws;
        int n = 0;
        for (SizeLaw law : laws) {
            if (law == null) {
                n++;
            }
        }
        this.unfitted = n;
    }

    /**
     * Aligns the recordings to the first and fits each shared request's law.
     *
     * @throws IllegalArgumentException with fewer than two recordings, a label count that differs, or two equal labels
     */
    public static SizeLaws fit(List<RequestSequence> recordings, long[] labels) {
        int k = recordings.size();
        if (k < 2) {
            throw new IllegalArgumentException("size laws need two or more recordings, got " + k);
        }
        if (labels.length != k) {
            throw new IllegalArgumentException(k + " recordings but " + labels.length + " labels");
        }
        for (int i = 0; i < k; i++) {
            for (int j = i + 1; j < k; j++) {
                if (labels[i] == labels[j]) {
                    throw new IllegalArgumentException(recordings.get(i).source() + " and "
                            + recordings.get(j).source() + " have the same label " + labels[i]
                            + ": a law needs distinct values");
                }
            }
        }
        RequestSequence ref = recordings.get(0);
        List<RequestAlignment> alignments = new ArrayList<>();
        for (int j = 1; j < k; j++) {
            alignments.add(RequestAlignment.align(ref, recordings.get(j)));
        }
        int[] rowRequests = new int[ref.size()];
        int rows = 0;
        for (int r = 0; r < ref.size(); r++) {
            boolean all = true;
            for (RequestAlignment al : alignments) {
                all &= al.matchOfA(r) >= 0;
            }
            if (all) {
                rowRequests[rows++] = r;
            }
        }
        int[][] requestOf = new int[k][rows];
        for (int row = 0; row < rows; row++) {
            int r = rowRequests[row];
            requestOf[0][row] = r;
            for (int j = 1; j < k; j++) {
                requestOf[j][row] = alignments.get(j - 1).matchOfA(r);
            }
        }
        SizeLaw[] laws = new SizeLaw[rows];
        long[] sizes = new long[k];
        for (int row = 0; row < rows; row++) {
            for (int j = 0; j < k; j++) {
                sizes[j] = recordings.get(j).sizeOf(requestOf[j][row]);
            }
            laws[row] = SizeLaw.fit(labels, sizes);
        }
        return new SizeLaws(List.copyOf(recordings), labels.clone(), List.copyOf(alignments), requestOf, laws);
    }

    public RequestSequence reference() {
        return recordings.get(0);
    }

    public List<RequestSequence> recordings() {
        return recordings;
    }

    public long label(int j) {
        return labels[j];
    }

    /** The labels, one per recording, the reference's first. */
    public long[] labels() {
        return labels.clone();
    }

    /** The alignment of recording {@code j} (1 or more) to the reference. */
    public RequestAlignment alignment(int j) {
        return alignments.get(j - 1);
    }

    /** Number of reference requests matched in every recording. */
    public int rows() {
        return laws.length;
    }

    /** Reference requests that some recording lacks: no law can be fitted for them. */
    public int unaligned() {
        return reference().size() - laws.length;
    }

    /** Rows whose sizes fit no law. */
    public int unfitted() {
        return unfitted;
    }

    /** The reference request of a row. */
    public int referenceRequest(int row) {
        return requestOf[0][row];
    }

    /** The request of recording {@code j} in a row. */
    public int requestOf(int j, int row) {
        return requestOf[j][row];
    }

    /** The row's law, {@code null} when no law fits its sizes. */
    public SizeLaw law(int row) {
        return laws[row];
    }

    /** How many rows each kind of law explains. */
    public Map<SizeLaw.Form, Integer> kindCounts() {
        Map<SizeLaw.Form, Integer> out = new EnumMap<>(SizeLaw.Form.class);
        for (SizeLaw.Form kind : SizeLaw.Form.values()) {
            out.put(kind, 0);
        }
        for (SizeLaw law : laws) {
            if (law != null) {
                out.merge(law.kind(), 1, Integer::sum);
            }
        }
        return out;
    }

    /**
     * The predicted size of each row at {@code x}: the row's law, or −1 for a row without one (unfitted, or a law
     * whose value at {@code x} is not a positive long).
     */
    public long[] predictAt(long x) {
        long[] out = new long[laws.length];
        for (int row = 0; row < laws.length; row++) {
            long v = laws[row] == null ? -1 : laws[row].at(x);
            out[row] = v > 0 ? v : -1;
        }
        return out;
    }

    /**
     * Leaves recording {@code j} out: fits each row on the other recordings and compares the law's size at
     * {@code label(j)} with the size recorded there. Needs three or more recordings (two remain to fit on).
     */
    public LeaveOneOut leaveOneOut(int j) {
        int k = recordings.size();
        if (k < 3) {
            throw new IllegalStateException("leave-one-out needs three or more recordings, got " + k);
        }
        long[] x = new long[k - 1];
        long[] s = new long[k - 1];
        for (int i = 0, t = 0; i < k; i++) {
            if (i != j) {
                x[t++] = labels[i];
            }
        }
        int exact = 0;
        int noLaw = 0;
        long recordedBytes = 0;
        long absoluteError = 0;
        for (int row = 0; row < laws.length; row++) {
            for (int i = 0, t = 0; i < k; i++) {
                if (i != j) {
                    s[t++] = recordings.get(i).sizeOf(requestOf[i][row]);
                }
            }
            long actual = recordings.get(j).sizeOf(requestOf[j][row]);
            recordedBytes += actual;
            SizeLaw law = SizeLaw.fit(x, s);
            long predicted = law == null ? Long.MIN_VALUE : law.at(labels[j]);
            if (law == null || predicted == Long.MIN_VALUE) {
                noLaw++;
                absoluteError += actual;
            } else if (predicted == actual) {
                exact++;
            } else {
                absoluteError += Math.abs(predicted - actual);
            }
        }
        return new LeaveOneOut(
                recordings.get(j).source(), labels[j], laws.length, exact, noLaw, recordedBytes, absoluteError);
    }

    /**
     * The check of one recording left out.
     *
     * @param rows           rows compared
     * @param exact          rows whose size the others' law gives exactly
     * @param noLaw          rows the others fit no law for (their recorded size counts as the error)
     * @param recordedBytes  the left-out recording's bytes over the rows
     * @param absoluteError  sum over rows of |predicted − recorded| bytes
     */
    public record LeaveOneOut(
            String source, long label, int rows, int exact, int noLaw, long recordedBytes, long absoluteError) {

        public double exactFraction() {
            return rows == 0 ? 0 : (double) exact / rows;
        }
    }

    @Override
    public String toString() {
        return "SizeLaws" + Arrays.toString(labels) + " rows=" + rows() + " unaligned=" + unaligned() + " unfitted="
                + unfitted + " " + kindCounts();
    }
}
