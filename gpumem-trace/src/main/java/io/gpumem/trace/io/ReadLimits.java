package io.gpumem.trace.io;

/**
 * Size limits a reader enforces before and while reading, so that a huge or hostile file fails with a
 * clear message instead of exhausting memory.
 *
 * @param maxFileBytes largest file accepted (checked before reading)
 * @param maxEntries   largest number of trace entries (all devices) or CSV rows / script lines
 */
public record ReadLimits(long maxFileBytes, long maxEntries) {

    /** 1 GiB files, 50 million entries: far above any public snapshot (the largest dev trace is 19,342). */
    public static final ReadLimits DEFAULT = new ReadLimits(1L << 30, 50_000_000L);

    public ReadLimits {
        if (maxFileBytes <= 0 || maxEntries <= 0) {
            throw new IllegalArgumentException("limits must be positive");
        }
    }
}
