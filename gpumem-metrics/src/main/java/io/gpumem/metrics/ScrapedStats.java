package io.gpumem.metrics;

import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tag;
import io.micrometer.core.instrument.Tags;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.Set;
import java.util.function.Supplier;
import java.util.function.ToDoubleFunction;

/**
 * The meters of one binder over one stats snapshot type {@code S}: every meter reads its figure from the same
 * snapshot, which is taken from the supplier at scrape time and kept for {@link #REUSE_NANOS}, so one scrape costs
 * one stats read however many meters it reads. A supplier that has nothing yet (returns null) reads as NaN.
 *
 * <p>The meters hold this object strongly, so binding it and dropping the binder is safe. Reads are synchronized:
 * scrapes from several threads share one snapshot.
 */
final class ScrapedStats<S> {
    /** How long one snapshot serves the meters of a scrape. */
    static final long REUSE_NANOS = 100_000_000L;

    private final Supplier<S> stats;
    private final Tags tags;
    private S last;
    private long lastRead;

    /**
     * @param stats where a scrape reads the snapshot (must be callable from the scraping thread)
     * @param tags  tags of every meter
     */
    ScrapedStats(Supplier<S> stats, Iterable<Tag> tags) {
        this.stats = stats;
        this.tags = Tags.of(tags);
    }

    /** Registers a gauge of one figure, tagged with the binder's tags and {@code extra}; returns the registry's meter. */
    Gauge gauge(
            MeterRegistry registry,
            String name,
            Tags extra,
            String baseUnit,
            ToDoubleFunction<S> figure,
            String description) {
        return Gauge.builder(name, this, m -> m.read(figure))
                .tags(tags.and(extra))
                .baseUnit(baseUnit)
                .description(description)
                .strongReference(true)
                .register(registry);
    }

    /**
     * Registers a binder's first meter ({@code register}), refusing a registry that holds that meter already: Micrometer
     * would hand back the one it has and drop this binder's figures without a word (another allocator of the same
     * device, another KV manager, bound with the same tags). Asked of the registry, not of the tags given: its own
     * filters, common tags among them, change a meter's id, and one that it denies is no clash.
     *
     * @throws IllegalStateException with {@code refusal} when the registry had the meter
     */
    static void refuseIfBound(MeterRegistry registry, Supplier<Meter> register, Supplier<String> refusal) {
        Set<Meter> before = Collections.newSetFromMap(new IdentityHashMap<>());
        before.addAll(registry.getMeters());
        if (before.contains(register.get())) {
            throw new IllegalStateException(refusal.get());
        }
    }

    /** Registers a function counter of one cumulative figure, tagged with the binder's tags and {@code extra}. */
    void counter(MeterRegistry registry, String name, Tags extra, ToDoubleFunction<S> figure, String description) {
        Rising rising = new Rising();
        FunctionCounter.builder(name, this, m -> m.readRising(figure, rising))
                .tags(tags.and(extra))
                .description(description)
                .register(registry);
    }

    /**
     * A counter's figure as exported: the source's own count can be reset ({@code reset_accumulated_memory_stats}
     * sets an allocator's device-call and OOM counts back to 0), a counter never falls, so a drop starts adding on
     * top of the count reached. (A reset followed by more events than it erased before the next scrape is read as
     * no reset: the counter then stays below the true total, but still never falls.)
     */
    private static final class Rising {
        double last;
        double base;
    }

    private synchronized double readRising(ToDoubleFunction<S> figure, Rising r) {
        double v = read(figure);
        if (Double.isNaN(v)) {
            return v;
        }
        if (v < r.last) {
            r.base += r.last;
        }
        r.last = v;
        return r.base + v;
    }

    private synchronized double read(ToDoubleFunction<S> figure) {
        long now = System.nanoTime();
        if (last == null || now - lastRead > REUSE_NANOS) {
            last = stats.get();
            lastRead = now;
        }
        return last == null ? Double.NaN : figure.applyAsDouble(last);
    }
}
