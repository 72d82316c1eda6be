package io.gpumem.metrics;

import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tag;
import io.micrometer.core.instrument.Tags;
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

    /** Registers a gauge of one figure, tagged with the binder's tags and {@code extra}. */
    void gauge(
            MeterRegistry registry,
            String name,
            Tags extra,
            String baseUnit,
            ToDoubleFunction<S> figure,
            String description) {
        Gauge.builder(name, this, m -> m.read(figure))
                .tags(tags.and(extra))
                .baseUnit(baseUnit)
                .description(description)
                .strongReference(true)
                .register(registry);
    }

    /** Registers a function counter of one cumulative figure, tagged with the binder's tags and {@code extra}. */
    void counter(MeterRegistry registry, String name, Tags extra, ToDoubleFunction<S> figure, String description) {
        FunctionCounter.builder(name, this, m -> m.read(figure))
                .tags(tags.and(extra))
                .description(description)
                .register(registry);
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
