package io.gpumem.alloc;

import io.gpumem.device.SimulatedDevice;
import io.gpumem.policy.PolicyRegistry;
import org.jetbrains.lincheck.datastructures.ModelCheckingOptions;
import org.jetbrains.lincheck.datastructures.Operation;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Model-checks the {@link GpuAllocator} facade of every registered policy with Lincheck: concurrent malloc (a small
 * and a large size), free of blocks allocated up front, emptyCache and the byte counters must be linearizable
 * against the same allocator driven by one thread. The simulated device hands out addresses deterministically, so
 * the pointer a malloc returns, the counters, and whether a free is refused (a block freed twice) are all functions
 * of the order of operations: any interleaving inside a facade's critical sections shows up as a result no
 * sequential order gives. The policies come from {@link PolicyRegistry}, so a newly registered one is checked too.
 *
 * <p>Frees take blocks allocated in the constructor, not blocks from concurrent mallocs: a "free what malloc gave
 * me" operation would have to hand a pointer between two facade calls, which is not one linearizable step.
 * Lincheck builds the state through the no-argument constructor, so the policy under test is a static set before
 * each check.
 */
@Tag("lincheck")
public class PolicyLincheckTest {
    private static final long SMALL = 512;
    private static final long LARGE = 3L << 20;
    private static volatile String policy = PolicyRegistry.EXACT;

    private final GpuAllocator allocator = ConcurrencyStressTest.create(
            policy, SimulatedDevice.builder().capacity(64L << 20).build());
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
        return allocator.stats().reservedBytes();
    }

    @Operation
    public long allocatedBytes() {
        return allocator.stats().allocatedBytes();
    }

    static Iterable<String> policies() {
        return PolicyRegistry.names();
    }

    @ParameterizedTest
    @MethodSource("policies")
    void theFacadeIsLinearizableUnderModelChecking(String name) {
        policy = name;
        long start = System.nanoTime();
        new ModelCheckingOptions()
                .threads(2)
                .actorsPerThread(2)
                .actorsBefore(0)
                .actorsAfter(1)
                .iterations(6)
                .invocationsPerIteration(100)
                .check(PolicyLincheckTest.class);
        System.out.printf(
                "%s model check: 2 threads x 2 ops, 6 scenarios x 100 interleavings, %.1f s%n",
                name, (System.nanoTime() - start) / 1e9);
    }
}
