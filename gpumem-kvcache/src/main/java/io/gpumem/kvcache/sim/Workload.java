package io.gpumem.kvcache.sim;

/**
 * Synthetic serving workloads, after the PagedAttention paper's evaluation (its section 6.1) and vLLM's
 * benchmark protocol. Lengths are log-normal with the listed means, clamped as vLLM's ShareGPT
 * benchmark filter does (prompt under 1024 tokens).
 */
public enum Workload {
    /** Long, high-variance chats: prompt mean 161, output mean 338 tokens (σ 1.0), prompt ≤ 1024, output ≤ 1024. */
    SHAREGPT("sharegpt", 161, 1.0, 4, 1024, 338, 1.0, 4, 1024),
    /** Short instructions: prompt mean 19, output mean 58 tokens (σ 0.6), prompt ≤ 256, output ≤ 512. */
    ALPACA("alpaca", 19, 0.6, 2, 256, 58, 0.6, 2, 512),
    /** A fixed few-shot prefix (default 341 tokens, the paper's 5-shot) + question mean 20, output mean 30. */
    SHARED_PREFIX("shared-prefix", 20, 0.5, 2, 256, 30, 0.5, 2, 256),
    /** Multi-turn chat: 64-token system prompt, 2–6 turns, user message mean 60, answer mean 120; each turn resends the history. */
    CHAT("chat", 60, 0.8, 2, 512, 120, 0.8, 2, 512);

    final String cliName;
    final double promptMean;
    final double promptSigma;
    final int promptMin;
    final int promptMax;
    final double outputMean;
    final double outputSigma;
    final int outputMin;
    final int outputMax;

    Workload(
            String cliName,
            double promptMean,
            double promptSigma,
            int promptMin,
            int promptMax,
            double outputMean,
            double outputSigma,
            int outputMin,
            int outputMax) {
        this.cliName = cliName;
        this.promptMean = promptMean;
        this.promptSigma = promptSigma;
        this.promptMin = promptMin;
        this.promptMax = promptMax;
        this.outputMean = outputMean;
        this.outputSigma = outputSigma;
        this.outputMin = outputMin;
        this.outputMax = outputMax;
    }

    /** The name used on the command line and in reports. */
    public String cliName() {
        return cliName;
    }

    public static Workload parse(String s) {
        for (Workload w : values()) {
            if (w.cliName.equalsIgnoreCase(s) || w.name().equalsIgnoreCase(s)) {
                return w;
            }
        }
        throw new IllegalArgumentException(
                "unknown workload '" + s + "' (expected sharegpt, alpaca, shared-prefix or chat)");
    }
}
