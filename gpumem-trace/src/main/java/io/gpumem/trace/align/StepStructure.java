package io.gpumem.trace.align;

import io.gpumem.alloc.AddressTable;
import java.util.Arrays;

/**
 * The repeating step of a recording: the shortest run of requests that the whole window repeats (a training or
 * inference loop's iteration, or, in a window that holds one forward pass only, the model's repeated layer), with
 * the step boundaries and, for each request, its step and its position in that step. A window that repeats nothing
 * (one training step: forward, backward and optimizer are all different) is one step.
 *
 * <p>Used to name allocation sites when a recording has no stack frames (the position in the step is the same
 * in every step and in every run of the program), and meant for classifying tensors by phase and for iterating a
 * step to a steady state.
 *
 * <h2>Detection</h2>
 * Requests are tokens (see {@link RequestAlignment}: call stack and stream, or lifetime and stream). For each
 * candidate period {@code p} up to half the window, the coverage is the fraction of requests {@code i} with
 * {@code token[i] == token[i + p]}; the step is the smallest {@code p} whose coverage reaches
 * {@link #MIN_COVERAGE} (smallest, because every multiple of a period is one too). The windows here hold at most
 * some tens of thousands of requests, so the quadratic scan is bounded by {@link #MAX_SCANNED} requests (the
 * period of a longer window is found on its first {@code MAX_SCANNED}).
 *
 * <p>Warm-up: a training run's first step is not like the others (the optimizer creates its state, lazy modules
 * initialise), and a recording from the program's start holds it and the set-up before it. Where no period reaches
 * the coverage over the whole window, the step is the smallest period that reaches it after a warm-up: from some
 * request {@code w > 0} on, with {@code w} at most a third of the window (at most half of what follows it) and at
 * least two periods after it. The warm-up then ends at the first step boundary (below), at or after {@code w}
 * ({@link #warmUp()}), and the coverage is counted from there. Without this, a 10-step training recording whose
 * set-up and first step take 1,326 requests before steps of 738 (gpumem's own demo workload) repeated over only about
 * 82% of its requests and was taken for one step. A period found over the whole window is kept as before: the
 * warm-up is only the fallback, so it never replaces one.
 *
 * <p>Boundaries: a step starts where the allocated bytes are lowest (what a loop iteration leaves live is least
 * between iterations): the phase is the position in the first period with the lowest mean allocated level over
 * all repetitions, and each next boundary is the occurrence of that position's token nearest to one period after
 * the previous boundary (within a quarter period; else exactly one period on), so that a request present in some
 * steps only does not shift every later boundary; no boundary is placed once one period on lies past the window's
 * end. Requests before the first boundary form a partial step 0. After a warm-up the boundaries are found the same
 * way from the window's end backwards, the phase in the last period (its level averaged over the later half, which
 * no warm-up reaches), until one has no occurrence of its token a period (give or take a quarter) before it: that
 * boundary ends the warm-up, and everything before it is step 0.
 *
 * <p>Invariants: {@code starts[0] == 0}, starts strictly increase and are below the request count; every request
 * belongs to exactly one step.
 */
public final class StepStructure {

    /** Fraction of requests that must equal the request one period later for the period to count as the step. */
    public static final double MIN_COVERAGE = 0.9;

    /** Requests scanned for the period (the scan is quadratic). */
    static final int MAX_SCANNED = 40_000;

    private final int period;
    private final double coverage;
    private final int warmUp;
    private final int[] starts;
    private final int requests;

    private StepStructure(int period, double coverage, int warmUp, int[] starts, int requests) {
        this.period = period;
        this.coverage = coverage;
        this.warmUp = warmUp;
        this.starts = starts;
        this.requests = requests;
    }

    /** The step structure of a recording's requests, tokens built as for alignment with frames when present. */
    public static StepStructure of(RequestSequence s) {
        // within one recording a size is one size: the "same size" bit is kept (it only misleads across recordings)
        int[] tokens = RequestAlignment.tokens(
                s,
                s.framed() ? RequestAlignment.Signal.STACKS : RequestAlignment.Signal.ORDER,
                true,
                AddressTable.forInts());
        return detect(tokens, s.allocatedBeforeEachRequest());
    }

    /**
     * Detects the step of a token sequence.
     *
     * @param tokens          one int per request, equal for requests the program repeats
     * @param allocatedBefore allocated bytes just before each request (same length), for placing boundaries
     */
    public static StepStructure detect(int[] tokens, long[] allocatedBefore) {
        int n = tokens.length;
        if (allocatedBefore.length != n) {
            throw new IllegalArgumentException(
                    "tokens and levels differ in length: " + n + " vs " + allocatedBefore.length);
        }
        int scanned = Math.min(n, MAX_SCANNED);
        // the first period that repeats after a warm-up, kept in case none repeats over the whole window
        int warmPeriod = -1;
        int warmUp = 0;
        for (int p = 1; p <= scanned / 2; p++) {
            int span = scanned - p;
            // the longest warm-up allowed: at most half of what follows it, which holds two periods or more
            int maxWarmUp = Math.min(scanned / 3, span - p);
            // the fewest equal requests either test below can use: a count known to fall short is not finished
            boolean warmTest = warmPeriod < 0 && maxWarmUp > 0;
            double needed = MIN_COVERAGE * (warmTest ? span - maxWarmUp : span);
            int equal = equalAPeriodOn(tokens, p, 0, span, needed);
            if (equal >= MIN_COVERAGE * span) {
                return new StepStructure(p, (double) equal / span, 0, boundaries(tokens, allocatedBefore, p), n);
            }
            // a warm-up of w requests leaves at most `equal` matches for the span - w after it
            if (warmTest && equal >= MIN_COVERAGE * (span - maxWarmUp)) {
                int start = warmUpStart(tokens, p, span, equal, maxWarmUp);
                if (start > 0) {
                    warmPeriod = p;
                    warmUp = start;
                }
            }
        }
        if (warmPeriod > 0) {
            int[] starts = boundariesAfterWarmUp(tokens, allocatedBefore, warmPeriod, warmUp);
            // the warm-up ends where the steps found from the end begin (at or after where the coverage holds)
            int span = scanned - warmPeriod;
            int end = starts.length > 1 && starts[1] < span ? Math.max(warmUp, starts[1]) : warmUp;
            double coverage = (double) equalAPeriodOn(tokens, warmPeriod, end, span, 0) / (span - end);
            return new StepStructure(warmPeriod, coverage, end, starts, n);
        }
        return new StepStructure(n, 1.0, 0, new int[] {0}, n);
    }

    /**
     * The smallest {@code w} in 1 to {@code maxWarmUp} from which the requests equal to the one a period later reach
     * the coverage, or 0 when none does; {@code equal} counts them over the whole span.
     */
    private static int warmUpStart(int[] tokens, int p, int span, int equal, int maxWarmUp) {
        int before = 0;
        for (int w = 1; w <= maxWarmUp; w++) {
            if (tokens[w - 1] == tokens[w - 1 + p]) {
                before++;
            }
            if (equal - before >= MIN_COVERAGE * (span - w)) {
                return w;
            }
        }
        return 0;
    }

    /**
     * How many requests from {@code from} to {@code span} (exclusive) equal the request one period later, when that
     * count is at least {@code needed}; otherwise some count below {@code needed}, returned as soon as so many requests
     * differ that the rest cannot make up for them. Most periods tried are not the step, and their requests differ
     * from the start: this ends their scan after a fraction of the window where the whole scan was the detection's
     * cost (on a window of 40,000 requests, up to 20,000 periods of up to 40,000 comparisons each).
     */
    static int equalAPeriodOn(int[] tokens, int p, int from, int span, double needed) {
        int mayDiffer = (span - from) - (int) Math.ceil(needed);
        int equal = 0;
        int differ = 0;
        for (int i = from; i < span; i++) {
            if (tokens[i] == tokens[i + p]) {
                equal++;
            } else if (++differ > mayDiffer) {
                return equal;
            }
        }
        return equal;
    }

    /** The mean allocated level over the positions {@code f}, {@code f ± p}, ... at or after {@code from}. */
    private static double meanLevel(long[] level, int f, int p, int from) {
        double sum = 0;
        int count = 0;
        for (int i = from + Math.floorMod(f - from, p); i < level.length; i += p) {
            sum += level[i];
            count++;
        }
        return sum / count;
    }

    private static int[] boundaries(int[] tokens, long[] level, int p) {
        int n = tokens.length;
        int phase = 0;
        double lowest = Double.MAX_VALUE;
        for (int f = 0; f < p; f++) {
            double mean = meanLevel(level, f, p, 0);
            if (mean < lowest) {
                lowest = mean;
                phase = f;
            }
        }
        int[] out = new int[n / p + 3];
        int k = 0;
        if (phase > 0) {
            out[k++] = 0;
        }
        int at = phase;
        int token = tokens[phase];
        int slack = Math.max(0, p / 4);
        while (at < n) {
            out[k++] = at;
            int target = at + p;
            if (target >= n) {
                // A step that would start past the window's end is not in it; snapping back to an earlier
                // occurrence of the token (a site the step repeats) would split off a short last step.
                break;
            }
            int next = -1;
            for (int d = 0; d <= slack && next < 0; d++) {
                if (target - d > at && target - d < n && tokens[target - d] == token) {
                    next = target - d;
                } else if (target + d < n && tokens[target + d] == token) {
                    next = target + d;
                }
            }
            at = next >= 0 ? next : target;
            if (k == out.length) {
                out = Arrays.copyOf(out, k * 2);
            }
        }
        return Arrays.copyOf(out, k);
    }

    /**
     * The step starts of a window that repeats only after a warm-up of {@code warmUp} requests, found from its end,
     * where the loop is steadiest: the phase is the position in the last period with the lowest mean allocated level
     * over its repetitions in the later half of what follows the warm-up, and each earlier boundary is the occurrence
     * of that position's token nearest to one period before the next (within a quarter period). The first boundary
     * with no such occurrence before it ends the warm-up: everything before it is step 0, however long the first
     * step was.
     */
    private static int[] boundariesAfterWarmUp(int[] tokens, long[] level, int p, int warmUp) {
        int n = tokens.length;
        int phase = n - 1;
        double lowest = Double.MAX_VALUE;
        // the later half's levels only: where the coverage begins, a tenth of what follows may still be warm-up (a
        // set-up that allocates the model), whose levels would pull the mean off the loop's lowest point; the half
        // holds a period, since two follow the warm-up
        int steady = warmUp + (n - warmUp) / 2;
        for (int f = n - 1; f >= n - p; f--) {
            double mean = meanLevel(level, f, p, steady);
            if (mean < lowest) {
                lowest = mean;
                phase = f;
            }
        }
        int[] back = new int[n / p + 2];
        int k = 0;
        int token = tokens[phase];
        int slack = Math.max(0, p / 4);
        int at = phase;
        while (at > 0) {
            back[k++] = at;
            int target = at - p;
            int previous = -1;
            for (int d = 0; d <= slack && previous < 0; d++) {
                if (target - d > 0 && tokens[target - d] == token) {
                    previous = target - d;
                } else if (target + d > 0 && target + d < at && tokens[target + d] == token) {
                    previous = target + d;
                }
            }
            if (previous < 0) {
                break;
            }
            at = previous;
            if (k == back.length) {
                back = Arrays.copyOf(back, k * 2);
            }
        }
        int[] out = new int[k + 1];
        for (int j = 0; j < k; j++) {
            out[j + 1] = back[k - 1 - j];
        }
        return out; // out[0] == 0: the warm-up, and any request before the first boundary
    }

    /** Requests per step: the detected period, or the whole window when nothing repeats. */
    public int period() {
        return period;
    }

    /** Whether a repetition was found (the window holds more than one step). */
    public boolean repeats() {
        return starts.length > 1 || period < requests;
    }

    /**
     * Requests before the repetition begins, the first step's start (0 unless the whole window does not repeat, see
     * the class comment): they are step 0.
     */
    public int warmUp() {
        return warmUp;
    }

    /**
     * Fraction of requests equal to the request one period later, from the end of the warm-up on (1 when nothing
     * repeats).
     */
    public double coverage() {
        return coverage;
    }

    /** Number of steps, counting a partial first step. */
    public int stepCount() {
        return starts.length;
    }

    /** The first request of step {@code k}. */
    public int stepStart(int k) {
        return starts[k];
    }

    /** The step holding request {@code r}. */
    public int stepOf(int r) {
        int pos = Arrays.binarySearch(starts, r);
        return pos >= 0 ? pos : -pos - 2;
    }

    /**
     * Request {@code r}'s position in its step (0 for the step's first request). In a partial first step the
     * position is counted back from the next step's start, so that it names the same request as in a full step.
     */
    public int positionInStep(int r) {
        int k = stepOf(r);
        if (k == 0 && starts.length > 1 && starts[1] < period) {
            return Math.max(0, r - starts[1] + period);
        }
        return r - starts[k];
    }
}
