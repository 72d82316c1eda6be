package io.gpumem.metrics;

import io.gpumem.alloc.GpuAllocator;
import io.gpumem.stats.MemoryStats;
import io.gpumem.stats.StatKind;
import io.gpumem.stats.StatType;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tag;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.binder.BaseUnits;
import io.micrometer.core.instrument.binder.MeterBinder;
import java.util.function.Supplier;
import java.util.function.ToLongFunction;

/**
 * Micrometer meters for an allocator, read from its {@link MemoryStats} (the figures every allocation policy
 * reports, so the same binder serves the PyTorch-exact allocator and any other policy):
 *
 * <ul>
 *   <li>gauges {@code gpumem.allocator.allocated}, {@code .reserved}, {@code .active}, {@code .inactive.split}
 *       and {@code .requested} (bytes), tagged {@code pool} = {@code all}, {@code small_pool}, {@code large_pool};</li>
 *   <li>function counters {@code gpumem.allocator.device.allocs} / {@code .device.frees} (driver allocations
 *       and frees, maps and unmaps included), {@code gpumem.allocator.retries} and {@code gpumem.allocator.ooms}.</li>
 * </ul>
 *
 * <p>Reads happen at scrape time only; one stats read serves every meter of a scrape (the snapshot is kept for
 * {@link ScrapedStats#REUSE_NANOS}). The registry holds the meters strongly (through its gauges), so binding and dropping it
 * is safe. The stats supplier must be callable from the scraping thread: {@link GpuAllocator#stats()} is (its
 * implementations are safe for concurrent use); a simulation that runs on one thread can instead hand over the
 * stats it publishes (as {@code kv-sim --metrics-port} does).
 */
public final class AllocatorMetrics implements MeterBinder {
    private final ScrapedStats<MemoryStats> meters;
    private final Tags tags;

    /**
     * @param stats the allocator's {@link GpuAllocator#stats()}, or the last value published (null: none yet)
     * @param tags  tags for every meter (e.g. {@code device}, {@code policy})
     */
    public AllocatorMetrics(Supplier<MemoryStats> stats, Iterable<Tag> tags) {
        this.meters = new ScrapedStats<>(stats, tags);
        this.tags = Tags.of(tags);
    }

    /**
     * Meters for one allocator of any policy ({@link GpuAllocator#stats()}, safe for concurrent use), tagged with
     * its device index.
     */
    public static AllocatorMetrics of(GpuAllocator allocator) {
        return of(allocator, Tags.empty());
    }

    /**
     * {@link #of(GpuAllocator)} with {@code extra} tags beside the device index: what tells apart two allocators of one
     * device in one registry (say {@code Tags.of("allocator", "kv")}).
     */
    public static AllocatorMetrics of(GpuAllocator allocator, Tags extra) {
        return new AllocatorMetrics(
                allocator::stats,
                Tags.of("device", Integer.toString(allocator.device().index())).and(extra));
    }

    /**
     * @throws IllegalStateException when the registry has this binder's meters already, with the same tags (another
     *     allocator of the same device): Micrometer would hand back the first one's meters and drop this one's figures
     *     without a word
     */
    @Override
    public void bindTo(MeterRegistry registry) {
        // the first gauge (the loop below leaves it out: a meter registered twice is logged as a warning)
        ScrapedStats.refuseIfBound(
                registry,
                () -> gauge(
                        registry,
                        "gpumem.allocator.allocated",
                        StatKind.ALLOCATED_BYTES,
                        StatType.ALL,
                        "Bytes in allocated blocks"),
                () -> "the registry has allocator meters tagged " + tags
                        + " already (another allocator of the same device?): bind each with tags of its own,"
                        + " AllocatorMetrics.of(allocator, Tags.of(\"allocator\", name))");
        for (StatType pool : StatType.values()) {
            if (pool != StatType.ALL) {
                gauge(
                        registry,
                        "gpumem.allocator.allocated",
                        StatKind.ALLOCATED_BYTES,
                        pool,
                        "Bytes in allocated blocks");
            }
            gauge(
                    registry,
                    "gpumem.allocator.reserved",
                    StatKind.RESERVED_BYTES,
                    pool,
                    "Bytes in segments held from the device");
            gauge(
                    registry,
                    "gpumem.allocator.active",
                    StatKind.ACTIVE_BYTES,
                    pool,
                    "Bytes in allocated blocks and blocks waiting on stream events");
            gauge(
                    registry,
                    "gpumem.allocator.inactive.split",
                    StatKind.INACTIVE_SPLIT_BYTES,
                    pool,
                    "Free bytes in segments that also hold an active block (cannot be released)");
            gauge(
                    registry,
                    "gpumem.allocator.requested",
                    StatKind.REQUESTED_BYTES,
                    pool,
                    "Bytes callers asked for, unrounded");
        }
        counter(
                registry,
                "gpumem.allocator.device.allocs",
                MemoryStats::numDeviceAlloc,
                "Device allocations (cudaMalloc, map)");
        counter(
                registry,
                "gpumem.allocator.device.frees",
                MemoryStats::numDeviceFree,
                "Device frees (cudaFree, unmap)");
        counter(
                registry,
                "gpumem.allocator.retries",
                MemoryStats::numAllocRetries,
                "Allocations that freed the cache and retried");
        counter(registry, "gpumem.allocator.ooms", MemoryStats::numOoms, "Out-of-memory errors");
    }

    private Gauge gauge(MeterRegistry registry, String name, StatKind kind, StatType pool, String description) {
        return meters.gauge(
                registry,
                name,
                Tags.of("pool", pool.key()),
                BaseUnits.BYTES,
                s -> s.get(kind, pool).current(),
                description);
    }

    private void counter(MeterRegistry registry, String name, ToLongFunction<MemoryStats> figure, String description) {
        meters.counter(registry, name, Tags.empty(), figure::applyAsLong, description);
    }
}
