package io.gpumem.alloc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.locks.LockSupport;
import org.junit.jupiter.api.Test;

/** Mutual exclusion, reentrancy and ownership checks of {@link AllocatorLock} under real contention. */
class AllocatorLockTest {

    private long counter;
    private int inside;

    @Test
    void contendedThreadsNeverOverlapAndNoIncrementIsLost() throws Exception {
        long seed = System.nanoTime();
        System.out.println("AllocatorLockTest seed=" + seed);
        AllocatorLock lock = new AllocatorLock();
        int threads = 4;
        int rounds = 20_000;
        List<Thread> workers = new ArrayList<>();
        List<Throwable> failures = java.util.Collections.synchronizedList(new ArrayList<>());
        for (int t = 0; t < threads; t++) {
            SplittableRandom rnd = new SplittableRandom(seed + t);
            workers.add(new Thread(() -> {
                try {
                    for (int i = 0; i < rounds; i++) {
                        boolean reenter = rnd.nextInt(8) == 0;
                        lock.lock();
                        try {
                            if (++inside != 1) {
                                throw new AssertionError("two threads inside the lock");
                            }
                            if (reenter) {
                                lock.lock();
                                counter++;
                                lock.unlock();
                            } else {
                                counter++;
                            }
                            if (rnd.nextInt(64) == 0) {
                                LockSupport.parkNanos(10_000); // hold the lock while asleep so others must wait
                            }
                            inside--;
                        } finally {
                            lock.unlock();
                        }
                    }
                } catch (Throwable e) {
                    failures.add(e);
                }
            }));
        }
        workers.forEach(Thread::start);
        for (Thread w : workers) {
            w.join();
        }
        assertThat(failures).isEmpty();
        assertThat(counter).isEqualTo((long) threads * rounds);
    }

    @Test
    void anInterruptedWaiterStillWaitsForTheLockAndKeepsItsInterrupt() throws Exception {
        AllocatorLock lock = new AllocatorLock();
        lock.lock();
        boolean[] result = new boolean[2];
        Thread waiter = new Thread(() -> {
            lock.lock();
            result[0] = true;
            result[1] = Thread.currentThread().isInterrupted();
            lock.unlock();
        });
        waiter.start();
        while (waiter.getState() != Thread.State.TIMED_WAITING && waiter.isAlive()) {
            Thread.onSpinWait();
        }
        waiter.interrupt();
        Thread.sleep(20);
        assertThat(result[0]).as("acquired while another thread held the lock").isFalse();
        lock.unlock();
        waiter.join(10_000);
        assertThat(waiter.isAlive()).isFalse();
        assertThat(result[0]).isTrue();
        assertThat(result[1]).as("interrupt status restored").isTrue();
    }

    @Test
    void unlockByAThreadThatDoesNotHoldItFails() throws Exception {
        AllocatorLock lock = new AllocatorLock();
        assertThatThrownBy(lock::unlock).isInstanceOf(IllegalMonitorStateException.class);
        lock.lock();
        Throwable[] seen = new Throwable[1];
        Thread other = new Thread(() -> {
            try {
                lock.unlock();
            } catch (Throwable e) {
                seen[0] = e;
            }
        });
        other.start();
        other.join();
        assertThat(seen[0]).isInstanceOf(IllegalMonitorStateException.class);
        lock.unlock();
        // released for good: another thread can take it now
        Thread taker = new Thread(() -> {
            lock.lock();
            lock.unlock();
        });
        taker.start();
        taker.join(10_000);
        assertThat(taker.isAlive()).isFalse();
    }
}
