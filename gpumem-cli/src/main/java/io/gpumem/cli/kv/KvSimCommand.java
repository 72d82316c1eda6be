package io.gpumem.cli.kv;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import io.gpumem.alloc.CachingAllocator;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.kvcache.hash.HashAlgorithm;
import io.gpumem.kvcache.manager.PreemptionMode;
import io.gpumem.kvcache.memory.KvMemory;
import io.gpumem.kvcache.sched.VictimPolicy;
import io.gpumem.kvcache.sim.ServingSimulator;
import io.gpumem.kvcache.sim.SimConfig;
import io.gpumem.kvcache.sim.SimObserver;
import io.gpumem.kvcache.sim.SimReport;
import io.gpumem.kvcache.sim.Workload;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.Locale;
import java.util.concurrent.Callable;

/**
 * {@code gpumem kv-sim}: runs the paged-KV-cache serving simulator on a simulated device and prints its
 * figures as text or as one JSON object. Every option is validated up front; a bad value names the
 * option and exits with code 2 before anything runs.
 */
@Command(name = "kv-sim", mixinStandardHelpOptions = true,
        description = "Simulate continuous-batching LLM serving on the paged KV cache (seeded, deterministic).")
public final class KvSimCommand implements Callable<Integer> {

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    @Option(names = "--workload", defaultValue = "sharegpt", description = "sharegpt | alpaca | shared-prefix | chat (default: ${DEFAULT-VALUE})")
    String workload;
    @Option(names = "--seed", defaultValue = "1", description = "Random seed (default: ${DEFAULT-VALUE})")
    long seed;
    @Option(names = "--requests", defaultValue = "1000", description = "Requests to generate; conversations for chat (default: ${DEFAULT-VALUE})")
    int requests;
    @Option(names = "--rate", defaultValue = "0.2", description = "Mean arrivals per step, Poisson (default: ${DEFAULT-VALUE})")
    double rate;
    @Option(names = "--blocks", defaultValue = "4096", description = "KV blocks including the null block (default: ${DEFAULT-VALUE})")
    int blocks;
    @Option(names = "--block-size", defaultValue = "16", description = "Tokens per block (default: ${DEFAULT-VALUE})")
    int blockSize;
    @Option(names = "--prefix-caching", defaultValue = "on", description = "on | off (default: ${DEFAULT-VALUE})")
    String prefixCaching;
    @Option(names = "--preemption", defaultValue = "recompute", description = "recompute | swap (default: ${DEFAULT-VALUE})")
    String preemption;
    @Option(names = "--victim", defaultValue = "fcfs", description = "fcfs | priority | least-computed (default: ${DEFAULT-VALUE})")
    String victim;
    @Option(names = "--token-budget", defaultValue = "2048", description = "Tokens computed per step (default: ${DEFAULT-VALUE})")
    int tokenBudget;
    @Option(names = "--max-running", defaultValue = "256", description = "Most running requests (default: ${DEFAULT-VALUE})")
    int maxRunning;
    @Option(names = "--lookahead", defaultValue = "0", description = "Speculative slots per running request per step (default: ${DEFAULT-VALUE})")
    int lookahead;
    @Option(names = "--max-model-len", defaultValue = "2048", description = "Longest sequence, prompt + output (default: ${DEFAULT-VALUE})")
    int maxModelLen;
    @Option(names = "--watermark", defaultValue = "0", description = "Admission watermark, fraction of blocks kept free; 0 = off (default: ${DEFAULT-VALUE})")
    double watermark;
    @Option(names = "--swap-space", defaultValue = "67108864", description = "Host-tier bytes for swap preemption (default: ${DEFAULT-VALUE} = 64 MiB)")
    long swapSpace;
    @Option(names = "--prefix-tokens", defaultValue = "341", description = "Shared prefix length of shared-prefix (default: ${DEFAULT-VALUE})")
    int prefixTokens;
    @Option(names = "--hash", defaultValue = "fast128", description = "fast128 | sha256 (default: ${DEFAULT-VALUE})")
    String hash;
    @Option(names = "--layers", defaultValue = "2", description = "Model layers of the simulated KV memory (default: ${DEFAULT-VALUE})")
    int layers;
    @Option(names = "--kv-heads", defaultValue = "2", description = "KV heads (default: ${DEFAULT-VALUE})")
    int kvHeads;
    @Option(names = "--head-size", defaultValue = "16", description = "Head dimension (default: ${DEFAULT-VALUE})")
    int headSize;
    @Option(names = "--max-steps", defaultValue = "2000000", description = "Stop after this many steps (default: ${DEFAULT-VALUE})")
    long maxSteps;
    @Option(names = "--priority-levels", defaultValue = "1", description = "Request priorities drawn from 0..N-1, smaller = more important (default: ${DEFAULT-VALUE})")
    int priorityLevels;
    @Option(names = "--memory", defaultValue = "allocator", description = "Where the KV regions come from: allocator (gpumem's caching allocator) | direct (device malloc) (default: ${DEFAULT-VALUE})")
    String memory;
    @Option(names = "--json", description = "Print one JSON object instead of text")
    boolean json;
    @Option(names = "--metrics-port", paramLabel = "N", description = "Serve live metrics for Prometheus at http://127.0.0.1:N/metrics while simulating; 0 = any free port (default: off)")
    Integer metricsPort;
    @Option(names = "--metrics-linger", paramLabel = "SECONDS", defaultValue = "0", description = "Keep serving the final metrics this long after the run (default: ${DEFAULT-VALUE})")
    int metricsLinger;

    @Override
    public Integer call() throws IOException {
        SimConfig config = config();
        SimulatedDevice device = SimulatedDevice.builder()
                .capacity(ServingSimulator.deviceBytes(config) + (64L << 20)).backed(true).build();
        if (metricsPort != null && (metricsPort < 0 || metricsPort > 65535)) {
            throw bad("--metrics-port must be in 0..65535, got " + metricsPort);
        }
        if (metricsLinger < 0) {
            throw bad("--metrics-linger must be >= 0, got " + metricsLinger);
        }
        CachingAllocator allocator = null;
        KvMemory kvMemory = switch (memory.toLowerCase(Locale.ROOT)) {
            case "allocator" -> KvMemory.cachingAllocator(allocator = new CachingAllocator(device));
            case "direct" -> KvMemory.direct(device);
            default -> throw bad("--memory must be allocator or direct, got '" + memory + "'");
        };
        KvSimMetrics metrics = null;
        if (metricsPort != null) {
            try {
                metrics = KvSimMetrics.start(metricsPort, allocator);
            } catch (IOException e) {
                throw bad("--metrics-port " + metricsPort + ": cannot listen on 127.0.0.1: " + e.getMessage());
            }
            spec.commandLine().getErr().println("kv-sim: metrics at " + metrics.url());
            spec.commandLine().getErr().flush();
        }
        try {
            SimReport r = ServingSimulator.run(config, kvMemory, metrics != null ? metrics : SimObserver.NONE);
            PrintWriter out = spec.commandLine().getOut();
            out.print(json ? json(config, r) : text(config, r));
            out.flush();
            if (metrics != null && metricsLinger > 0) {
                try {
                    Thread.sleep(metricsLinger * 1000L);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
            return r.requestsFinished() == r.requestsTotal() ? 0 : 1;
        } finally {
            if (metrics != null) {
                metrics.close();
            }
        }
    }

    SimConfig config() {
        Workload w = parse("--workload", () -> Workload.parse(workload));
        PreemptionMode p = parse("--preemption", () -> PreemptionMode.parse(preemption));
        VictimPolicy v = parse("--victim", () -> VictimPolicy.parse(victim));
        HashAlgorithm h = parse("--hash", () -> HashAlgorithm.parse(hash));
        boolean caching = switch (prefixCaching.toLowerCase(Locale.ROOT)) {
            case "on" -> true;
            case "off" -> false;
            default -> throw bad("--prefix-caching must be on or off, got '" + prefixCaching + "'");
        };
        positive("--requests", requests);
        positive("--blocks", blocks);
        positive("--block-size", blockSize);
        positive("--token-budget", tokenBudget);
        positive("--max-running", maxRunning);
        positive("--max-model-len", maxModelLen);
        positive("--layers", layers);
        positive("--kv-heads", kvHeads);
        positive("--head-size", headSize);
        positive("--max-steps", maxSteps);
        positive("--priority-levels", priorityLevels);
        if (!(rate > 0) || Double.isInfinite(rate)) {
            throw bad("--rate must be a positive number, got " + rate);
        }
        if (!(watermark >= 0 && watermark < 1)) {
            throw bad("--watermark must be in [0, 1), got " + watermark);
        }
        if (lookahead < 0 || swapSpace < 0 || prefixTokens < 0) {
            throw bad("--lookahead, --swap-space and --prefix-tokens must not be negative");
        }
        if (blocks < 2 || (long) (blocks - 1) * blockSize < maxModelLen) {
            throw bad("--blocks " + blocks + " of --block-size " + blockSize + " hold " + Math.max(0, (long) (blocks - 1) * blockSize)
                    + " tokens, less than one request of --max-model-len " + maxModelLen + "; use at least "
                    + ((maxModelLen + blockSize - 1) / blockSize + 1) + " blocks");
        }
        if (w == Workload.SHARED_PREFIX && prefixTokens >= maxModelLen - 2) {
            throw bad("--prefix-tokens " + prefixTokens + " leaves no room under --max-model-len " + maxModelLen);
        }
        return new SimConfig(w, seed, requests, rate, blocks, blockSize, caching, p, v, tokenBudget, maxRunning, lookahead,
                maxModelLen, watermark, swapSpace, prefixTokens, h, layers, kvHeads, headSize, maxSteps, priorityLevels);
    }

    private <T> T parse(String option, java.util.function.Supplier<T> parser) {
        try {
            return parser.get();
        } catch (IllegalArgumentException e) {
            throw bad(option + ": " + e.getMessage());
        }
    }

    private void positive(String option, long v) {
        if (v <= 0) {
            throw bad(option + " must be positive, got " + v);
        }
    }

    private CommandLine.ParameterException bad(String message) {
        return new CommandLine.ParameterException(spec.commandLine(), message);
    }

    static String text(SimConfig c, SimReport r) {
        StringBuilder b = new StringBuilder();
        b.append(String.format(Locale.ROOT, "kv-sim workload=%s seed=%d blocks=%d block-size=%d prefix-caching=%s preemption=%s victim=%s%n",
                c.workload().cliName(), c.seed(), c.blocks(), c.blockSize(), c.prefixCaching() ? "on" : "off",
                c.preemption().name().toLowerCase(Locale.ROOT), c.victimPolicy().name().toLowerCase(Locale.ROOT).replace('_', '-')));
        line(b, "requests finished", r.requestsFinished() + " / " + r.requestsTotal());
        line(b, "steps", Long.toString(r.steps()));
        line(b, "tokens per step", f2(r.tokensPerStep()));
        line(b, "output tokens", Long.toString(r.outputTokens()));
        line(b, "preemptions", r.preemptions() + " (recompute " + r.recomputePreemptions() + ", swap " + r.swapPreemptions() + ")");
        line(b, "prefix hit rate", pct(r.prefixHitRate()) + " (last 1000 requests " + pct(r.prefixHitRateWindow()) + ")");
        line(b, "KV waste", pct(r.kvWaste()) + " (contiguous max-length reservation: " + pct(r.contiguousWaste()) + ")");
        line(b, "KV usage", "mean " + pct(r.meanUsage()) + ", peak " + pct(r.peakUsage()));
        line(b, "running per step", f2(r.meanRunning()));
        line(b, "copy-on-write blocks", Long.toString(r.copyOnWriteBlocks()));
        line(b, "swap traffic", r.swapOutBytes() + " bytes out, " + r.swapInBytes() + " bytes in, "
                + r.swapInReusedBlocks() + " blocks re-hit instead of copied");
        line(b, "block-pool time", f2(r.poolNsPerStep() / 1000.0) + " us per step");
        return b.toString();
    }

    private static void line(StringBuilder b, String k, String v) {
        b.append(String.format(Locale.ROOT, "  %-22s %s%n", k, v));
    }

    private static String f2(double v) {
        return String.format(Locale.ROOT, "%.2f", v);
    }

    private static String pct(double v) {
        return String.format(Locale.ROOT, "%.2f%%", v * 100);
    }

    static String json(SimConfig c, SimReport r) throws IOException {
        StringWriter w = new StringWriter();
        try (JsonGenerator g = new JsonFactory().createGenerator(w)) {
            g.writeStartObject();
            g.writeStringField("workload", c.workload().cliName());
            g.writeNumberField("seed", c.seed());
            g.writeNumberField("blocks", c.blocks());
            g.writeNumberField("block_size", c.blockSize());
            g.writeBooleanField("prefix_caching", c.prefixCaching());
            g.writeStringField("preemption", c.preemption().name().toLowerCase(Locale.ROOT));
            g.writeNumberField("requests_total", r.requestsTotal());
            g.writeNumberField("requests_finished", r.requestsFinished());
            g.writeNumberField("steps", r.steps());
            g.writeNumberField("tokens_per_step", r.tokensPerStep());
            g.writeNumberField("output_tokens", r.outputTokens());
            g.writeNumberField("preemptions", r.preemptions());
            g.writeNumberField("recompute_preemptions", r.recomputePreemptions());
            g.writeNumberField("swap_preemptions", r.swapPreemptions());
            g.writeNumberField("prefix_hit_rate", r.prefixHitRate());
            g.writeNumberField("prefix_hit_rate_window", r.prefixHitRateWindow());
            g.writeNumberField("kv_waste", r.kvWaste());
            g.writeNumberField("contiguous_waste", r.contiguousWaste());
            g.writeNumberField("mean_usage", r.meanUsage());
            g.writeNumberField("peak_usage", r.peakUsage());
            g.writeNumberField("mean_running", r.meanRunning());
            g.writeNumberField("copy_on_write_blocks", r.copyOnWriteBlocks());
            g.writeNumberField("swap_out_bytes", r.swapOutBytes());
            g.writeNumberField("swap_in_bytes", r.swapInBytes());
            g.writeNumberField("swap_in_reused_blocks", r.swapInReusedBlocks());
            g.writeNumberField("pool_ns_per_step", r.poolNsPerStep());
            g.writeEndObject();
        }
        return w + System.lineSeparator();
    }
}
