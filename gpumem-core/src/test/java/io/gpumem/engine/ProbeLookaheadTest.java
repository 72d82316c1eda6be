package io.gpumem.engine;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.engine.MinimumCapacity.Verdict;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;
import java.util.function.LongPredicate;
import org.junit.jupiter.api.Test;

/**
 * A search whose probes idle workers run ahead ({@link ProbeLookahead}) answers the same as the search
 * alone, whatever the workers compute and however their timing falls (every probe it asks computed by someone);
 * probes it leaves behind are abandoned, and a probe's failure reaches the search that asks for it.
 */
class ProbeLookaheadTest {

    private static final long STEP = MinimumCapacity.STEP;

    /** Workers serving {@code idle} on their own threads until it is closed. */
    private static List<Thread> serve(IdleWorkers idle, int count) {
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            Thread t = new Thread(idle::serve, "test-worker-" + i);
            t.setDaemon(true);
            t.start();
            threads.add(t);
        }
        return threads;
    }

    /** Workers, {@code count} of them waiting for jobs. */
    private static IdleWorkers waitingWorkers(int count) throws InterruptedException {
        IdleWorkers idle = new IdleWorkers();
        serve(idle, count);
        awaitFree(idle, count);
        return idle;
    }

    /** The capacities probed on threads other than the one that made this (the searching thread). */
    private static final class ProbedByWorkers {
        private final String searcher = Thread.currentThread().getName();
        final List<Long> capacities = Collections.synchronizedList(new ArrayList<>());

        /** Records {@code c} if probed by a worker; whether it was. */
        boolean record(long c) {
            if (Thread.currentThread().getName().equals(searcher)) {
                return false;
            }
            capacities.add(c);
            return true;
        }
    }

    private static void awaitFree(IdleWorkers idle, int count) throws InterruptedException {
        for (int i = 0; i < 5000 && idle.free() < count; i++) {
            Thread.sleep(1);
        }
        assertThat(idle.free()).as("workers waiting").isEqualTo(count);
    }

    /**
     * Seeded predicates, monotone and not (a capacity's outcome a fixed function of it, computed slowly enough for
     * workers to overlap): the lookahead's answer is the plain search's, and every probe the search asks was
     * computed by the searching thread or a worker.
     */
    @Test
    void answersAsTheSearchAloneOnRandomPredicates() throws Exception {
        long seed = System.nanoTime();
        System.out.println("ProbeLookaheadTest seed " + seed);
        Random rnd = new Random(seed);
        for (int round = 0; round < 40; round++) {
            long lo = STEP * rnd.nextInt(50);
            long hi = lo + STEP * (2 + rnd.nextInt(3000));
            long threshold = lo + STEP * (1 + rnd.nextInt((int) ((hi - lo) / STEP)));
            long noiseSeed = rnd.nextLong();
            boolean monotone = rnd.nextBoolean();
            // above the threshold everything runs; below it, monotone: nothing; else a fixed pseudo-random half
            LongPredicate outcome =
                    c -> c >= threshold || (!monotone && (Long.hashCode(c * 0x9E3779B97F4A7C15L ^ noiseSeed) & 1) == 0);
            // a failure's cost: unknown (the plain bisection), or a fixed function of the capacity in (0, 1], which
            // the search weighs and the lookahead can only guess
            boolean weighted = rnd.nextBoolean();
            MinimumCapacity.Prober verdicts = c -> outcome.test(c)
                    ? Verdict.RUNS
                    : weighted
                            ? new Verdict(false, (1 + Math.floorMod(c * 31 ^ noiseSeed, 1000)) / 1000.0)
                            : Verdict.FAILS;
            List<Long> askedAlone = new ArrayList<>();
            long alone = MinimumCapacity.search(
                    lo,
                    hi,
                    c -> {
                        askedAlone.add(c);
                        return verdicts.probe(c);
                    },
                    null);

            int workers = 1 + rnd.nextInt(6);
            IdleWorkers idle = new IdleWorkers();
            List<Thread> threads = serve(idle, workers);
            awaitFree(idle, workers);
            List<Long> computed = Collections.synchronizedList(new ArrayList<>());
            ProbeLookahead.AbandonableProbe probe = (c, abandoned) -> {
                computed.add(c);
                for (int spin = 0; spin < 1 + rnd(c, noiseSeed); spin++) {
                    if (abandoned.getAsBoolean()) {
                        return null;
                    }
                    Thread.onSpinWait();
                }
                return verdicts.probe(c);
            };
            AtomicLong taken = new AtomicLong();
            ProbeLookahead ahead = new ProbeLookahead(probe, idle, taken, rnd.nextInt(ProbeLookahead.MAX_LENT + 1));
            long withWorkers;
            try {
                withWorkers = MinimumCapacity.search(
                        lo,
                        hi,
                        c -> {
                            throw new AssertionError("the plain predicate is not asked when a lookahead is given");
                        },
                        ahead);
            } finally {
                ahead.abandonAll();
                idle.close();
            }
            for (Thread t : threads) {
                t.join(10_000);
                assertThat(t.isAlive()).as("worker gone after close").isFalse();
            }
            String what = "seed " + seed + " round " + round + " (" + workers + " workers, "
                    + (monotone ? "monotone" : "not monotone") + (weighted ? ", failures weighed" : "") + ")";
            assertThat(withWorkers).as(what).isEqualTo(alone);
            assertThat(ahead.lentCount()).as(what + ": lent after the search").isZero();
            assertThat(computed)
                    .as(what + ": every asked probe computed by someone")
                    .containsAll(askedAlone);
        }
    }

    /** Some busy work per capacity, so that probes end in a different order than they start. */
    private static int rnd(long c, long seed) {
        return Math.floorMod(Long.hashCode(c ^ seed) * 31L, 20_000);
    }

    /** With one worker, the probe below the current one is lent and taken when the current one answers. */
    @Test
    void theSearchTakesTheProbeItsWorkerRanAhead() throws Exception {
        IdleWorkers idle = waitingWorkers(1);
        AtomicLong taken = new AtomicLong();
        ProbedByWorkers byWorker = new ProbedByWorkers();
        CountDownLatch workerStarted = new CountDownLatch(1);
        ProbeLookahead ahead = new ProbeLookahead(
                (c, abandoned) -> {
                    if (byWorker.record(c)) {
                        workerStarted.countDown();
                    } else {
                        awaitQuietly(workerStarted); // the first probe ends only once the worker has one in hand
                    }
                    return Verdict.of(c >= 37 * STEP); // the climb's first probes fail, each asking the next one lent
                },
                idle,
                taken,
                ProbeLookahead.MAX_LENT);
        try {
            long answer = MinimumCapacity.search(0, 64 * STEP, c -> Verdict.of(c >= 37 * STEP), ahead);
            assertThat(answer).isEqualTo(37 * STEP);
        } finally {
            ahead.abandonAll();
            idle.close();
        }
        assertThat(byWorker.capacities).as("probes the worker ran").isNotEmpty();
        assertThat(taken.get()).as("probes the search took from the worker").isPositive();
    }

    /** A probe the bracket leaves behind is abandoned while it runs, and its worker is free again. */
    @Test
    void aProbeLeftBehindIsAbandonedAndItsWorkerFreed() throws Exception {
        IdleWorkers idle = waitingWorkers(1);
        long lo = 0;
        long hi = 8 * STEP; // a bisection's probes: 4 steps; below it 2 (lent to the worker), above it 6
        CountDownLatch workerStarted = new CountDownLatch(1);
        CountDownLatch workerGaveUp = new CountDownLatch(1);
        ProbeLookahead ahead = new ProbeLookahead(
                (c, abandoned) -> {
                    if (c == 2 * STEP) {
                        workerStarted.countDown();
                        waitUntil(abandoned);
                        workerGaveUp.countDown();
                        return null;
                    }
                    return Verdict.of(c >= 7 * STEP); // 4 fails: the bracket moves above 2, which is then abandoned
                },
                idle,
                new AtomicLong(),
                ProbeLookahead.MAX_LENT);
        try {
            assertThat(ahead.answer(new MinimumCapacity.Bracket(lo, 0, lo, hi, 1))
                            .runs())
                    .isFalse();
            assertThat(workerStarted.await(10, TimeUnit.SECONDS)).isTrue();
            assertThat(ahead.lentCount()).isEqualTo(1);
            assertThat(ahead.answer(new MinimumCapacity.Bracket(lo, 0, 4 * STEP, hi, 1))
                            .runs())
                    .isFalse(); // (4, 8): 2 is behind
            assertThat(workerGaveUp.await(10, TimeUnit.SECONDS))
                    .as("abandoned probe stopped")
                    .isTrue();
            awaitFree(idle, 1);
        } finally {
            ahead.abandonAll();
            idle.close();
        }
    }

    /** A probe run ahead that throws rethrows, as it was, in the search that asks for it. */
    @Test
    void aProbeFailureRunAheadReachesTheSearchThatAsks() throws Exception {
        IdleWorkers idle = waitingWorkers(2);
        IllegalStateException broken = new IllegalStateException("broken replay");
        CountDownLatch thrown = new CountDownLatch(1);
        ProbeLookahead ahead = new ProbeLookahead(
                (c, abandoned) -> {
                    if (c == 2 * STEP) {
                        thrown.countDown();
                        throw broken;
                    }
                    if (c == STEP) {
                        awaitQuietly(thrown); // the next probe has failed before the current one answers
                    }
                    return Verdict.of(c >= 7 * STEP); // the climb's first probe fails: the next is asked
                },
                idle,
                new AtomicLong(),
                ProbeLookahead.MAX_LENT);
        try {
            assertThatThrownBy(() -> MinimumCapacity.search(0, 8 * STEP, c -> Verdict.RUNS, ahead))
                    .isSameAs(broken);
        } finally {
            ahead.abandonAll();
            idle.close();
        }
    }

    /** With no probe allowed to be lent (no heap to spare), the search computes every probe itself, and alike. */
    @Test
    void noProbeIsLentWhenNoneMayBe() throws Exception {
        IdleWorkers idle = waitingWorkers(3);
        AtomicLong taken = new AtomicLong();
        ProbedByWorkers byWorker = new ProbedByWorkers();
        ProbeLookahead ahead = new ProbeLookahead(
                (c, abandoned) -> {
                    byWorker.record(c);
                    return Verdict.of(c >= 37 * STEP);
                },
                idle,
                taken,
                0);
        try {
            assertThat(MinimumCapacity.search(0, 64 * STEP, c -> Verdict.of(c >= 37 * STEP), ahead))
                    .isEqualTo(37 * STEP);
        } finally {
            ahead.abandonAll();
            idle.close();
        }
        assertThat(byWorker.capacities).isEmpty();
        assertThat(taken.get()).isZero();
    }

    /** Workers refuse jobs once closed, and lend only to a waiting worker. */
    @Test
    void workersLendOnlyWhileOneWaitsAndNotAfterClose() throws Exception {
        IdleWorkers idle = new IdleWorkers();
        assertThat(idle.lend(() -> {})).as("nobody waiting").isFalse();
        serve(idle, 1);
        awaitFree(idle, 1);
        CountDownLatch release = new CountDownLatch(1);
        assertThat(idle.lend(() -> awaitQuietly(release))).isTrue();
        assertThat(idle.lend(() -> {})).as("the one worker is busy").isFalse();
        release.countDown();
        awaitFree(idle, 1);
        idle.close();
        assertThat(idle.lend(() -> {})).as("closed").isFalse();
    }

    private static void waitUntil(BooleanSupplier condition) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("never abandoned");
            }
            Thread.onSpinWait();
        }
    }

    private static void awaitQuietly(CountDownLatch latch) {
        try {
            assertThat(latch.await(10, TimeUnit.SECONDS)).isTrue();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }
}
