package io.gpumem.kvcache.sim;

/**
 * How long one engine step takes in simulated time: the offload-or-recompute trade-off in numbers.
 *
 * <pre>
 *   step = weightBytes / HBM                                  (weights read once per step)
 *        + prefill tokens × prefillUsPerToken + decode tokens × decodeUsPerToken
 *        + context tokens attended × kvBytesPerToken / HBM     (KV read by attention)
 *        + for each tier: promoted tokens × kvBytesPerToken / bandwidth + lookups that hit it × latency
 *        + swapped tokens × kvBytesPerToken / host-link bandwidth
 * </pre>
 *
 * Writes into the tiers (demotion, publication) overlap with compute and are not on the step's critical
 * path; their bandwidth limit is the write queues' drain rate. Transfer times use {@code kvBytesPerToken}
 * of the modelled model, not the (small) geometry the simulator keeps real bytes for.
 *
 * <p>Defaults: Llama-3-8B in fp16 on one H100 SXM: 16 GB of weights, 128 KiB of KV per token (32 layers
 * × 8 KV heads × 128 × 2 × 2 bytes), prefill 40 µs per token (16 GFLOP at about 400 TFLOP/s achieved),
 * decode 25 µs per token of compute, HBM 3,350 GB/s, host link 50 GB/s (PCIe 5.0 x16; NVLink-C2C on
 * GH200 is 450), local NVMe disk 7 GB/s with 100 µs per lookup, network 12.5 GB/s (100 GbE) with 200 µs
 * per lookup (a round trip to the store).
 */
public record TimeModel(
        double weightBytes,
        long kvBytesPerToken,
        double prefillUsPerToken,
        double decodeUsPerToken,
        double hbmGBps,
        double hostGBps,
        double diskGBps,
        double diskLatencyUs,
        double netGBps,
        double netLatencyUs) {

    /**
     * Checks every figure: bandwidths and bytes per token positive (an infinite bandwidth moves bytes in no time),
     * weights and times finite and not negative.
     *
     * @throws BadFigure naming the first figure out of range: {@code time model: NAME must be ..., got VALUE}, NAME
     *     the record component
     */
    public TimeModel {
        notNegative("weightBytes", weightBytes);
        positive("kvBytesPerToken", kvBytesPerToken);
        notNegative("prefillUsPerToken", prefillUsPerToken);
        notNegative("decodeUsPerToken", decodeUsPerToken);
        positive("hbmGBps", hbmGBps);
        positive("hostGBps", hostGBps);
        positive("diskGBps", diskGBps);
        notNegative("diskLatencyUs", diskLatencyUs);
        positive("netGBps", netGBps);
        notNegative("netLatencyUs", netLatencyUs);
    }

    /**
     * A figure of the time model out of range: which one ({@link #figure}, the record component's name, so that a
     * caller can name its own setting for it) and what is wrong with it ({@link #problem}).
     */
    public static final class BadFigure extends IllegalArgumentException {
        private static final long serialVersionUID = 1L;
        private final String figure;
        private final String problem;

        BadFigure(String figure, String problem) {
            super("time model: " + figure + " " + problem);
            this.figure = figure;
            this.problem = problem;
        }

        /** The record component out of range, e.g. {@code hbmGBps}. */
        public String figure() {
            return figure;
        }

        /** What is wrong with it, e.g. {@code must be a positive number, got 0.0}. */
        public String problem() {
            return problem;
        }
    }

    private static void positive(String name, long v) {
        if (v <= 0) {
            throw new BadFigure(name, "must be a positive number, got " + v);
        }
    }

    private static void positive(String name, double v) {
        if (!(v > 0)) {
            throw new BadFigure(name, "must be a positive number, got " + v);
        }
    }

    private static void notNegative(String name, double v) {
        if (!(v >= 0) || Double.isInfinite(v)) {
            throw new BadFigure(name, "must be a finite number >= 0, got " + v);
        }
    }

    public static TimeModel defaults() {
        return new TimeModel(16e9, 131_072, 40, 25, 3350, 50, 7, 100, 12.5, 200);
    }

    /** Microseconds to move {@code tokens} tokens' KV at {@code gbps} GB/s. */
    double transferUs(long tokens, double gbps) {
        return tokens * (double) kvBytesPerToken / (gbps * 1e3);
    }

    /** Microseconds of one step's fixed part and compute. */
    double computeUs(long prefillTokens, long decodeTokens, long contextTokens) {
        return weightBytes / (hbmGBps * 1e3)
                + prefillTokens * prefillUsPerToken
                + decodeTokens * decodeUsPerToken
                + transferUs(contextTokens, hbmGBps);
    }

    /** Link bandwidth of a tier by name. */
    double bandwidth(String tier) {
        return switch (tier) {
            case "host" -> hostGBps;
            case "disk" -> diskGBps;
            default -> netGBps;
        };
    }

    /** Per-lookup latency of a tier by name. */
    double latency(String tier) {
        return switch (tier) {
            case "host" -> 0;
            case "disk" -> diskLatencyUs;
            default -> netLatencyUs;
        };
    }
}
