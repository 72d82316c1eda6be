package io.gpumem.testing;

import io.gpumem.alloc.CachingAllocator;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.function.LongConsumer;

/**
 * The seeded random workload that the fault-injection tests drive an allocator with, on any device: mallocs of
 * small and large sizes on random streams, frees, {@code recordStream}, stream completion and {@code empty_cache}.
 * It tracks what the caller holds, so a test can compare the allocator's stats with it after each step.
 *
 * <p>Invariant: {@link #live()} holds exactly the pointers malloc returned and free has not been called on; a
 * pointer leaves it before {@code free} runs, since the caller's pointer is gone even if the driver then fails.
 * Driver errors propagate from {@link #step} to the test, which checks them.
 */
public final class RandomAllocatorOps {
    private final CachingAllocator allocator;
    private final long[] streams;
    private final LongConsumer completeStream;
    private final List<Long> live = new ArrayList<>();
    private final Map<Long, Long> blockSizes = new HashMap<>();

    /** @param completeStream completes the work queued on a stream (the device's own way) */
    public RandomAllocatorOps(CachingAllocator allocator, long[] streams, LongConsumer completeStream) {
        this.allocator = allocator;
        this.streams = streams.clone();
        this.completeStream = completeStream;
    }

    /** One random operation. */
    public void step(SplittableRandom rnd) {
        int what = rnd.nextInt(20);
        if (what < 9 || live.isEmpty()) {
            long size = rnd.nextInt(3) == 0 ? 1 + rnd.nextInt(1 << 20) : (1L << 20) + rnd.nextInt(60 << 20);
            long p = allocator.malloc(size, streams[rnd.nextInt(streams.length)]);
            live.add(p);
            blockSizes.put(p, allocator.internals().blockSize(p));
        } else if (what < 15) {
            long p = live.remove(rnd.nextInt(live.size()));
            blockSizes.remove(p);
            allocator.free(p); // the caller's pointer is gone even if the driver then fails
        } else if (what < 17) {
            allocator.recordStream(live.get(rnd.nextInt(live.size())), streams[rnd.nextInt(streams.length)]);
        } else if (what < 18) {
            completeStream.accept(streams[rnd.nextInt(streams.length)]);
        } else {
            allocator.emptyCache();
        }
    }

    /** The pointers the caller holds. */
    public List<Long> live() {
        return live;
    }

    /** The block bytes behind {@link #live()}, as the allocator sized them. */
    public long liveBlockBytes() {
        return blockSizes.values().stream().mapToLong(Long::longValue).sum();
    }
}
