package io.gpumem.metrics;

import io.gpumem.kvcache.manager.KvCacheManager;
import io.gpumem.kvcache.manager.KvCacheStats;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tag;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.binder.MeterBinder;
import java.util.function.Supplier;

/**
 * Micrometer meters for a KV cache manager, read from its {@link KvCacheStats} snapshot:
 *
 * <ul>
 *   <li>gauges {@code gpumem.kv.usage} (vLLM's KV usage, 0..1; tag {@code cached} = {@code excluded} or
 *       {@code included} for cached-idle blocks), {@code gpumem.kv.prefix.hit.rate} (tag {@code window} =
 *       {@code recent} or {@code lifetime}), {@code gpumem.kv.requests} (tag {@code state} = {@code live} or
 *       {@code swapped});</li>
 *   <li>function counters {@code gpumem.kv.preemptions} (tag {@code mode} = {@code recompute} or {@code swap}),
 *       {@code gpumem.kv.swap.fallbacks}, {@code gpumem.kv.prefix.queried.tokens},
 *       {@code gpumem.kv.prefix.hit.tokens}, {@code gpumem.kv.evictions}, {@code gpumem.kv.copy.on.write.blocks},
 *       {@code gpumem.kv.refused.allocations}.</li>
 * </ul>
 *
 * <p>One snapshot serves every meter of a scrape (kept for {@link ScrapedStats#REUSE_NANOS}). The manager is
 * not thread-safe, so a scrape from another thread must not call {@link KvCacheManager#stats()} while it
 * works: hand this binder a snapshot the serving thread publishes (as {@code kv-sim --metrics-port} does), or
 * {@code manager::stats} when the scrape runs on the serving thread.
 */
public final class KvCacheMetrics implements MeterBinder {
    private final ScrapedStats<KvCacheStats> meters;
    private final Tags tags;

    /**
     * @param stats the manager's stats, or the last snapshot published (null: none yet)
     * @param tags  tags for every meter (e.g. {@code instance})
     */
    public KvCacheMetrics(Supplier<KvCacheStats> stats, Iterable<Tag> tags) {
        this.meters = new ScrapedStats<>(stats, tags);
        this.tags = Tags.of(tags);
    }

    /**
     * @throws IllegalStateException when the registry has this binder's meters already, with the same tags (another
     *     manager's): Micrometer would hand back the first one's meters and drop this one's figures without a word
     */
    @Override
    public void bindTo(MeterRegistry registry) {
        ScrapedStats.refuseIfBound(
                registry,
                () -> meters.gauge(
                        registry,
                        "gpumem.kv.usage",
                        Tags.of("cached", "excluded"),
                        null,
                        KvCacheStats::usage,
                        "Referenced KV blocks / usable blocks (cached-idle blocks count as free)"),
                () -> "the registry has KV cache meters tagged " + tags
                        + " already (another KV cache manager?): bind each with tags of its own,"
                        + " new KvCacheMetrics(stats, Tags.of(\"model\", name))");
        meters.gauge(
                registry,
                "gpumem.kv.usage",
                Tags.of("cached", "included"),
                null,
                KvCacheStats::usageIncludingCached,
                "KV blocks in use, cached-idle blocks counted as used");
        meters.gauge(
                registry,
                "gpumem.kv.prefix.hit.rate",
                Tags.of("window", "recent"),
                null,
                KvCacheStats::prefixHitRateWindow,
                "Prefix-cache hit tokens / queried tokens over the recent lookups");
        meters.gauge(
                registry,
                "gpumem.kv.prefix.hit.rate",
                Tags.of("window", "lifetime"),
                null,
                KvCacheStats::prefixHitRate,
                "Prefix-cache hit tokens / queried tokens since start");
        meters.gauge(
                registry,
                "gpumem.kv.requests",
                Tags.of("state", "live"),
                null,
                s -> s.liveRequests(),
                "Requests holding device blocks");
        meters.gauge(
                registry,
                "gpumem.kv.requests",
                Tags.of("state", "swapped"),
                null,
                s -> s.swappedRequests(),
                "Requests swapped out to the host");
        meters.counter(
                registry,
                "gpumem.kv.preemptions",
                Tags.of("mode", "recompute"),
                s -> s.recomputePreemptions(),
                "Preemptions by recompute (swap fallbacks included)");
        meters.counter(
                registry,
                "gpumem.kv.preemptions",
                Tags.of("mode", "swap"),
                s -> s.swapPreemptions(),
                "Preemptions by swap");
        meters.counter(
                registry,
                "gpumem.kv.swap.fallbacks",
                Tags.empty(),
                s -> s.swapFallbacks(),
                "Swap preemptions turned into recompute because the swap space was full");
        meters.counter(
                registry,
                "gpumem.kv.prefix.queried.tokens",
                Tags.empty(),
                s -> s.prefixQueriedTokens(),
                "Prompt tokens queried by prefix lookups");
        meters.counter(
                registry,
                "gpumem.kv.prefix.hit.tokens",
                Tags.empty(),
                s -> s.prefixHitTokens(),
                "Prompt tokens found cached");
        meters.counter(registry, "gpumem.kv.evictions", Tags.empty(), s -> s.evictions(), "Cached blocks evicted");
        meters.counter(
                registry,
                "gpumem.kv.copy.on.write.blocks",
                Tags.empty(),
                s -> s.copyOnWriteBlocks(),
                "Blocks copied before a write into a shared block");
        meters.counter(
                registry,
                "gpumem.kv.refused.allocations",
                Tags.empty(),
                s -> s.refusedAllocations(),
                "Slot allocations or swap-ins answered 'cannot'");
    }
}
