package io.gpumem.metrics;

import io.gpumem.kvcache.manager.KvCacheManager;
import io.gpumem.kvcache.manager.KvCacheStats;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tag;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.binder.MeterBinder;
import java.util.function.Supplier;
import java.util.function.ToDoubleFunction;

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
 * <p>One snapshot serves every meter of a scrape (kept for {@link AllocatorMetrics#REUSE_NANOS}). The manager is
 * not thread-safe, so a scrape from another thread must not call {@link KvCacheManager#stats()} while it
 * works: hand this binder a snapshot the serving thread publishes (as {@code kv-sim --metrics-port} does), or
 * {@code manager::stats} when the scrape runs on the serving thread.
 */
public final class KvCacheMetrics implements MeterBinder {
    private final Supplier<KvCacheStats> stats;
    private final Tags tags;
    private KvCacheStats last;
    private long lastRead;

    public KvCacheMetrics(Supplier<KvCacheStats> stats, Iterable<Tag> tags) {
        this.stats = stats;
        this.tags = Tags.of(tags);
    }

    @Override
    public void bindTo(MeterRegistry registry) {
        gauge(
                registry,
                "gpumem.kv.usage",
                Tags.of("cached", "excluded"),
                KvCacheStats::usage,
                "Referenced KV blocks / usable blocks (cached-idle blocks count as free)");
        gauge(
                registry,
                "gpumem.kv.usage",
                Tags.of("cached", "included"),
                KvCacheStats::usageIncludingCached,
                "KV blocks in use, cached-idle blocks counted as used");
        gauge(
                registry,
                "gpumem.kv.prefix.hit.rate",
                Tags.of("window", "recent"),
                KvCacheStats::prefixHitRateWindow,
                "Prefix-cache hit tokens / queried tokens over the recent lookups");
        gauge(
                registry,
                "gpumem.kv.prefix.hit.rate",
                Tags.of("window", "lifetime"),
                KvCacheStats::prefixHitRate,
                "Prefix-cache hit tokens / queried tokens since start");
        gauge(
                registry,
                "gpumem.kv.requests",
                Tags.of("state", "live"),
                s -> s.liveRequests(),
                "Requests holding device blocks");
        gauge(
                registry,
                "gpumem.kv.requests",
                Tags.of("state", "swapped"),
                s -> s.swappedRequests(),
                "Requests swapped out to the host");
        counter(
                registry,
                "gpumem.kv.preemptions",
                Tags.of("mode", "recompute"),
                s -> s.recomputePreemptions(),
                "Preemptions by recompute (swap fallbacks included)");
        counter(
                registry,
                "gpumem.kv.preemptions",
                Tags.of("mode", "swap"),
                s -> s.swapPreemptions(),
                "Preemptions by swap");
        counter(
                registry,
                "gpumem.kv.swap.fallbacks",
                Tags.empty(),
                s -> s.swapFallbacks(),
                "Swap preemptions turned into recompute because the swap space was full");
        counter(
                registry,
                "gpumem.kv.prefix.queried.tokens",
                Tags.empty(),
                s -> s.prefixQueriedTokens(),
                "Prompt tokens queried by prefix lookups");
        counter(
                registry,
                "gpumem.kv.prefix.hit.tokens",
                Tags.empty(),
                s -> s.prefixHitTokens(),
                "Prompt tokens found cached");
        counter(registry, "gpumem.kv.evictions", Tags.empty(), s -> s.evictions(), "Cached blocks evicted");
        counter(
                registry,
                "gpumem.kv.copy.on.write.blocks",
                Tags.empty(),
                s -> s.copyOnWriteBlocks(),
                "Blocks copied before a write into a shared block");
        counter(
                registry,
                "gpumem.kv.refused.allocations",
                Tags.empty(),
                s -> s.refusedAllocations(),
                "Slot allocations or swap-ins answered 'cannot'");
    }

    private void gauge(
            MeterRegistry registry, String name, Tags extra, ToDoubleFunction<KvCacheStats> f, String description) {
        Gauge.builder(name, this, m -> m.read(f))
                .tags(tags.and(extra))
                .description(description)
                .strongReference(true)
                .register(registry);
    }

    private void counter(
            MeterRegistry registry, String name, Tags extra, ToDoubleFunction<KvCacheStats> f, String description) {
        FunctionCounter.builder(name, this, m -> m.read(f))
                .tags(tags.and(extra))
                .description(description)
                .register(registry);
    }

    private synchronized double read(ToDoubleFunction<KvCacheStats> f) {
        long now = System.nanoTime();
        if (last == null || now - lastRead > AllocatorMetrics.REUSE_NANOS) {
            last = stats.get();
            lastRead = now;
        }
        return last == null ? Double.NaN : f.applyAsDouble(last);
    }
}
