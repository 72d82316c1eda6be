package io.gpumem.alloc;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.locks.LockSupport;
import org.jspecify.annotations.Nullable;

/**
 * The allocators' mutex (the exact allocator's, and the policies' in {@code io.gpumem.policy}): reentrant (a trace tracker or context supplier may call back into the allocator, as
 * PyTorch's recursive mutex allows), not fair, and built for the case that dominates, one thread taking it
 * uncontended twice per malloc+free pair.
 *
 * <h2>Algorithm</h2>
 * {@link #lock}: one compare-and-set of {@link #owner} from null to the current thread; if the current thread
 * already owns it, a plain increment of {@link #holds}. {@link #unlock}: a release store of null (on x86 a plain
 * store, where {@code ReentrantLock.unlock}'s volatile write costs a full fence), then, only if some thread
 * announced it is waiting, an unpark of the first waiter. A waiter spins briefly, then enqueues itself, bumps
 * {@link #waiters} and parks with a bounded timeout, retrying the compare-and-set each time it wakes.
 *
 * <p>Why the timeout: the release store and the read of {@code waiters} in unlock are not ordered against a
 * waiter's enqueue-then-check (there is no fence between them, which is the point), so an unlock can miss a
 * waiter that is just going to sleep. The waiter then wakes by itself after at most {@link #MAX_PARK_NANOS}
 * and takes the free lock: a missed wake-up costs latency, never progress. Mutual exclusion rests only on the
 * compare-and-set (acquire) and the release store, which publish every write of the critical section.
 *
 * <p>Invariants: {@code owner != null} exactly while some thread holds the lock; {@code holds} is the number of
 * reentrant acquisitions beyond the first and is touched only by the owner.
 */
public final class AllocatorLock {
    private static final VarHandle OWNER;
    private static final VarHandle WAITERS;
    private static final int SPINS = 100;
    private static final long MIN_PARK_NANOS = 10_000;
    private static final long MAX_PARK_NANOS = 1_000_000;

    static {
        try {
            MethodHandles.Lookup l = MethodHandles.lookup();
            OWNER = l.findVarHandle(AllocatorLock.class, "owner", Thread.class);
            WAITERS = l.findVarHandle(AllocatorLock.class, "waiters", int.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    @SuppressWarnings("unused") // accessed through OWNER
    private volatile @Nullable Thread owner;

    private int holds;

    @SuppressWarnings("unused") // accessed through WAITERS
    private volatile int waiters;

    private final ConcurrentLinkedQueue<Thread> parked = new ConcurrentLinkedQueue<>();

    /** Acquires the lock (again, when this thread holds it already); not interruptible. */
    public void lock() {
        Thread t = Thread.currentThread();
        if (!OWNER.compareAndSet(this, (Thread) null, t)) {
            lockSlow(t);
        }
    }

    private void lockSlow(Thread t) {
        if ((Thread) OWNER.getOpaque(this) == t) {
            holds++;
            return;
        }
        for (int i = 0; i < SPINS; i++) {
            if ((Thread) OWNER.getOpaque(this) == null && OWNER.compareAndSet(this, (Thread) null, t)) {
                return;
            }
            Thread.onSpinWait();
        }
        long park = MIN_PARK_NANOS;
        boolean interrupted = false;
        parked.add(t);
        WAITERS.getAndAdd(this, 1);
        try {
            while (!OWNER.compareAndSet(this, (Thread) null, t)) {
                LockSupport.parkNanos(this, park);
                park = Math.min(park * 2, MAX_PARK_NANOS);
                // park returns at once while the interrupt flag is set: clear it while waiting (lock() is not
                // interruptible, like ReentrantLock.lock) and restore it once the lock is held
                interrupted |= Thread.interrupted();
            }
        } finally {
            WAITERS.getAndAdd(this, -1);
            parked.remove(t);
            if (interrupted) {
                t.interrupt();
            }
        }
    }

    /** Releases one acquisition; throws {@link IllegalMonitorStateException} when this thread does not hold it. */
    public void unlock() {
        if ((Thread) OWNER.getOpaque(this) != Thread.currentThread()) {
            throw new IllegalMonitorStateException("the allocator lock is not held by this thread");
        }
        if (holds > 0) {
            holds--;
            return;
        }
        OWNER.setRelease(this, (Thread) null);
        if ((int) WAITERS.getOpaque(this) != 0) {
            Thread w = parked.peek();
            if (w != null) {
                LockSupport.unpark(w);
            }
        }
    }
}
