package io.gpumem.cli.kv;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import io.gpumem.alloc.CachingAllocator;
import io.gpumem.cli.GpumemCommand;
import io.gpumem.cli.SizeConverter;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.kvcache.KvCacheException;
import io.gpumem.kvcache.hash.HashAlgorithm;
import io.gpumem.kvcache.manager.PreemptionMode;
import io.gpumem.kvcache.memory.KvMemory;
import io.gpumem.kvcache.redis.RedisKvStore;
import io.gpumem.kvcache.sched.VictimPolicy;
import io.gpumem.kvcache.sim.ServingSimulator;
import io.gpumem.kvcache.sim.SimConfig;
import io.gpumem.kvcache.sim.SimObserver;
import io.gpumem.kvcache.sim.SimReport;
import io.gpumem.kvcache.sim.TierSettings;
import io.gpumem.kvcache.sim.TimeModel;
import io.gpumem.kvcache.sim.Workload;
import io.gpumem.kvcache.tier.InMemoryRemoteStore;
import io.gpumem.kvcache.tier.KvTiers;
import io.gpumem.kvcache.tier.RemoteKvStore;
import io.gpumem.kvcache.tier.TierStats;
import io.gpumem.size.ByteSize;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.IntFunction;
import java.util.function.Supplier;
import java.util.stream.Stream;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code gpumem kv-sim}: runs the paged-KV-cache serving simulator on a simulated device and prints its
 * figures as text or as one JSON object. Every option is validated up front; a bad value names the
 * option and exits with code 2 before anything runs.
 */
@Command(
        name = "kv-sim",
        mixinStandardHelpOptions = true,
        description = "Simulate continuous-batching LLM serving on the paged KV cache (seeded, deterministic).")
public final class KvSimCommand extends GpumemCommand {

    /** Where the simulator settings' flags start: their defaults are {@link SimConfig}'s, stated there only. */
    private static final SimConfig DEFAULTS = SimConfig.defaults();

    @Option(names = "--workload", description = "sharegpt | alpaca | shared-prefix | chat (default: ${DEFAULT-VALUE})")
    String workload = DEFAULTS.workload().cliName();

    @Option(names = "--seed", description = "Random seed (default: ${DEFAULT-VALUE})")
    long seed = DEFAULTS.seed();

    @Option(
            names = "--requests",
            description = "Requests to generate; conversations for chat (default: ${DEFAULT-VALUE})")
    int requests = DEFAULTS.requests();

    @Option(names = "--rate", description = "Mean arrivals per step, Poisson (default: ${DEFAULT-VALUE})")
    double rate = DEFAULTS.arrivalRate();

    @Option(names = "--blocks", description = "KV blocks including the null block (default: ${DEFAULT-VALUE})")
    int blocks = DEFAULTS.spec().numBlocks();

    @Option(names = "--block-size", description = "Tokens per block (default: ${DEFAULT-VALUE})")
    int blockSize = DEFAULTS.spec().blockSize();

    @Option(names = "--prefix-caching", description = "on | off (default: ${DEFAULT-VALUE})")
    String prefixCaching = onOff(DEFAULTS.cache().prefixCaching());

    @Option(names = "--preemption", description = "recompute | swap (default: ${DEFAULT-VALUE})")
    String preemption = flagValue(DEFAULTS.scheduler().preemption());

    @Option(names = "--victim", description = "fcfs | priority | least-computed (default: ${DEFAULT-VALUE})")
    String victim = flagValue(DEFAULTS.scheduler().victimPolicy());

    @Option(names = "--token-budget", description = "Tokens computed per step (default: ${DEFAULT-VALUE})")
    int tokenBudget = DEFAULTS.scheduler().tokenBudget();

    @Option(names = "--max-running", description = "Most running requests (default: ${DEFAULT-VALUE})")
    int maxRunning = DEFAULTS.scheduler().maxRunning();

    @Option(
            names = "--lookahead",
            description = "Speculative slots per running request per step (default: ${DEFAULT-VALUE})")
    int lookahead = DEFAULTS.scheduler().lookahead();

    @Option(names = "--max-model-len", description = "Longest sequence, prompt + output (default: ${DEFAULT-VALUE})")
    int maxModelLen = DEFAULTS.spec().maxModelLen();

    @Option(
            names = "--watermark",
            description = "Admission watermark, fraction of blocks kept free; 0 = off (default: ${DEFAULT-VALUE})")
    double watermark = DEFAULTS.cache().watermark();

    @Option(
            names = "--swap-space",
            paramLabel = "SIZE",
            converter = SizeConverter.OrZero.class,
            description = "Host swap space for swap preemption, e.g. 4GiB; 0 = none (default: 64 MiB)")
    long swapSpace = DEFAULTS.cache().swapSpaceBytes();

    @Option(
            names = "--prefix-tokens",
            description = "Shared prefix length of shared-prefix (default: ${DEFAULT-VALUE})")
    int prefixTokens = DEFAULTS.prefixTokens();

    @Option(names = "--hash", description = "fast128 | sha256 (default: ${DEFAULT-VALUE})")
    String hash = flagValue(DEFAULTS.cache().hashAlgorithm());

    @Option(names = "--layers", description = "Model layers of the simulated KV memory (default: ${DEFAULT-VALUE})")
    int layers = DEFAULTS.spec().layers();

    @Option(names = "--kv-heads", description = "KV heads (default: ${DEFAULT-VALUE})")
    int kvHeads = DEFAULTS.spec().kvHeads();

    @Option(names = "--head-size", description = "Head dimension (default: ${DEFAULT-VALUE})")
    int headSize = DEFAULTS.spec().headSize();

    @Option(names = "--max-steps", description = "Stop after this many steps (default: ${DEFAULT-VALUE})")
    long maxSteps = DEFAULTS.maxSteps();

    @Option(
            names = "--priority-levels",
            description = "Request priorities drawn from 0..N-1, smaller = more important (default: ${DEFAULT-VALUE})")
    int priorityLevels = DEFAULTS.priorityLevels();

    @Option(
            names = "--memory",
            defaultValue = "allocator",
            description =
                    "Where the KV regions come from: allocator (gpumem's caching allocator) | direct (device malloc) (default: ${DEFAULT-VALUE})")
    String memory;

    @Option(names = "--json", description = "Print one JSON object instead of text")
    boolean json;

    @Option(
            names = "--metrics-port",
            paramLabel = "N",
            description =
                    "Serve live metrics for Prometheus at http://127.0.0.1:N/metrics while simulating; 0 = any free port (default: off)")
    Integer metricsPort;

    @Option(
            names = "--metrics-linger",
            paramLabel = "SECONDS",
            defaultValue = "0",
            description = "Keep serving the final metrics this long after the run (default: ${DEFAULT-VALUE})")
    int metricsLinger;

    @Option(
            names = "--host-tier",
            defaultValue = "0",
            description = "Host-memory tier for evicted KV blocks, SIZE; 0 = none (default: ${DEFAULT-VALUE})")
    String hostTier;

    @Option(
            names = "--disk-tier",
            defaultValue = "0",
            description = "Disk tier for evicted KV blocks, SIZE; 0 = none (default: ${DEFAULT-VALUE})")
    String diskTier;

    @Option(
            names = "--disk-dir",
            description = "Directory of the disk tier (default: a temporary directory, deleted afterwards)")
    Path diskDir;

    @Option(
            names = "--remote",
            description = "Shared remote tier: redis://HOST:PORT or memory:SIZE (in-process); default none")
    String remote;

    @Option(
            names = "--model",
            defaultValue = TierSettings.DEFAULT_MODEL,
            description = {
                "Model name in the remote store's key namespace (default: ${DEFAULT-VALUE}).",
                "Runs of one name and geometry share blocks; runs of different names never do."
            })
    String model;

    @Option(
            names = "--instances",
            defaultValue = "1",
            description =
                    "Serving instances, each with its own device pool and tiers, sharing --remote (default: ${DEFAULT-VALUE})")
    int instances;

    @Option(
            names = "--tier-queue-blocks",
            description = "Write-queue slots per tier; a full queue drops the write (default: ${DEFAULT-VALUE})")
    int tierQueueBlocks = TierSettings.NONE.queueBlocks();

    @Option(
            names = "--tier-drain-blocks",
            description = "Blocks written into each tier per step (default: ${DEFAULT-VALUE})")
    int tierDrainBlocks = TierSettings.NONE.drainBlocks();

    @Option(
            names = "--time-weight-bytes",
            defaultValue = "16000000000",
            description = "Model weights read per step (default: ${DEFAULT-VALUE}, Llama-3-8B fp16)")
    double weightBytes;

    @Option(
            names = "--time-kv-bytes-per-token",
            defaultValue = "131072",
            description = "KV bytes per token used for transfer times (default: ${DEFAULT-VALUE})")
    long kvBytesPerToken;

    @Option(
            names = "--time-prefill-us",
            defaultValue = "40",
            description = "Prefill compute per token, microseconds (default: ${DEFAULT-VALUE})")
    double prefillUs;

    @Option(
            names = "--time-decode-us",
            defaultValue = "25",
            description = "Decode compute per token, microseconds (default: ${DEFAULT-VALUE})")
    double decodeUs;

    @Option(
            names = "--time-hbm-gbps",
            defaultValue = "3350",
            description = "HBM bandwidth, GB/s (default: ${DEFAULT-VALUE})")
    double hbmGBps;

    @Option(
            names = "--time-host-gbps",
            defaultValue = "50",
            description = "Host-device link, GB/s: PCIe 5.0 x16 50, NVLink-C2C 450 (default: ${DEFAULT-VALUE})")
    double hostGBps;

    @Option(
            names = "--time-disk-gbps",
            defaultValue = "7",
            description = "Disk bandwidth, GB/s (default: ${DEFAULT-VALUE})")
    double diskGBps;

    @Option(
            names = "--time-disk-latency-us",
            defaultValue = "100",
            description = "Disk latency per step that reads it, microseconds (default: ${DEFAULT-VALUE})")
    double diskLatencyUs;

    @Option(
            names = "--time-net-gbps",
            defaultValue = "12.5",
            description = "Network bandwidth to the remote store, GB/s (default: ${DEFAULT-VALUE})")
    double netGBps;

    @Option(
            names = "--time-net-latency-us",
            defaultValue = "200",
            description = "Remote round trip per step that asks it, microseconds (default: ${DEFAULT-VALUE})")
    double netLatencyUs;

    /** The flag of each {@link SimConfig.Builder} setting whose flag is not its name in kebab case. */
    private static final Map<String, String> FLAG_OF = Map.of(
            "arrivalRate",
            "--rate",
            "victimPolicy",
            "--victim",
            "swapSpaceBytes",
            "--swap-space",
            "hashAlgorithm",
            "--hash");

    @Override
    public Integer call() throws IOException {
        SimConfig config = config();
        long host = size("--host-tier", hostTier);
        long disk = size("--disk-tier", diskTier);
        if (!config.cache().prefixCaching() && (host > 0 || disk > 0 || remote != null)) {
            // The tiers hold prefix-cache blocks: without the cache they would stay empty, and a run that printed
            // no tier figures for a tier the user asked for would look like a tier that never hits.
            throw bad("--host-tier, --disk-tier and --remote need --prefix-caching on (the tiers keep evicted"
                    + " prefix-cache blocks)");
        }
        try {
            KvTiers.builder(config.spec()).model(model);
        } catch (KvCacheException e) {
            throw bad("--model: " + e.getMessage());
        }
        positive("--instances", instances);
        if (instances > ServingSimulator.MAX_INSTANCES) {
            throw bad("--instances " + instances + " is over the limit of " + ServingSimulator.MAX_INSTANCES);
        }
        positive("--tier-queue-blocks", tierQueueBlocks);
        if (tierQueueBlocks > KvTiers.MAX_QUEUE_BLOCKS) {
            throw bad("--tier-queue-blocks " + tierQueueBlocks + " is over the limit of " + KvTiers.MAX_QUEUE_BLOCKS);
        }
        positive("--tier-drain-blocks", tierDrainBlocks);
        TimeModel time = timeModel(() -> new TimeModel(
                weightBytes,
                kvBytesPerToken,
                prefillUs,
                decodeUs,
                hbmGBps,
                hostGBps,
                diskGBps,
                diskLatencyUs,
                netGBps,
                netLatencyUs));
        if (metricsPort != null && (metricsPort < 0 || metricsPort > 65535)) {
            throw bad("--metrics-port must be in 0..65535, got " + metricsPort);
        }
        if (metricsLinger < 0) {
            throw bad("--metrics-linger must be >= 0, got " + metricsLinger);
        }
        String kind = memory.toLowerCase(Locale.ROOT);
        if (!kind.equals("allocator") && !kind.equals("direct")) {
            throw bad("--memory must be allocator or direct, got '" + memory + "'");
        }
        List<CachingAllocator> allocators = new CopyOnWriteArrayList<>();
        IntFunction<KvMemory> memoryFor = i -> {
            SimulatedDevice device = SimulatedDevice.builder()
                    .capacity(ServingSimulator.deviceBytes(config) + (64L << 20))
                    .backed(true)
                    .build();
            if (kind.equals("direct")) {
                return KvMemory.direct(device);
            }
            CachingAllocator allocator = new CachingAllocator(device);
            allocators.add(allocator);
            return KvMemory.cachingAllocator(allocator);
        };
        KvSimMetrics metrics = null;
        if (metricsPort != null) {
            try {
                metrics = KvSimMetrics.start(metricsPort, allocators);
            } catch (IOException e) {
                throw bad("--metrics-port " + metricsPort + ": " + e.getMessage());
            }
            err().println("kv-sim: metrics at " + metrics.url());
            err().flush();
        }
        Path tempDir = null;
        SimReport r;
        try (RemoteKvStore store = remoteStore()) {
            Path dir = diskDir;
            if (disk > 0 && dir == null) {
                tempDir = Files.createTempDirectory("gpumem-kv-disk");
                dir = tempDir;
            }
            r = ServingSimulator.run(
                    config,
                    new TierSettings(host, disk, dir, store, tierQueueBlocks, tierDrainBlocks, model),
                    time,
                    instances,
                    memoryFor,
                    metrics != null ? metrics : SimObserver.NONE);
        } catch (RuntimeException e) {
            if (metrics != null) {
                metrics.close();
            }
            throw e;
        } finally {
            if (tempDir != null) {
                deleteTree(tempDir);
            }
        }
        PrintWriter out = out();
        out.print(json ? json(config, r) : text(config, r));
        out.flush();
        if (metrics != null) {
            try {
                if (metricsLinger > 0) {
                    Thread.sleep(metricsLinger * 1000L);
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } finally {
                metrics.close();
            }
        }
        return r.servedEverything() ? 0 : 1;
    }

    private long size(String option, String text) {
        long v = parse(option, () -> ByteSize.parse(text));
        if (v < 0) {
            throw bad(option + " must not be negative, got " + text);
        }
        return v;
    }

    /** The shared store named by --remote, or null. */
    private RemoteKvStore remoteStore() {
        if (remote == null) {
            return null;
        }
        if (remote.startsWith("memory:")) {
            long bytes = size("--remote", remote.substring("memory:".length()));
            if (bytes == 0) {
                throw bad("--remote memory:SIZE needs a positive size, got '" + remote + "'");
            }
            return new InMemoryRemoteStore(bytes);
        }
        if (!remote.startsWith("redis://")) {
            throw bad("--remote must be redis://HOST:PORT or memory:SIZE, got '" + remote + "'");
        }
        try {
            return RedisKvStore.connect(remote);
        } catch (RuntimeException e) {
            throw bad("--remote " + remote + ": cannot connect (" + e.getMessage() + ")");
        }
    }

    private static void deleteTree(Path dir) throws IOException {
        try (Stream<Path> walk = Files.walk(dir)) {
            for (Path p : walk.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(p);
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
        try {
            return SimConfig.builder()
                    .settingNames(KvSimCommand::flag)
                    .workload(w)
                    .seed(seed)
                    .requests(requests)
                    .arrivalRate(rate)
                    .blocks(blocks)
                    .blockSize(blockSize)
                    .prefixCaching(caching)
                    .preemption(p)
                    .victimPolicy(v)
                    .tokenBudget(tokenBudget)
                    .maxRunning(maxRunning)
                    .lookahead(lookahead)
                    .maxModelLen(maxModelLen)
                    .watermark(watermark)
                    .swapSpaceBytes(swapSpace)
                    .prefixTokens(prefixTokens)
                    .hashAlgorithm(h)
                    .layers(layers)
                    .kvHeads(kvHeads)
                    .headSize(headSize)
                    .maxSteps(maxSteps)
                    .priorityLevels(priorityLevels)
                    .build();
        } catch (KvCacheException e) {
            throw bad(e.getMessage());
        }
    }

    /** The flag that sets a {@link SimConfig.Builder} setting: {@code blockSize} is {@code --block-size}. */
    static String flag(String setting) {
        String special = FLAG_OF.get(setting);
        return special != null
                ? special
                : "--" + setting.replaceAll("([A-Z])", "-$1").toLowerCase(Locale.ROOT);
    }

    private <T> T parse(String option, Supplier<T> parser) {
        try {
            return parser.get();
        } catch (IllegalArgumentException e) {
            throw bad(option + ": " + e.getMessage());
        }
    }

    /** The flag of each {@link TimeModel} figure, for the time model's refusals. */
    private static final Map<String, String> TIME_FLAG_OF = Map.of(
            "weightBytes", "--time-weight-bytes",
            "kvBytesPerToken", "--time-kv-bytes-per-token",
            "prefillUsPerToken", "--time-prefill-us",
            "decodeUsPerToken", "--time-decode-us",
            "hbmGBps", "--time-hbm-gbps",
            "hostGBps", "--time-host-gbps",
            "diskGBps", "--time-disk-gbps",
            "diskLatencyUs", "--time-disk-latency-us",
            "netGBps", "--time-net-gbps",
            "netLatencyUs", "--time-net-latency-us");

    /** The time model, a refusal naming the {@code --time-*} flag of the figure it refused. */
    private TimeModel timeModel(Supplier<TimeModel> build) {
        try {
            return build.get();
        } catch (TimeModel.BadFigure e) {
            String flag = TIME_FLAG_OF.get(e.figure());
            throw bad(flag != null ? flag + " " + e.problem() : "--time-*: " + e.getMessage());
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

    /** Why a run did not serve everything (only {@code --max-steps} stops one early), "" when it did. */
    private static String stoppedEarly(SimConfig c, SimReport r) {
        if (r.servedEverything()) {
            return "";
        }
        String more = r.requestsNotArrived() > 0 ? r.requestsNotArrived() + " more had not arrived when " : "";
        return " (" + more + "--max-steps " + c.maxSteps() + " stopped the run)";
    }

    static String text(SimConfig c, SimReport r) {
        StringBuilder b = new StringBuilder();
        b.append(String.format(
                Locale.ROOT,
                "kv-sim workload=%s seed=%d blocks=%d block-size=%d prefix-caching=%s preemption=%s victim=%s%n",
                c.workload().cliName(),
                c.seed(),
                c.spec().numBlocks(),
                c.spec().blockSize(),
                onOff(c.cache().prefixCaching()),
                flagValue(c.scheduler().preemption()),
                flagValue(c.scheduler().victimPolicy())));
        line(b, "requests finished", r.requestsFinished() + " / " + r.requestsTotal() + stoppedEarly(c, r));
        line(b, "steps", Long.toString(r.steps()));
        line(b, "tokens per step", f2(r.tokensPerStep()));
        line(b, "output tokens", Long.toString(r.outputTokens()));
        line(
                b,
                "preemptions",
                r.preemptions() + " (recompute " + r.recomputePreemptions() + ", swap " + r.swapPreemptions() + ")");
        line(
                b,
                "prefix hit rate",
                pct(r.prefixHitRate()) + " (last 1000 requests " + pct(r.prefixHitRateWindow()) + ")");
        line(
                b,
                "KV waste",
                pct(r.kvWaste()) + " (contiguous max-length reservation: " + pct(r.contiguousWaste()) + ")");
        line(b, "KV usage", "mean " + pct(r.meanUsage()) + ", peak " + pct(r.peakUsage()));
        line(b, "running per step", f2(r.meanRunning()));
        line(b, "copy-on-write blocks", Long.toString(r.copyOnWriteBlocks()));
        line(
                b,
                "swap traffic",
                r.swapOutBytes() + " bytes out, " + r.swapInBytes() + " bytes in, " + r.swapInReusedBlocks()
                        + " blocks re-hit instead of copied");
        line(b, "block-pool time", f2(r.poolNsPerStep() / 1000.0) + " us per step");
        SimReport.Timing t = r.timing();
        line(
                b,
                "time to first token",
                "mean " + f2(t.ttftMsMean()) + " ms, p50 " + f2(t.ttftMsP50()) + " ms, p99 " + f2(t.ttftMsP99())
                        + " ms (simulated)");
        line(
                b,
                "output tokens/s",
                f2(t.outputTokensPerSecond()) + " over " + f2(t.simulatedSeconds()) + " simulated s");
        line(b, "recomputed tokens", Long.toString(t.recomputedTokens()));
        for (TierStats s : r.tiers()) {
            line(
                    b,
                    s.tier() + " tier",
                    s.hits() + " hits (" + pct(hitRate(s)) + " of lookups), " + s.bytesIn() + " bytes in, "
                            + s.bytesOut() + " bytes out, " + s.dropped() + " dropped, " + s.failed() + " failed, "
                            + s.corrupt() + " corrupt");
        }
        for (int i = 0; i < r.instances().size(); i++) {
            SimReport in = r.instances().get(i);
            line(
                    b,
                    "instance " + i,
                    in.requestsFinished() + " finished, prefix hit rate " + pct(in.prefixHitRate()) + ", TTFT mean "
                            + f2(in.timing().ttftMsMean()) + " ms, recomputed "
                            + in.timing().recomputedTokens());
        }
        return b.toString();
    }

    /** How a flag names a choice: {@code LEAST_COMPUTED} is {@code least-computed}. */
    private static String flagValue(Enum<?> choice) {
        return choice.name().toLowerCase(Locale.ROOT).replace('_', '-');
    }

    private static String onOff(boolean on) {
        return on ? "on" : "off";
    }

    private static void line(StringBuilder b, String k, String v) {
        b.append(String.format(Locale.ROOT, "  %-22s %s%n", k, v));
    }

    private static String f2(double v) {
        return String.format(Locale.ROOT, "%.2f", v);
    }

    private static double hitRate(TierStats s) {
        return s.hits() + s.misses() == 0 ? 0 : (double) s.hits() / (s.hits() + s.misses());
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
            g.writeNumberField("blocks", c.spec().numBlocks());
            g.writeNumberField("block_size", c.spec().blockSize());
            g.writeBooleanField("prefix_caching", c.cache().prefixCaching());
            g.writeStringField("preemption", c.scheduler().preemption().name().toLowerCase(Locale.ROOT));
            g.writeStringField("victim", flagValue(c.scheduler().victimPolicy()));
            figures(g, r);
            if (!r.instances().isEmpty()) {
                g.writeArrayFieldStart("instances");
                for (SimReport in : r.instances()) {
                    g.writeStartObject();
                    figures(g, in);
                    g.writeEndObject();
                }
                g.writeEndArray();
            }
            g.writeEndObject();
        }
        return w + System.lineSeparator();
    }

    private static void figures(JsonGenerator g, SimReport r) throws IOException {
        g.writeNumberField("requests_total", r.requestsTotal());
        g.writeNumberField("requests_not_arrived", r.requestsNotArrived());
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
        SimReport.Timing t = r.timing();
        g.writeNumberField("simulated_seconds", t.simulatedSeconds());
        g.writeNumberField("ttft_ms_mean", t.ttftMsMean());
        g.writeNumberField("ttft_ms_p50", t.ttftMsP50());
        g.writeNumberField("ttft_ms_p99", t.ttftMsP99());
        g.writeNumberField("output_tokens_per_s", t.outputTokensPerSecond());
        g.writeNumberField("recomputed_tokens", t.recomputedTokens());
        g.writeObjectFieldStart("tiers");
        for (TierStats s : r.tiers()) {
            g.writeObjectFieldStart(s.tier());
            g.writeNumberField("hits", s.hits());
            g.writeNumberField("misses", s.misses());
            g.writeNumberField("hit_rate", hitRate(s));
            g.writeNumberField("bytes_in", s.bytesIn());
            g.writeNumberField("bytes_out", s.bytesOut());
            g.writeNumberField("dropped", s.dropped());
            g.writeNumberField("failed", s.failed());
            g.writeNumberField("corrupt", s.corrupt());
            g.writeNumberField("evicted", s.evicted());
            g.writeEndObject();
        }
        g.writeEndObject();
    }
}
