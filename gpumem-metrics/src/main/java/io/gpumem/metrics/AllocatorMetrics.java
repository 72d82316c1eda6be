package io.gpumem.metrics;

import io.gpumem.alloc.GpuAllocator;
import io.gpumem.stats.MemoryStats;
import io.gpumem.stats.StatKind;
import io.gpumem.stats.StatType;
import io.micrometer.core.instrument.FunctionCounter;
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
 * <p>Reads happen at scrape time only; one stats read serves every meter of a scrape (the map is kept for
 * {@link #REUSE_NANOS}). The registry holds the binder strongly (through its gauges), so binding and dropping it
 * is safe. The stats supplier must be callable from the scraping thread: {@link GpuAllocator#stats()} is (its
 * implementations are safe for concurrent use); a simulation that runs on one thread can instead hand over the
 * stats it publishes (as {@code kv-sim --metrics-port} does).
 */
public final class AllocatorMetrics implements MeterBinder {
    /** How long one stats map serves the meters of a scrape. */
    static final long REUSE_NANOS = 100_000_000L;

    private final Supplier<MemoryStats> stats;
    private final Tags tags;
    private MemoryStats last;
    private long lastRead;

    /**
     * @param stats the allocator's {@link GpuAllocator#stats()}, or the last value published (null: none yet)
     * @param tags  tags for every meter (e.g. {@code device}, {@code policy})
     */
    public AllocatorMetrics(Supplier<MemoryStats> stats, Iterable<Tag> tags) {
        this.stats = stats;
        this.tags = Tags.of(tags);
    }

    /**
     * Meters for one allocator of any policy ({@link GpuAllocator#stats()}, safe for concurrent use), tagged with
     * its device index.
     */
    public static AllocatorMetrics of(GpuAllocator allocator) {
        return new AllocatorMetrics(
                allocator::stats,
                Tags.of("device", Integer.toString(allocator.device().index())));
    }

    @Override
    public void bindTo(MeterRegistry registry) {
        for (StatType pool : StatType.values()) {
            gauge(registry, "gpumem.allocator.allocated", StatKind.ALLOCATED_BYTES, pool, "Bytes in allocated blocks");
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

    private void gauge(MeterRegistry registry, String name, StatKind kind, StatType pool, String description) {
        Gauge.builder(name, this, m -> m.read(s -> s.get(kind, pool).current()))
                .tags(tags)
                .tag("pool", pool.key())
                .baseUnit(BaseUnits.BYTES)
                .description(description)
                .strongReference(true)
                .register(registry);
    }

    private void counter(MeterRegistry registry, String name, ToLongFunction<MemoryStats> figure, String description) {
        FunctionCounter.builder(name, this, m -> m.read(figure))
                .tags(tags)
                .description(description)
                .register(registry);
    }

    private synchronized double read(ToLongFunction<MemoryStats> figure) {
        long now = System.nanoTime();
        if (last == null || now - lastRead > REUSE_NANOS) {
            last = stats.get();
            lastRead = now;
        }
        return last == null ? Double.NaN : figure.applyAsLong(last);
    }
}
