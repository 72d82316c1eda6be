package io.gpumem.alloc;

import org.jetbrains.lincheck.datastructures.ModelCheckingOptions;
import org.jetbrains.lincheck.datastructures.Operation;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Model-checks {@link AllocatorLock} with Lincheck: every interleaving Lincheck explores (within the bounds below)
 * of a few threads taking the lock, once or reentrantly, around a plain (non-volatile) counter must be
 * linearizable against running the same operations one after another. A lost update, a reentrant unlock that
 * frees the lock too early, or a waiter that never gets the lock (Lincheck reports a deadlock/livelock) fails it.
 *
 * <p>The counter is deliberately a plain field read and written in two steps: only the lock's mutual exclusion
 * and its release/acquire publication make the increments atomic.
 */
@Tag("lincheck")
public class AllocatorLockLincheckTest {
    private final AllocatorLock lock = new AllocatorLock();
    private int counter;

    @Operation
    public int increment() {
        lock.lock();
        try {
            int v = counter;
            counter = v + 1;
            return v + 1;
        } finally {
            lock.unlock();
        }
    }

    /** Takes the lock twice (as a callback into the allocator does) and changes the counter in between. */
    @Operation
    public int reentrantAddTwo() {
        lock.lock();
        try {
            int v = counter;
            lock.lock();
            try {
                counter = v + 1;
            } finally {
                lock.unlock();
            }
            // still held once: nobody may have changed the counter since
            int w = counter;
            counter = w + 1;
            return w + 1;
        } finally {
            lock.unlock();
        }
    }

    @Operation
    public int read() {
        lock.lock();
        try {
            return counter;
        } finally {
            lock.unlock();
        }
    }

    @Test
    void theLockIsLinearizableUnderModelChecking() {
        long start = System.nanoTime();
        new ModelCheckingOptions()
                .threads(3)
                .actorsPerThread(2)
                .actorsBefore(0)
                .actorsAfter(1)
                .iterations(30)
                .invocationsPerIteration(500)
                .check(AllocatorLockLincheckTest.class);
        System.out.printf(
                "AllocatorLock model check: 3 threads x 2 ops, 30 scenarios x 500 interleavings, %.1f s%n",
                (System.nanoTime() - start) / 1e9);
    }
}
