package io.gpumem.trace.session;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/**
 * {@link Beside}'s contract: the work runs once, on its own daemon thread when started and on the taking thread when
 * not; every take gets the one result; what the work threw comes back as it was thrown (a checked exception wrapped,
 * naming it as the cause); an interrupted wait keeps the interrupt.
 */
class BesideTest {

    @Test
    void workNeverStartedRunsOnceOnTheTakingThread() {
        AtomicInteger runs = new AtomicInteger();
        AtomicReference<Thread> ranOn = new AtomicReference<>();
        Beside<String> work = new Beside<>(() -> {
            runs.incrementAndGet();
            ranOn.set(Thread.currentThread());
            return "done";
        });
        assertThat(runs).hasValue(0);
        assertThat(work.take()).isEqualTo("done");
        assertThat(work.take()).isEqualTo("done");
        assertThat(runs).hasValue(1);
        assertThat(ranOn.get()).isSameAs(Thread.currentThread());
    }

    @Test
    void startedWorkRunsOnceOnADaemonThreadOfItsNameAndTheTakeWaitsForIt() throws InterruptedException {
        CountDownLatch began = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        AtomicInteger runs = new AtomicInteger();
        AtomicReference<Thread> ranOn = new AtomicReference<>();
        Beside<Integer> work = new Beside<>(() -> {
            ranOn.set(Thread.currentThread());
            began.countDown();
            assertThat(release.await(30, TimeUnit.SECONDS)).isTrue();
            return runs.incrementAndGet();
        });
        assertThat(work.start("beside-test")).isSameAs(work);
        // a take before the started thread gets to run the work would run it itself (see the next test)
        assertThat(began.await(30, TimeUnit.SECONDS)).isTrue();
        Thread taker = new Thread(() -> assertThat(work.take()).isEqualTo(1));
        taker.start();
        taker.join(200);
        assertThat(taker.isAlive()).as("the take waits while the work runs").isTrue();
        release.countDown();
        taker.join(30_000);
        assertThat(taker.isAlive()).isFalse();
        assertThat(work.take()).isEqualTo(1);
        assertThat(runs).hasValue(1);
        assertThat(ranOn.get().getName()).isEqualTo("beside-test");
        assertThat(ranOn.get().isDaemon()).isTrue();
    }

    @Test
    void startedWorkNotYetRunningIsRunByTheFirstToGetToItAndOnlyOnce() {
        for (int round = 0; round < 200; round++) {
            AtomicInteger runs = new AtomicInteger();
            AtomicReference<Thread> ranOn = new AtomicReference<>();
            Beside<Integer> work = new Beside<>(() -> {
                ranOn.set(Thread.currentThread());
                return runs.incrementAndGet();
            });
            work.start("beside-race");
            assertThat(work.take()).isEqualTo(1);
            assertThat(runs).hasValue(1);
            assertThat(ranOn.get().getName())
                    .isIn("beside-race", Thread.currentThread().getName());
        }
    }

    @Test
    void whatTheWorkThrewComesBackAsThrownEveryTime() {
        IllegalArgumentException bad = new IllegalArgumentException("bad window");
        Beside<Object> failing = new Beside<>(() -> {
            throw bad;
        });
        assertThatThrownBy(failing::take).isSameAs(bad);
        assertThatThrownBy(failing::take).isSameAs(bad);

        StackOverflowError error = new StackOverflowError("deep");
        assertThatThrownBy(new Beside<>(() -> {
                            throw error;
                        })
                        .start("beside-error")::take)
                .isSameAs(error);

        IOException checked = new IOException("unreadable");
        assertThatThrownBy(new Beside<>(() -> {
                    throw checked;
                })::take)
                .isInstanceOf(IllegalStateException.class)
                .hasCause(checked);
    }

    @Test
    void anInterruptedWaitSaysSoAndKeepsTheInterrupt() throws InterruptedException {
        CountDownLatch began = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        Beside<String> slow = new Beside<>(() -> {
                    began.countDown();
                    release.await(30, TimeUnit.SECONDS);
                    return "late";
                })
                .start("beside-slow");
        try {
            assertThat(began.await(30, TimeUnit.SECONDS)).isTrue();
            Thread.currentThread().interrupt();
            assertThatThrownBy(slow::take)
                    .isInstanceOf(IllegalStateException.class)
                    .hasMessageContaining("interrupted")
                    .hasCauseInstanceOf(InterruptedException.class);
            assertThat(Thread.interrupted()).as("the interrupt is kept").isTrue();
        } finally {
            Thread.interrupted();
            release.countDown();
        }
        assertThat(slow.take()).isEqualTo("late");
    }
}
