package io.gpumem.alloc;

import io.gpumem.device.SimulatedDevice;
import org.jetbrains.lincheck.datastructures.ModelCheckingOptions;
import org.jetbrains.lincheck.datastructures.Operation;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Model-checks the {@link CachingAllocator} facade with Lincheck: concurrent malloc (a small and a large size),
 * free of blocks allocated up front, emptyCache and the byte counters must be linearizable against the same
 * allocator driven by one thread. The simulated device hands out addresses deterministically, so the pointer a
 * malloc returns, the counters, and whether a free is refused (a block freed twice) are all functions of the order
 * of operations: any interleaving inside the facade's critical sections shows up as a result no sequential order
 * gives.
 *
 * <p>Frees take blocks allocated in the constructor, not blocks from concurrent mallocs: a "free what malloc gave
 * me" operation would have to hand a pointer between two facade calls, which is not one linearizable step.
 */
@Tag("lincheck")
public class CachingAllocatorLincheckTest {
    private static final long SMALL = 512;
    private static final long LARGE = 3L << 20;

    private final CachingAllocator allocator =
            new CachingAllocator(SimulatedDevice.builder().capacity(64L << 20).build());
    private final long smallBlock = allocator.malloc(SMALL, 0);
    private final long largeBlock = allocator.malloc(LARGE, 0);

    @Operation
    public long mallocSmall() {
        return allocator.malloc(SMALL, 0);
    }

    @Operation
    public long mallocLarge() {
        return allocator.malloc(LARGE, 0);
    }

    /** Frees the small block allocated up front; the second such free is refused (IllegalArgumentException). */
    @Operation
    public void freeSmall() {
        allocator.free(smallBlock);
    }

    @Operation
    public void freeLarge() {
        allocator.free(largeBlock);
    }

    @Operation
    public void emptyCache() {
        allocator.emptyCache();
    }

    @Operation
    public long reservedBytes() {
        return allocator.reservedBytes();
    }

    @Operation
    public long allocatedBytes() {
        return allocator.allocatedBytes();
    }

    @Test
    void theFacadeIsLinearizableUnderModelChecking() {
        long start = System.nanoTime();
        new ModelCheckingOptions()
                .threads(2)
                .actorsPerThread(2)
                .actorsBefore(0)
                .actorsAfter(1)
                .iterations(12)
                .invocationsPerIteration(150)
                .check(CachingAllocatorLincheckTest.class);
        System.out.printf("CachingAllocator model check: 2 threads x 2 ops, 12 scenarios x 150 interleavings, %.1f s%n",
                (System.nanoTime() - start) / 1e9);
    }
}
