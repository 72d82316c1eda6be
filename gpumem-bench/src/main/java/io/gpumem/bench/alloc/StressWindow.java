package io.gpumem.bench.alloc;

import io.gpumem.alloc.GpuAllocator;
import java.util.SplittableRandom;

/**
 * The stress mix of the allocator benchmarks: a window of {@value #WINDOW} live allocations; each pair frees the
 * oldest and allocates the next of {@value #SIZES} sizes drawn once (seed 42) from a fixed mixed distribution (60%
 * small tensors up to 1 MiB, 30% of 1–12 MiB, 10% of 12–100 MiB; one request in four on a second stream). With
 * uniformly random sizes nearly every malloc splits a cached block and nearly every free merges one back: a
 * fragmentation stress, kinder workloads are {@link StreamLoop}s of real request streams.
 */
final class StressWindow {
    static final int WINDOW = 64;
    static final int SIZES = 1 << 14;
    private static final long MiB = 1L << 20;

    /** Request sizes, used in a cycle. */
    final long[] sizes = new long[SIZES];
    /** The stream of each request: 0 or the second stream. */
    final long[] streams = new long[SIZES];

    private final long[] live = new long[WINDOW];
    private int next;
    private int slot;

    /** The mix, its second stream {@code otherStream} (a stream the allocator's device created). */
    StressWindow(long otherStream) {
        SplittableRandom rnd = new SplittableRandom(42);
        for (int i = 0; i < SIZES; i++) {
            int kind = rnd.nextInt(100);
            sizes[i] = kind < 60
                    ? 1 + rnd.nextLong(MiB)
                    : kind < 90 ? MiB + rnd.nextLong(11 * MiB) : 12 * MiB + rnd.nextLong(88 * MiB);
            streams[i] = rnd.nextInt(4) == 0 ? otherStream : 0;
        }
    }

    /** One pair on {@code allocator}: frees the window's oldest allocation (once the window is full), allocates. */
    long pair(GpuAllocator allocator) {
        int s = slot;
        long old = live[s];
        if (old != 0) {
            allocator.free(old);
        }
        int i = next;
        long p = allocator.malloc(sizes[i], streams[i]);
        live[s] = p;
        next = (i + 1) & (SIZES - 1);
        slot = (s + 1) & (WINDOW - 1);
        return p;
    }

    /** Runs {@code pairs} pairs: a warm-up that fills the allocator's cache. */
    void warm(GpuAllocator allocator, int pairs) {
        for (int i = 0; i < pairs; i++) {
            pair(allocator);
        }
    }
}
