package io.gpumem.metrics;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.alloc.CachingAllocator;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.kvcache.manager.KvCacheManager;
import io.gpumem.kvcache.manager.KvCacheStats;
import io.gpumem.kvcache.manager.PreemptionMode;
import io.gpumem.kvcache.memory.KvMemory;
import io.gpumem.kvcache.sim.ServingSimulator;
import io.gpumem.kvcache.sim.SimConfig;
import io.gpumem.kvcache.sim.SimObserver;
import io.gpumem.kvcache.sim.SimReport;
import io.gpumem.kvcache.sim.TierSettings;
import io.gpumem.kvcache.sim.TimeModel;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.config.MeterFilter;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The binders' figures against the objects they watch, served and scraped over HTTP on 127.0.0.1. */
class MetricsTest {
    static final long MIB = 1L << 20;

    static HttpResponse<String> get(String url) throws Exception {
        HttpClient client = HttpClient.newHttpClient();
        return client.send(HttpRequest.newBuilder(URI.create(url)).GET().build(), HttpResponse.BodyHandlers.ofString());
    }

    @Test
    void allocatorGaugesAndCountersFollowMemoryStats() throws Exception {
        SimulatedDevice device =
                SimulatedDevice.builder().capacity(100 * MIB).index(3).build();
        CachingAllocator a = new CachingAllocator(device, AllocatorConfig.defaults());
        PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
        AllocatorMetrics.of(a).bindTo(registry);
        long x = a.malloc(30 * MIB, 0);
        long y = a.malloc(1000, 0);
        a.free(x);
        try {
            a.malloc(99 * MIB, 0); // the 2 MiB small segment stays: 98 MiB is all the device can give
        } catch (io.gpumem.oom.OutOfMemoryException expected) {
            // counted as an OOM and a retry
        }
        Thread.sleep(ScrapedStats.REUSE_NANOS / 1_000_000 + 20);
        Map<String, Long> stats = a.stats().toPyTorchMap();
        assertThat(stats.get("num_ooms")).as("the set-up ran out of memory").isEqualTo(1L);
        try (PrometheusEndpoint endpoint = PrometheusEndpoint.start(registry, 0)) {
            HttpResponse<String> r = get(endpoint.url());
            assertThat(r.statusCode()).isEqualTo(200);
            assertThat(r.headers().firstValue("Content-Type")).contains(PrometheusEndpoint.CONTENT_TYPE);
            Map<String, String> s = Exposition.parse(r.body());
            assertThat(s)
                    .containsEntry("#TYPE gpumem_allocator_reserved_bytes", "gauge")
                    .containsEntry("#TYPE gpumem_allocator_ooms_total", "counter");
            for (String pool : new String[] {"all", "small_pool", "large_pool"}) {
                assertThat(Exposition.value(
                                s, "gpumem_allocator_allocated_bytes", "pool=\"" + pool + "\"", "device=\"3\""))
                        .isEqualTo((double) stats.get("allocated_bytes." + pool + ".current"));
                assertThat(Exposition.value(s, "gpumem_allocator_reserved_bytes", "pool=\"" + pool + "\""))
                        .isEqualTo((double) stats.get("reserved_bytes." + pool + ".current"));
                assertThat(Exposition.value(s, "gpumem_allocator_inactive_split_bytes", "pool=\"" + pool + "\""))
                        .isEqualTo((double) stats.get("inactive_split_bytes." + pool + ".current"));
            }
            assertThat(Exposition.value(s, "gpumem_allocator_ooms_total")).isEqualTo(1.0);
            assertThat(Exposition.value(s, "gpumem_allocator_retries_total"))
                    .isEqualTo((double) stats.get("num_alloc_retries"));
            assertThat(Exposition.value(s, "gpumem_allocator_device_allocs_total"))
                    .isEqualTo((double) stats.get("num_device_alloc"));
            assertThat(Exposition.value(s, "gpumem_allocator_device_frees_total"))
                    .isEqualTo((double) stats.get("num_device_free"));
            assertThat(Exposition.value(s, "gpumem_allocator_allocated_bytes", "pool=\"small_pool\""))
                    .isEqualTo(1024.0);
            assertThat(get(endpoint.url().replace("/metrics", "/other")).statusCode())
                    .isEqualTo(404);
        }
        a.free(y);
    }

    /**
     * reset_accumulated_memory_stats sets the allocator's device-call and OOM counts back to 0; the exported counters
     * never fall (they fell to 0: a counter that goes down breaks what reads it as one).
     */
    @Test
    void countersNeverFallWhenTheAllocatorResetsItsCounts() throws Exception {
        CachingAllocator a = new CachingAllocator(
                SimulatedDevice.builder().capacity(100 * MIB).build(), AllocatorConfig.defaults());
        PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
        AllocatorMetrics.of(a).bindTo(registry);
        a.free(a.malloc(30 * MIB, 0));
        a.emptyCache();
        assertThat(allocsExported(registry)).isEqualTo(1.0);
        a.resetAccumulatedStats();
        assertThat(a.stats().numDeviceAlloc()).isZero();
        assertThat(allocsExported(registry)).isEqualTo(1.0);
        a.free(a.malloc(30 * MIB, 0));
        a.free(a.malloc(70 * MIB, 0));
        assertThat(allocsExported(registry))
                .as("the reset's count, then the new ones")
                .isEqualTo(1.0 + 2.0);
    }

    private static double allocsExported(PrometheusMeterRegistry registry) throws InterruptedException {
        Thread.sleep(ScrapedStats.REUSE_NANOS / 1_000_000 + 20);
        return Exposition.value(Exposition.parse(registry.scrape()), "gpumem_allocator_device_allocs_total");
    }

    /** Two allocators of one device in one registry: told apart by tags of their own, else refused (one was dropped). */
    @Test
    void twoAllocatorsOfOneDeviceNeedTagsOfTheirOwn() {
        SimulatedDevice device = SimulatedDevice.builder().capacity(200 * MIB).build();
        CachingAllocator a = new CachingAllocator(device, AllocatorConfig.defaults());
        CachingAllocator b = new CachingAllocator(device, AllocatorConfig.defaults());
        PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
        AllocatorMetrics.of(a).bindTo(registry);
        assertThatThrownBy(() -> AllocatorMetrics.of(b).bindTo(registry))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("tags of its own");
        AllocatorMetrics.of(b, Tags.of("allocator", "kv")).bindTo(registry);
        // bound the other way round, the untagged one is no clash with the tagged one
        PrometheusMeterRegistry second = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
        AllocatorMetrics.of(b, Tags.of("allocator", "kv")).bindTo(second);
        AllocatorMetrics.of(a).bindTo(second);
        a.malloc(10 * MIB, 0);
        b.malloc(40 * MIB, 0);
        long series = registry.scrape()
                .lines()
                .filter(l -> l.startsWith("gpumem_allocator_allocated_bytes{") && l.contains("pool=\"all\""))
                .count();
        assertThat(series).isEqualTo(2);
    }

    /**
     * A registry's own filters (common tags, as most deployments set) add to every meter's id: the check for a second
     * binder with the same tags must see past them (it compared the tags as given and let the second bind through,
     * its figures dropped), and a registry that denies the meters must not read as holding them already.
     */
    @Test
    void aSecondBinderWithTheSameTagsIsRefusedUnderCommonTagsToo() {
        SimulatedDevice device = SimulatedDevice.builder().capacity(200 * MIB).build();
        CachingAllocator a = new CachingAllocator(device, AllocatorConfig.defaults());
        CachingAllocator b = new CachingAllocator(device, AllocatorConfig.defaults());
        PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
        registry.config().commonTags("application", "trainer");
        AllocatorMetrics.of(a).bindTo(registry);
        assertThatThrownBy(() -> AllocatorMetrics.of(b).bindTo(registry))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("tags of its own");
        AllocatorMetrics.of(b, Tags.of("allocator", "kv")).bindTo(registry);

        PrometheusMeterRegistry denying = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
        denying.config().meterFilter(MeterFilter.denyNameStartsWith("gpumem."));
        AllocatorMetrics.of(a).bindTo(denying);
        new KvCacheMetrics(() -> null, Tags.empty()).bindTo(denying);
        assertThat(denying.getMeters()).isEmpty();
    }

    /**
     * A port in use is an error naming the address (it said "Address already in use" and nothing more), and a closed
     * endpoint gives its port back at once: a new one starts on it.
     */
    @Test
    void aPortInUseIsNamedAndClosingReleasesThePort() throws Exception {
        PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
        PrometheusEndpoint first = PrometheusEndpoint.start(registry, 0);
        int port = first.port();
        try {
            assertThatThrownBy(() -> PrometheusEndpoint.start(registry, port))
                    .isInstanceOf(java.net.BindException.class)
                    .hasMessageContaining("127.0.0.1:" + port);
        } finally {
            first.close();
        }
        try (PrometheusEndpoint again = PrometheusEndpoint.start(registry, port)) {
            assertThat(get(again.url()).statusCode()).isEqualTo(200);
        }
    }

    /**
     * A scrape that cannot be made (a binder's stats supplier throws) is answered 500 with the reason: the connection
     * used to close with no answer at all, which Prometheus records as a scrape error without a cause.
     */
    @Test
    void aScrapeThatThrowsIsAnsweredWithItsReason() throws Exception {
        PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
        new AllocatorMetrics(
                        () -> {
                            throw new IllegalStateException("the stats are gone");
                        },
                        Tags.of("device", "0"))
                .bindTo(registry);
        try (PrometheusEndpoint endpoint = PrometheusEndpoint.start(registry, 0)) {
            HttpResponse<String> r = get(endpoint.url());
            assertThat(r.statusCode()).isEqualTo(500);
            assertThat(r.body()).contains("the stats are gone");
        }
    }

    /** The KV binder as the allocator's: a second manager's meters with the same tags are refused, not dropped. */
    @Test
    void aSecondKvBinderNeedsTagsOfItsOwn() {
        KvCacheStats[] first = new KvCacheStats[1];
        PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
        new KvCacheMetrics(() -> first[0], Tags.of("model", "llama")).bindTo(registry);
        assertThatThrownBy(() -> new KvCacheMetrics(() -> null, Tags.of("model", "llama")).bindTo(registry))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("tags of its own");
        new KvCacheMetrics(() -> null, Tags.of("model", "mistral")).bindTo(registry);
        assertThat(registry.find("gpumem.kv.usage").gauges()).hasSize(4);
    }

    @Test
    void kvMetricsServedDuringASimulationMatchItsReport() throws Exception {
        SimConfig config = SimConfig.builder()
                .requests(150)
                .blocks(200)
                .seed(5)
                .preemption(PreemptionMode.SWAP)
                .build();
        SimulatedDevice device = SimulatedDevice.builder()
                .capacity(ServingSimulator.deviceBytes(config) + 64 * MIB)
                .backed(true)
                .build();
        PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
        KvCacheStats[] published = new KvCacheStats[1];
        new KvCacheMetrics(() -> published[0], Tags.of("instance", "test")).bindTo(registry);
        KvCacheManager[] manager = new KvCacheManager[1];
        SimReport report = ServingSimulator.run(
                config, TierSettings.NONE, TimeModel.defaults(), 1, i -> KvMemory.direct(device), new SimObserver() {
                    @Override
                    public void started(int instance, KvCacheManager m) {
                        manager[0] = m;
                    }

                    @Override
                    public void finished(long steps) {
                        published[0] = manager[0].stats();
                    }
                });
        assertThat(report.preemptions()).as("the set-up preempts").isPositive();
        try (PrometheusEndpoint endpoint = PrometheusEndpoint.start(registry, 0)) {
            assertThat(endpoint.url()).startsWith("http://127.0.0.1:");
            Map<String, String> s = Exposition.parse(get(endpoint.url()).body());
            KvCacheStats k = published[0];
            assertThat(s).containsEntry("#TYPE gpumem_kv_preemptions_total", "counter");
            assertThat(Exposition.value(s, "gpumem_kv_preemptions_total", "mode=\"recompute\"", "instance=\"test\""))
                    .isEqualTo((double) report.recomputePreemptions());
            assertThat(Exposition.value(s, "gpumem_kv_preemptions_total", "mode=\"swap\""))
                    .isEqualTo((double) report.swapPreemptions());
            assertThat(Exposition.value(s, "gpumem_kv_prefix_hit_rate", "window=\"lifetime\""))
                    .isEqualTo(report.prefixHitRate());
            assertThat(Exposition.value(s, "gpumem_kv_usage", "cached=\"excluded\""))
                    .isEqualTo(k.usage());
            assertThat(Exposition.value(s, "gpumem_kv_swap_fallbacks_total")).isEqualTo((double) k.swapFallbacks());
            assertThat(Exposition.value(s, "gpumem_kv_requests", "state=\"live\""))
                    .isEqualTo(k.liveRequests());
        }
    }
}
