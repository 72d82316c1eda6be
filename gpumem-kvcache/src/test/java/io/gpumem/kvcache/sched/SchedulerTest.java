package io.gpumem.kvcache.sched;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.device.SimulatedDevice;
import io.gpumem.kvcache.KvCacheSpec;
import io.gpumem.kvcache.manager.KvCacheConfig;
import io.gpumem.kvcache.manager.KvCacheManager;
import io.gpumem.kvcache.manager.KvRequest;
import io.gpumem.kvcache.manager.PreemptionMode;
import io.gpumem.kvcache.manager.RequestStatus;
import io.gpumem.kvcache.memory.KvMemory;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

/** Golden tests for the scheduler rules of kv-cache.md §1.9. */
class SchedulerTest {
    private static final int BS = 4;

    private static KvCacheManager manager(int blocks, KvCacheConfig config) {
        KvCacheSpec spec = KvCacheSpec.builder()
                .layers(1)
                .kvHeads(1)
                .headSize(4)
                .elementSize(4)
                .blockSize(BS)
                .numBlocks(blocks)
                .maxModelLen((blocks - 1) * BS)
                .build();
        return new KvCacheManager(
                spec,
                KvMemory.direct(SimulatedDevice.builder()
                        .capacity(1L << 24)
                        .backed(true)
                        .build()),
                config);
    }

    private static KvRequest req(String id, int from, int n, int priority, long arrival) {
        return KvRequest.builder(id, IntStream.range(from, from + n).toArray())
                .priority(priority)
                .arrival(arrival)
                .build();
    }

    /** Runs one step: computes the batch, samples a token for requests that caught up. */
    private static List<String> step(Scheduler s) {
        s.schedule();
        List<String> ids = new ArrayList<>();
        for (int i = 0; i < s.batchSize(); i++) {
            KvRequest r = s.batchRequest(i);
            r.advanceComputed(s.batchTokens(i));
            if (r.numComputed() == r.numTokens()) {
                r.appendToken(7);
            }
            ids.add(r.id() + ":" + s.batchTokens(i));
        }
        return ids;
    }

    @Test
    void noRequestIsAdmittedInAStepThatPreemptedEvenWhenItWouldFit() {
        KvCacheManager m = manager(8, KvCacheConfig.defaults()); // 7 usable blocks
        Scheduler s =
                new Scheduler(m, new SchedulerConfig(2048, 16, PreemptionMode.RECOMPUTE, VictimPolicy.PRIORITY, 0));
        KvRequest high = req("high", 0, 8, 0, 0);
        KvRequest low = req("low", 100, 16, 9, 1);
        s.add(high);
        s.add(low);
        assertThat(step(s)).containsExactly("high:8", "low:16"); // 2 + 4 blocks, 1 free
        KvRequest mid = req("mid", 200, 3, 5, 2);
        s.add(mid);
        // high takes the last block; low cannot grow and, least important, preempts itself: 4 blocks free
        assertThat(step(s)).containsExactly("high:1");
        assertThat(s.preemptedLastStep()).isTrue();
        assertThat(low.status()).isEqualTo(RequestStatus.PREEMPTED);
        assertThat(m.pool().freeCount()).isEqualTo(4);
        assertThat(mid.status()).as("mid fits but this step preempted").isEqualTo(RequestStatus.WAITING);
        // the next step admits mid, which is ahead of low in the priority-ordered queue
        assertThat(step(s)).containsExactly("high:1", "mid:3");
        assertThat(low.status()).isEqualTo(RequestStatus.PREEMPTED);
        m.checkInvariants();
    }

    @Test
    void aVictimReturnsToTheHeadOfTheQueueAndKeepsFcfsOrder() {
        KvCacheManager m = manager(6, KvCacheConfig.defaults()); // 5 usable blocks
        Scheduler s = new Scheduler(m, SchedulerConfig.defaults());
        KvRequest a = req("a", 0, 8, 0, 0);
        KvRequest b = req("b", 100, 12, 0, 1);
        s.add(a);
        s.add(b);
        assertThat(step(s)).containsExactly("a:8", "b:12"); // 2 + 3 blocks: pool full
        KvRequest c = req("c", 200, 2, 0, 2);
        s.add(c);
        // a needs a 3rd block for its sampled token: FCFS preempts b (3 blocks freed), c must still wait
        assertThat(step(s)).containsExactly("a:1");
        assertThat(s.preemptedLastStep()).isTrue();
        assertThat(b.status()).isEqualTo(RequestStatus.PREEMPTED);
        assertThat(c.status()).isEqualTo(RequestStatus.WAITING);
        assertThat(m.pool().freeCount()).isEqualTo(2);
        // next step: the victim, at the head of the queue, comes back first (13 tokens = 4 blocks > 2 free) so
        // admission stops there and c waits behind it (FCFS order is kept)
        assertThat(step(s)).containsExactly("a:1");
        assertThat(c.status()).isEqualTo(RequestStatus.WAITING);
        assertThat(s.preemptions()).isEqualTo(1);
        m.checkInvariants();
    }

    @Test
    void fcfsPreemptsTheLastAdmittedAndARequestMayPreemptItself() {
        KvCacheManager m = manager(5, KvCacheConfig.defaults()); // 4 usable
        Scheduler s = new Scheduler(m, SchedulerConfig.defaults());
        KvRequest a = req("a", 0, 8, 0, 0);
        KvRequest b = req("b", 100, 8, 0, 1);
        s.add(a);
        s.add(b);
        step(s);
        assertThat(step(s)).containsExactly("a:1"); // a's growth evicts b (last admitted)
        assertThat(b.status()).isEqualTo(RequestStatus.PREEMPTED);
        assertThat(step(s)).containsExactly("a:1");
        m.checkInvariants();
    }

    @Test
    void priorityPreemptsTheLeastImportantAndRollsBackItsGrant() {
        KvCacheManager m = manager(7, KvCacheConfig.defaults()); // 6 usable
        Scheduler s =
                new Scheduler(m, new SchedulerConfig(2048, 16, PreemptionMode.RECOMPUTE, VictimPolicy.PRIORITY, 0));
        KvRequest low = req("low", 0, 5, 5, 0); // admitted first, least important
        s.add(low);
        assertThat(step(s)).containsExactly("low:5"); // 2 blocks
        KvRequest high = req("high", 100, 8, 0, 1);
        KvRequest mid = req("mid", 200, 7, 1, 2);
        s.add(mid);
        s.add(high);
        assertThat(step(s)).containsExactly("low:1", "high:8", "mid:7"); // 2 + 2 + 2 blocks: full
        // low decodes in place (granted first), high needs a block: the victim is low, whose grant is rolled back
        assertThat(step(s)).containsExactly("high:1", "mid:1");
        assertThat(low.status()).isEqualTo(RequestStatus.PREEMPTED);
        m.checkInvariants();
    }

    @Test
    void aVictimWhoseGrantCompletedABlockLeavesThatBlockUncached() {
        KvCacheManager m = manager(5, KvCacheConfig.defaults()); // 4 usable
        Scheduler s =
                new Scheduler(m, new SchedulerConfig(2048, 16, PreemptionMode.RECOMPUTE, VictimPolicy.PRIORITY, 1));
        KvRequest low = req("low", 0, 6, 5, 0);
        s.add(low);
        assertThat(step(s)).containsExactly("low:6"); // 7 slots: 2 blocks, block 0 cached
        KvRequest high = req("high", 100, 3, 0, 1);
        s.add(high);
        assertThat(step(s)).containsExactly("low:1", "high:3"); // 2 + 1 blocks
        int lowBlock1 = low.block(1);
        // low's decode grant fills block 1 (cached at grant time) and takes a lookahead block: the pool is
        // full. high then needs a block and low, though admitted first, is the victim: its grant is rolled
        // back, so position 7 is never computed. The freed lookahead block (no entry) is reused first,
        // block 1 stays in the free list and must not be found by a lookup.
        assertThat(step(s)).containsExactly("high:1");
        assertThat(low.status()).isEqualTo(RequestStatus.PREEMPTED);
        assertThat(low.numTokens()).isEqualTo(8);
        int[] probe = new int[low.numTokens() + 1];
        for (int i = 0; i < low.numTokens(); i++) {
            probe[i] = low.token(i);
        }
        assertThat(m.lookupCachedTokens(KvRequest.of("probe", probe)))
                .as("only block 0 holds computed KV")
                .isEqualTo(BS);
        assertThat(m.pool().isFree(lowBlock1)).isTrue();
        assertThat(m.pool().isCached(lowBlock1))
                .as("low's block 1 holds an uncomputed position")
                .isFalse();
        m.checkInvariants();
    }

    @Test
    void leastComputedFirstPreemptsTheCheapestToRecompute() {
        KvCacheManager m = manager(7, KvCacheConfig.defaults());
        Scheduler s = new Scheduler(
                m, new SchedulerConfig(2048, 16, PreemptionMode.RECOMPUTE, VictimPolicy.LEAST_COMPUTED, 0));
        KvRequest big = req("big", 0, 8, 0, 0);
        KvRequest small = req("small", 100, 3, 0, 1);
        KvRequest last = req("last", 200, 8, 0, 2);
        s.add(big);
        s.add(small);
        s.add(last);
        step(s); // 2 + 1 + 2 blocks, 1 free
        step(s); // big takes the last block
        assertThat(m.pool().freeCount()).isZero();
        step(s); // last needs a block: small (3 computed... fewest) goes
        assertThat(small.status()).isEqualTo(RequestStatus.PREEMPTED);
        assertThat(last.status()).isEqualTo(RequestStatus.RUNNING);
        m.checkInvariants();
    }

    @Test
    void swapPreemptionResumesFromTheHostTierWithoutRecomputing() {
        KvCacheManager m = manager(5, KvCacheConfig.defaults().withSwapSpaceBytes(1 << 20));
        Scheduler s = new Scheduler(m, new SchedulerConfig(2048, 16, PreemptionMode.SWAP, VictimPolicy.FCFS, 0));
        KvRequest a = req("a", 0, 8, 0, 0);
        KvRequest b = req("b", 100, 8, 0, 1);
        s.add(a);
        s.add(b);
        step(s);
        step(s);
        assertThat(b.status()).isEqualTo(RequestStatus.SWAPPED);
        s.finish(a);
        List<String> next = step(s);
        assertThat(b.status()).isEqualTo(RequestStatus.RUNNING);
        assertThat(next).containsExactly("b:1"); // only the sampled token: nothing recomputed
        assertThat(m.stats().swapPreemptions()).isEqualTo(1);
        m.checkInvariants();
    }

    @Test
    void thePriorityQueueOrdersByPriorityThenArrivalAndKeepsFullTiesInTheOrderAdded() {
        KvCacheManager m = manager(32, KvCacheConfig.defaults());
        Scheduler s =
                new Scheduler(m, new SchedulerConfig(2048, 16, PreemptionMode.RECOMPUTE, VictimPolicy.PRIORITY, 0));
        s.add(req("a", 0, 2, 1, 5));
        s.add(req("b", 10, 2, 0, 9));
        s.add(req("c", 20, 2, 1, 3));
        s.add(req("d", 30, 2, 0, 9)); // b's priority and arrival: after b, as added
        s.add(req("e", 40, 2, 0, 2));
        assertThat(step(s)).containsExactly("e:2", "b:2", "d:2", "c:2", "a:2");
    }

    /**
     * Admits x, then y (8 tokens each: 2 blocks of the 5 usable), in one step ({@code together}) or in two (x first).
     * Both then decode until a step in which y needs a block that is not there and a victim must go. Returns the
     * victim's id.
     */
    private static String victimOfTwo(
            VictimPolicy policy, boolean together, int xPriority, long xArrival, int yPriority, long yArrival) {
        KvCacheManager m = manager(6, KvCacheConfig.defaults());
        Scheduler s = new Scheduler(m, new SchedulerConfig(2048, 16, PreemptionMode.RECOMPUTE, policy, 0));
        KvRequest x = req("x", 0, 8, xPriority, xArrival);
        KvRequest y = req("y", 100, 8, yPriority, yArrival);
        s.add(x);
        if (together) {
            s.add(y);
            assertThat(step(s)).containsExactly("x:8", "y:8"); // 1 block free
        } else {
            assertThat(step(s)).containsExactly("x:8");
            s.add(y);
            assertThat(step(s)).containsExactly("x:1", "y:8"); // x's third block: none free
        }
        step(s); // together: x takes the last block; y's decode needs one more in either case
        assertThat(s.preemptions()).isEqualTo(1);
        m.checkInvariants();
        return x.status() == RequestStatus.PREEMPTED ? "x" : "y";
    }

    /** One victim choice: the policy, whether x and y are admitted together, their priorities and arrivals. */
    private record VictimCase(
            VictimPolicy policy, boolean together, int xp, long xa, int yp, long ya, String victim, String why) {}

    @Test
    void theVictimIsTheLeastImportantThenTheLatestToArriveThenTheLastAdmitted() {
        List<VictimCase> cases = List.of(
                new VictimCase(VictimPolicy.FCFS, false, 0, 5, 0, 1, "y", "FCFS: the last admitted"),
                new VictimCase(
                        VictimPolicy.PRIORITY,
                        false,
                        0,
                        5,
                        0,
                        1,
                        "x",
                        "same priority: the later arrival, though admitted first"),
                new VictimCase(
                        VictimPolicy.PRIORITY, false, 3, 1, 0, 5, "x", "the less important, though it arrived first"),
                new VictimCase(
                        VictimPolicy.PRIORITY, false, 0, 4, 0, 4, "y", "same priority and arrival: the last admitted"),
                new VictimCase(
                        VictimPolicy.LEAST_COMPUTED,
                        true,
                        0,
                        0,
                        0,
                        1,
                        "y",
                        "8 computed each (x's decode token is granted, not yet computed): the last admitted"),
                new VictimCase(
                        VictimPolicy.LEAST_COMPUTED, false, 0, 0, 0, 1, "y", "y has computed fewer (8 against 9)"));
        for (VictimCase c : cases) {
            assertThat(victimOfTwo(c.policy(), c.together(), c.xp(), c.xa(), c.yp(), c.ya()))
                    .as(c.why())
                    .isEqualTo(c.victim());
        }
    }
}
