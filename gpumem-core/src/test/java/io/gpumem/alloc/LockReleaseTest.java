package io.gpumem.alloc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.fail;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.history.BlockState;
import io.gpumem.history.HistoryOptions;
import io.gpumem.oom.OutOfMemoryException;
import io.gpumem.policy.PolicyRegistry;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Every call of an allocator's public face gives the allocator's lock back, whether it returns or throws. The
 * lock is reentrant and the other tests run each allocator on one thread, so a call that kept the lock went
 * unnoticed (PIT left every {@code unlock()} of the exact allocator's facade removable, docs/testing.md); for a
 * user it is a deadlock the first time a second thread touches the allocator. After each call, a second thread
 * must get through a call that takes the lock.
 */
class LockReleaseTest {

    /** Long enough for a loaded CI machine; a kept lock blocks the other thread forever. */
    private static final long WAIT_SECONDS = 10;

    private static final long MiB = 1L << 20;

    /** Runs {@code locking} on a new thread and fails, naming {@code after}, when it does not finish in time. */
    private static void anotherThreadGetsThrough(String after, Runnable locking) {
        CompletableFuture<Void> done = new CompletableFuture<>();
        Thread t = new Thread(() -> {
            try {
                locking.run();
                done.complete(null);
            } catch (Throwable e) {
                done.completeExceptionally(e);
            }
        });
        t.setDaemon(true); // a thread blocked on a kept lock must not keep the test JVM alive
        t.start();
        try {
            done.get(WAIT_SECONDS, TimeUnit.SECONDS);
        } catch (TimeoutException e) {
            fail("after " + after + ", another thread waited " + WAIT_SECONDS + " s for the allocator lock");
        } catch (ExecutionException e) {
            throw new AssertionError("the other thread's call failed after " + after, e.getCause());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError(e);
        }
    }

    static List<String> policies() {
        return PolicyRegistry.names();
    }

    /** The calls of {@link GpuAllocator} every policy offers, each followed by another thread's stats read. */
    @ParameterizedTest
    @MethodSource("policies")
    void everyCallOfEveryPolicyGivesTheLockBack(String policy) {
        SimulatedDevice dev = SimulatedDevice.builder().capacity(64 * MiB).build();
        GpuAllocator a = ConcurrencyStressTest.create(policy, dev);
        long side = dev.createStream();
        Runnable probe = a::stats;

        long small = a.malloc(512, 0);
        anotherThreadGetsThrough(policy + " malloc", probe);
        long large = a.malloc(3 * MiB, 0);
        a.recordStream(large, side);
        anotherThreadGetsThrough(policy + " recordStream", probe);
        a.free(small);
        anotherThreadGetsThrough(policy + " free", probe);
        assertThatThrownBy(() -> a.free(small)).isInstanceOf(IllegalArgumentException.class);
        anotherThreadGetsThrough(policy + " a refused double free", probe);
        assertThatThrownBy(() -> a.malloc(1L << 40, 0)).isInstanceOf(OutOfMemoryException.class);
        anotherThreadGetsThrough(policy + " a malloc that ran out of memory", probe);
        a.free(large);
        a.emptyCache();
        anotherThreadGetsThrough(policy + " emptyCache", probe);
        a.snapshot();
        anotherThreadGetsThrough(policy + " snapshot", probe);
        a.stats();
        anotherThreadGetsThrough(policy + " stats", probe);
        a.internals().checkInvariants();
        anotherThreadGetsThrough(policy + " checkInvariants", probe);
        a.internals().recordHistory(new HistoryOptions(HistoryOptions.Enabled.ALL, HistoryOptions.Context.NONE, 8));
        anotherThreadGetsThrough(policy + " recordHistory", probe);
        a.close();
        anotherThreadGetsThrough(policy + " close", probe);
    }

    /** The exact allocator's own calls beyond the interface: PyTorch's API and the replay hooks. */
    @Test
    void everyCallOfTheExactAllocatorGivesTheLockBack() {
        SimulatedDevice dev = SimulatedDevice.builder().capacity(1L << 30).build();
        CachingAllocator a = new CachingAllocator(dev);
        AllocatorInternals in = a.internals();
        Runnable probe = a::allocatedBytes;
        long block = a.malloc(MiB);

        for (var call : List.<Named>of(
                new Named("allocatedBytes", x -> x.allocatedBytes()),
                new Named("reservedBytes", x -> x.reservedBytes()),
                new Named(
                        "memorySummary",
                        x -> assertThat(x.memorySummary(false)).contains("PyTorch CUDA memory summary")),
                new Named("resetPeakStats", CachingAllocator::resetPeakStats),
                new Named("resetAccumulatedStats", CachingAllocator::resetAccumulatedStats),
                new Named("setMemoryFraction", x -> x.setMemoryFraction(0.9)),
                new Named("setSettings", x -> x.setSettings("garbage_collection_threshold:0.8")),
                new Named("setConfig", x -> x.setConfig(AllocatorConfig.defaults())),
                new Named(
                        "a malloc of more than an exabyte",
                        x -> assertThatThrownBy(() -> x.malloc(1L << 61)).isInstanceOf(OutOfMemoryException.class)),
                new Named("copyOnto", x -> x.copyOnto(dev.copyWithCapacity(1L << 30))),
                new Named("uncountedCopyOnto", x -> x.uncountedCopyOnto(dev.copyWithCapacity(1L << 30))),
                new Named("blockSize", x -> assertThat(in.blockSize(block)).isEqualTo(MiB)),
                new Named(
                        "pendingFreeBlocks",
                        x -> assertThat(in.pendingFreeBlocks()).isZero()),
                new Named("expectLiveBlocks", x -> in.expectLiveBlocks(1000)),
                new Named("visitSegments", x -> {
                    CountingVisitor v = new CountingVisitor();
                    in.visitSegments(v);
                    assertThat(v.blocks).isPositive();
                }),
                new Named(
                        "restoreSegment",
                        x -> in.restoreSegment(
                                0, 2 * MiB, 0, Pool.SMALL, false, List.of(RestoredBlock.free(2 * MiB)))))) {
            call.action().accept(a);
            anotherThreadGetsThrough(call.name(), probe);
        }
        CachingAllocator uncounted =
                CachingAllocator.uncounted(dev.copyWithCapacity(1L << 30), AllocatorConfig.defaults());
        assertThat(uncounted.tryMallocFreedAtOnce(512, 0)).isFalse(); // nothing cached to serve it
        anotherThreadGetsThrough(
                "tryMallocFreedAtOnce", () -> uncounted.internals().pendingFreeBlocks());
    }

    private record Named(String name, Consumer<CachingAllocator> action) {}

    private static final class CountingVisitor implements AllocatorInternals.SegmentVisitor {
        int blocks;

        @Override
        public void segment(long address, long stream, Pool pool, boolean expandable) {}

        @Override
        public void block(long address, long size, long requestedSize, BlockState state) {
            blocks++;
        }
    }
}
