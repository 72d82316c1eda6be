package io.gpumem.trace.align;

import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.session.TraceSession;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Two or more recordings of one program, each labelled with the value it ran at (a context length, a batch size):
 * what {@code gpumem predict} predicts from. A prediction at {@code x} takes the recording nearest {@code x} (the
 * larger on a tie) as the reference whose requests, order and start it follows ({@link #lawsFor}): requests present
 * at some sizes only (a workspace, another kernel) are most likely those of the nearest size.
 *
 * <p>Invariants: at least two recordings, labels distinct, every other recording is one program with the reference
 * of any prediction by {@link RecordingDiff#sameProgram(RequestAlignment)} (at least half of each one's requests
 * match: checked when the laws are fitted; one reference's laws are fitted once), so that most of the reference's
 * requests have a law.
 */
public final class RecordingFamily {

    private final List<TraceSnapshot> traces;
    private final List<RequestSequence> recordings;
    private final long[] labels;
    private final Map<Integer, SizeLaws> lawsByReference = new HashMap<>();

    private RecordingFamily(List<TraceSnapshot> traces, List<RequestSequence> recordings, long[] labels) {
        this.traces = traces;
        this.recordings = recordings;
        this.labels = labels;
    }

    /**
     * The family of {@code traces} (each read on its busiest device) labelled {@code labels}.
     *
     * @throws IllegalArgumentException with fewer than two recordings, labels that are not one per recording or
     *                                  not distinct, or a recording without requests
     */
    public static RecordingFamily of(List<TraceSnapshot> traces, long[] labels) {
        return of(traces, labels, -1);
    }

    /**
     * {@link #of(List, long[])} with every recording read on device {@code device} (each on its busiest when
     * negative).
     *
     * @throws IllegalArgumentException as {@link #of(List, long[])} does, and for a recording with no requests on
     *                                  {@code device}
     */
    public static RecordingFamily of(List<TraceSnapshot> traces, long[] labels, int device) {
        if (traces.size() < 2) {
            throw new IllegalArgumentException(
                    "a prediction needs two or more labelled recordings, got " + traces.size()
                            + (traces.isEmpty() ? "" : " (" + traces.getFirst().source() + ")"));
        }
        if (labels.length != traces.size()) {
            throw new IllegalArgumentException(traces.size() + " recordings but " + labels.length + " labels");
        }
        for (int i = 0; i < labels.length; i++) {
            for (int j = i + 1; j < labels.length; j++) {
                if (labels[i] == labels[j]) {
                    throw new IllegalArgumentException(
                            traces.get(i).source() + " and " + traces.get(j).source() + " have the same label "
                                    + labels[i] + ": a law needs distinct values");
                }
            }
        }
        FrameSignatures signatures = new FrameSignatures();
        List<RequestSequence> recordings = new ArrayList<>();
        for (TraceSnapshot t : traces) {
            recordings.add(RequestSequence.of(t, device >= 0 ? device : TraceSession.busiestDevice(t), signatures));
        }
        return new RecordingFamily(List.copyOf(traces), List.copyOf(recordings), labels.clone());
    }

    /** Number of recordings. */
    public int size() {
        return recordings.size();
    }

    public long label(int j) {
        return labels[j];
    }

    public TraceSnapshot trace(int j) {
        return traces.get(j);
    }

    public RequestSequence recording(int j) {
        return recordings.get(j);
    }

    /** The recording nearest {@code x}, the larger label on a tie. */
    public int nearest(long x) {
        int best = 0;
        for (int i = 1; i < labels.length; i++) {
            long d = Math.abs(labels[i] - x);
            long bestD = Math.abs(labels[best] - x);
            if (d < bestD || (d == bestD && labels[i] > labels[best])) {
                best = i;
            }
        }
        return best;
    }

    /**
     * The size laws with the recording nearest {@code x} as the reference.
     *
     * @throws IllegalArgumentException when a recording matches too few of the reference's requests to be the same
     *                                  program
     */
    public SizeLaws lawsFor(long x) {
        int ref = nearest(x);
        SizeLaws laws = lawsByReference.get(ref);
        if (laws != null) {
            return laws;
        }
        List<RequestSequence> ordered = new ArrayList<>(recordings);
        ordered.addFirst(ordered.remove(ref));
        long[] orderedLabels = new long[labels.length];
        orderedLabels[0] = labels[ref];
        for (int i = 0, t = 1; i < labels.length; i++) {
            if (i != ref) {
                orderedLabels[t++] = labels[i];
            }
        }
        laws = SizeLaws.fit(ordered, orderedLabels);
        for (int j = 1; j < ordered.size(); j++) {
            RequestAlignment al = laws.alignment(j);
            if (!RecordingDiff.sameProgram(al)) {
                String reference = ordered.getFirst().source();
                String other = ordered.get(j).source();
                throw new IllegalArgumentException(reference + " and " + other + " do not look like the same program: "
                        + RecordingDiff.matchedOfEach(al, reference, other));
            }
        }
        lawsByReference.put(ref, laws);
        return laws;
    }

    /**
     * The recording predicted at {@code x} ({@link PredictedRecording}).
     *
     * @throws IllegalArgumentException as {@link #lawsFor} and {@link PredictedRecording#of} do
     */
    public PredictedRecording predict(long x) {
        int ref = nearest(x);
        SizeLaws laws = lawsFor(x);
        return PredictedRecording.of(laws, traces.get(ref), recordings.get(ref).device(), x);
    }

    /** The family without recording {@code j}, to predict it from the others; needs three or more recordings. */
    public RecordingFamily without(int j) {
        if (size() < 3) {
            throw new IllegalStateException("leaving one out needs three or more recordings, got " + size());
        }
        List<TraceSnapshot> t = new ArrayList<>(traces);
        List<RequestSequence> r = new ArrayList<>(recordings);
        t.remove(j);
        r.remove(j);
        long[] l = new long[labels.length - 1];
        for (int i = 0, k = 0; i < labels.length; i++) {
            if (i != j) {
                l[k++] = labels[i];
            }
        }
        return new RecordingFamily(List.copyOf(t), List.copyOf(r), l);
    }

    /** The largest label. */
    public long largestLabel() {
        long max = labels[0];
        for (long l : labels) {
            max = Math.max(max, l);
        }
        return max;
    }
}
