package io.gpumem.cli.kv;

import io.gpumem.alloc.CachingAllocator;
import io.gpumem.kvcache.manager.KvCacheManager;
import io.gpumem.kvcache.manager.KvCacheStats;
import io.gpumem.kvcache.sim.SimObserver;
import io.gpumem.metrics.AllocatorMetrics;
import io.gpumem.metrics.KvCacheMetrics;
import io.gpumem.metrics.PrometheusEndpoint;
import io.gpumem.stats.MemoryStats;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Tags;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicReferenceArray;

/**
 * {@code kv-sim --metrics-port N}: serves the run's live figures for Prometheus while it simulates. The
 * simulator thread publishes, per serving instance, a snapshot of the KV manager's stats (and of its
 * allocator's {@code memory_stats()}) at most every {@link #PUBLISH_NANOS} and at the end; scrapes read the
 * latest snapshots, never the (single-threaded) managers or allocators themselves. Meters carry a tag
 * {@code instance}; besides the binders' meters: {@code gpumem.kv.sim.steps} and {@code gpumem.kv.sim.running}
 * (1 while simulating, 0 after).
 */
final class KvSimMetrics implements SimObserver, AutoCloseable {
    /** Most often a snapshot is published. */
    static final long PUBLISH_NANOS = 50_000_000L;

    private static final int MAX_INSTANCES = 1024;

    private final PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
    private final PrometheusEndpoint endpoint;
    private final List<CachingAllocator> allocators;
    private final List<KvCacheManager> managers = new ArrayList<>();
    private final AtomicReferenceArray<KvCacheStats> kv = new AtomicReferenceArray<>(MAX_INSTANCES);
    private final AtomicReferenceArray<MemoryStats> allocatorStats = new AtomicReferenceArray<>(MAX_INSTANCES);
    private volatile long steps;
    private volatile boolean running = true;
    private long lastPublish;

    private KvSimMetrics(int port, List<CachingAllocator> allocators) throws IOException {
        this.allocators = allocators;
        Gauge.builder("gpumem.kv.sim.steps", this, m -> m.steps)
                .description("Simulated steps so far")
                .strongReference(true)
                .register(registry);
        Gauge.builder("gpumem.kv.sim.running", this, m -> m.running ? 1 : 0)
                .description("1 while the simulation runs, 0 once it has finished")
                .strongReference(true)
                .register(registry);
        this.endpoint = PrometheusEndpoint.start(registry, port);
    }

    /**
     * Starts the endpoint on 127.0.0.1:{@code port}.
     *
     * @param allocators the allocators the instances' KV memory comes from, instance order, filled as the run
     *                   creates them (empty for direct device memory)
     */
    static KvSimMetrics start(int port, List<CachingAllocator> allocators) throws IOException {
        return new KvSimMetrics(port, allocators);
    }

    String url() {
        return endpoint.url();
    }

    @Override
    public void started(int instance, KvCacheManager manager) {
        if (instance >= MAX_INSTANCES) {
            return;
        }
        managers.add(manager);
        Tags tags = Tags.of("instance", Integer.toString(instance));
        new KvCacheMetrics(() -> kv.get(instance), tags).bindTo(registry);
        if (instance < allocators.size()) {
            new AllocatorMetrics(() -> allocatorStats.get(instance), tags.and("device", "0")).bindTo(registry);
        }
        publish(instance);
    }

    @Override
    public void stepped(long step) {
        long now = System.nanoTime();
        if (now - lastPublish >= PUBLISH_NANOS) {
            publishAll(step + 1);
        }
    }

    @Override
    public void finished(long stepCount) {
        publishAll(stepCount);
        running = false;
    }

    private void publishAll(long stepCount) {
        for (int i = 0; i < managers.size(); i++) {
            publish(i);
        }
        steps = stepCount;
        lastPublish = System.nanoTime();
    }

    private void publish(int instance) {
        kv.set(instance, managers.get(instance).stats());
        if (instance < allocators.size()) {
            allocatorStats.set(instance, allocators.get(instance).stats());
        }
    }

    @Override
    public void close() {
        endpoint.close();
        registry.close();
    }
}
