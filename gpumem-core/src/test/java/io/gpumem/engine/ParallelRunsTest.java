package io.gpumem.engine;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;

class ParallelRunsTest {

    /** Runs that finish in the reverse of their order still come back in their order, each counted once. */
    @Test
    void resultsComeInTheOrderGivenWhateverOrderTheyFinishIn() {
        int n = 6;
        List<CountDownLatch> released = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            released.add(new CountDownLatch(1));
        }
        released.get(n - 1).countDown();
        List<Supplier<Integer>> runs = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            int k = i;
            runs.add(() -> {
                await(released.get(k));
                if (k > 0) {
                    released.get(k - 1).countDown(); // the next one to finish is the one before
                }
                return k * k;
            });
        }
        List<Integer> progress = new ArrayList<>();
        List<Integer> values = ParallelRuns.values(runs, n, progress::add);
        assertThat(values).containsExactly(0, 1, 4, 9, 16, 25);
        assertThat(progress).containsExactly(1, 2, 3, 4, 5, 6);
    }

    /** A failure is kept in its slot; the first one in order is what values() throws, as a loop would. */
    @Test
    void aFailureIsKeptForItsRunAndTheFirstInOrderIsRethrown() {
        IllegalStateException second = new IllegalStateException("second");
        IllegalArgumentException fourth = new IllegalArgumentException("fourth");
        List<Supplier<String>> runs = List.of(
                () -> "a",
                () -> {
                    throw second;
                },
                () -> "c",
                () -> {
                    throw fourth;
                });
        for (int threads : new int[] {1, 2, 4}) {
            List<ParallelRuns.Attempt<String>> results = ParallelRuns.all(runs, threads, done -> {});
            assertThat(results.get(0).get()).isEqualTo("a");
            assertThat(results.get(1).failure()).isSameAs(second);
            assertThat(results.get(2).get()).isEqualTo("c");
            assertThat(results.get(3).failure()).isSameAs(fourth);
            assertThatThrownBy(() -> ParallelRuns.values(runs, threads, done -> {}))
                    .as("threads " + threads)
                    .isSameAs(second);
        }
    }

    /**
     * Once {@link ParallelRuns#all} has thrown (an {@link Error} in a run, or a progress callback that threw), no run
     * starts any more: the workers used to go on starting every run left, on daemon threads, long after the caller
     * had its exception (a sequential loop stops there).
     */
    @Test
    void noRunStartsOnceTheCallerHasLeft() throws InterruptedException {
        for (boolean callbackThrows : new boolean[] {false, true}) {
            int n = 20;
            AtomicInteger started = new AtomicInteger();
            CountDownLatch callerLeft = new CountDownLatch(1);
            List<Supplier<Integer>> runs = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                int k = i;
                runs.add(() -> {
                    started.incrementAndGet();
                    if (k == 0 && !callbackThrows) {
                        throw new OutOfMemoryError("run 0");
                    }
                    if (k > 0) {
                        await(callerLeft); // the runs the caller did not see end: they end after it has left
                    }
                    return k;
                });
            }
            Throwable thrown = null;
            try {
                ParallelRuns.all(runs, 2, done -> {
                    if (callbackThrows) {
                        throw new IllegalStateException("stop");
                    }
                });
            } catch (OutOfMemoryError | IllegalStateException e) {
                thrown = e;
            }
            assertThat(thrown).as("callback throws: " + callbackThrows).isNotNull();
            callerLeft.countDown();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (workersAlive() && System.nanoTime() < deadline) {
                Thread.sleep(10);
            }
            assertThat(workersAlive()).isFalse();
            // run 0, and at most one run per worker taken before the caller left (each waits for it to leave)
            assertThat(started.get())
                    .as("runs started, callback throws: " + callbackThrows)
                    .isLessThanOrEqualTo(3);
        }
    }

    private static boolean workersAlive() {
        return Thread.getAllStackTraces().keySet().stream()
                .anyMatch(t -> t.isAlive() && t.getName().startsWith("gpumem-whatif-"));
    }

    private static void await(CountDownLatch latch) {
        try {
            assertThat(latch.await(30, TimeUnit.SECONDS)).isTrue();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }
}
