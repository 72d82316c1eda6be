package io.gpumem.engine;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
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

    private static void await(CountDownLatch latch) {
        try {
            assertThat(latch.await(30, TimeUnit.SECONDS)).isTrue();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }
}
