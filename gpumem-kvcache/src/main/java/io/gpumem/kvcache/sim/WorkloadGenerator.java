package io.gpumem.kvcache.sim;

import java.util.Arrays;
import java.util.SplittableRandom;

/**
 * Draws the requests of a {@link Workload} from one seeded generator: Poisson arrivals (exponential
 * gaps with mean {@code 1 / arrivalRate} steps), log-normal prompt and output lengths with the
 * workload's means (μ = ln(mean) − σ²/2), token ids uniform in a 32,000-token vocabulary. Every length
 * is clamped so prompt + output ≤ maxModelLen. The same seed gives the same sequence.
 */
final class WorkloadGenerator {
    static final int VOCAB = 32_000;
    static final int CHAT_SYSTEM_TOKENS = 64;
    static final double CHAT_THINK_STEPS = 20;

    private final Workload workload;
    private final SplittableRandom rnd;
    private final double arrivalRate;
    private final int maxModelLen;
    private final int[] sharedPrefix;
    private double clock;

    WorkloadGenerator(SimConfig config) {
        this.workload = config.workload();
        this.rnd = new SplittableRandom(config.seed());
        this.arrivalRate = config.arrivalRate();
        this.maxModelLen = config.spec().maxModelLen();
        int prefixLen = switch (workload) {
            case SHARED_PREFIX -> config.prefixTokens();
            case CHAT -> CHAT_SYSTEM_TOKENS;
            default -> 0;
        };
        SplittableRandom prefixRnd = new SplittableRandom(config.seed() ^ 0x5EED_F00DL);
        this.sharedPrefix = tokens(prefixRnd, prefixLen);
    }

    /** The next first-turn arrival step (non-decreasing). */
    long nextArrival() {
        clock += -Math.log(1 - rnd.nextDouble()) / arrivalRate;
        return (long) clock;
    }

    int[] firstPrompt() {
        int own = clamp(logNormal(workload.promptMean, workload.promptSigma), workload.promptMin, workload.promptMax);
        own = Math.min(own, maxModelLen - sharedPrefix.length - 1);
        int[] p = Arrays.copyOf(sharedPrefix, sharedPrefix.length + Math.max(1, own));
        for (int i = sharedPrefix.length; i < p.length; i++) {
            p[i] = rnd.nextInt(VOCAB);
        }
        return p;
    }

    /** Output length for a prompt of {@code promptLength} tokens (at least 1, within the model length). */
    int outputLength(int promptLength) {
        int out = clamp(logNormal(workload.outputMean, workload.outputSigma), workload.outputMin, workload.outputMax);
        return Math.max(1, Math.min(out, maxModelLen - promptLength));
    }

    /** Turns of a chat conversation (2–6), 1 for other workloads. */
    int turns() {
        return workload == Workload.CHAT ? 2 + rnd.nextInt(5) : 1;
    }

    /** A user message for a follow-up turn. */
    int[] userMessage() {
        return tokens(
                rnd,
                clamp(logNormal(workload.promptMean, workload.promptSigma), workload.promptMin, workload.promptMax));
    }

    /** Steps between an answer and the user's next turn. */
    long thinkSteps() {
        return (long) (-Math.log(1 - rnd.nextDouble()) * CHAT_THINK_STEPS);
    }

    /** A priority in {@code [0, levels)}. */
    int priority(int levels) {
        return levels <= 1 ? 0 : rnd.nextInt(levels);
    }

    /** A seed for one request's sampled tokens. */
    long requestSeed() {
        return rnd.nextLong();
    }

    private int logNormal(double mean, double sigma) {
        double mu = Math.log(mean) - sigma * sigma / 2;
        return (int) Math.round(Math.exp(mu + sigma * rnd.nextGaussian()));
    }

    private static int clamp(int v, int lo, int hi) {
        return Math.max(lo, Math.min(hi, v));
    }

    private static int[] tokens(SplittableRandom r, int n) {
        int[] t = new int[n];
        for (int i = 0; i < n; i++) {
            t[i] = r.nextInt(VOCAB);
        }
        return t;
    }
}
