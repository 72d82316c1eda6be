package io.gpumem.cli.kv;

import io.gpumem.alloc.CachingAllocator;
import io.gpumem.kvcache.manager.KvCacheManager;
import io.gpumem.kvcache.manager.KvCacheStats;
import io.gpumem.kvcache.sim.SimObserver;
import io.gpumem.metrics.AllocatorMetrics;
import io.gpumem.metrics.KvCacheMetrics;
import io.gpumem.metrics.PrometheusEndpoint;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Tags;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.io.IOException;
import java.util.Map;

/**
 * {@code kv-sim --metrics-port N}: serves the run's live figures for Prometheus while it simulates. The
 * simulator thread publishes a snapshot of the KV manager's stats (and of its allocator's
 * {@code memory_stats()}) at most every {@link #PUBLISH_NANOS} and at the end; scrapes read the latest
 * snapshot, never the (single-threaded) manager or allocator themselves. Besides the binders' meters:
 * {@code gpumem.kv.sim.steps} and {@code gpumem.kv.sim.running} (1 while simulating, 0 after).
 */
final class KvSimMetrics implements SimObserver, AutoCloseable {
    /** Most often a snapshot is published. */
    static final long PUBLISH_NANOS = 50_000_000L;

    private final PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
    private final PrometheusEndpoint endpoint;
    private final CachingAllocator allocator;
    private volatile KvCacheStats kv;
    private volatile Map<String, Long> allocatorStats;
    private volatile long steps;
    private volatile boolean running = true;
    private long lastPublish;

    private KvSimMetrics(int port, CachingAllocator allocator) throws IOException {
        this.allocator = allocator;
        new KvCacheMetrics(() -> kv, Tags.empty()).bindTo(registry);
        if (allocator != null) {
            new AllocatorMetrics(() -> allocatorStats, Tags.of("device", "0")).bindTo(registry);
            allocatorStats = allocator.memoryStats();
        }
        Gauge.builder("gpumem.kv.sim.steps", this, m -> m.steps).description("Simulated steps so far")
                .strongReference(true).register(registry);
        Gauge.builder("gpumem.kv.sim.running", this, m -> m.running ? 1 : 0)
                .description("1 while the simulation runs, 0 once it has finished").strongReference(true).register(registry);
        this.endpoint = PrometheusEndpoint.start(registry, port);
    }

    /**
     * Starts the endpoint on 127.0.0.1:{@code port}.
     *
     * @param allocator the allocator the KV memory comes from, or {@code null} (direct device memory)
     */
    static KvSimMetrics start(int port, CachingAllocator allocator) throws IOException {
        return new KvSimMetrics(port, allocator);
    }

    String url() {
        return endpoint.url();
    }

    @Override
    public void started(KvCacheManager manager) {
        publish(manager, 0);
    }

    @Override
    public void stepped(long step, KvCacheManager manager) {
        long now = System.nanoTime();
        if (now - lastPublish >= PUBLISH_NANOS) {
            publish(manager, step + 1);
        }
    }

    @Override
    public void finished(long stepCount, KvCacheManager manager) {
        publish(manager, stepCount);
        running = false;
    }

    private void publish(KvCacheManager manager, long stepCount) {
        kv = manager.stats();
        if (allocator != null) {
            allocatorStats = allocator.memoryStats();
        }
        steps = stepCount;
        lastPublish = System.nanoTime();
    }

    @Override
    public void close() {
        endpoint.close();
        registry.close();
    }
}
