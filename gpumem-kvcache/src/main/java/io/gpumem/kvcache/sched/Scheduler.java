package io.gpumem.kvcache.sched;

import io.gpumem.kvcache.manager.KvCacheManager;
import io.gpumem.kvcache.manager.KvRequest;
import io.gpumem.kvcache.manager.RequestStatus;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * A continuous-batching scheduler over a {@link KvCacheManager}, shaped after vLLM v1's (kv-cache.md §1.9).
 *
 * <h2>One step ({@link #schedule})</h2>
 * <ol>
 *   <li>Running requests first, in admission order: each asks for its remaining tokens (1 when
 *       decoding, the rest of its prompt when prefilling), capped by the step's token budget. When
 *       {@code allocateSlots} says "cannot", a victim is chosen by the {@link VictimPolicy} and preempted
 *       (recompute or swap); if the victim was already scheduled this step its grant is rolled back;
 *       victims go to the <b>head</b> of the waiting queue (by priority under the priority policy). If the victim is the request itself, the
 *       running pass stops.</li>
 *   <li>Only if nothing was preempted this step, waiting requests are admitted in queue order (swapped
 *       ones swapped back in, others after a prefix lookup), while budget, running slots and blocks last.</li>
 * </ol>
 * The result is this step's batch ({@link #batchSize}, {@link #batchRequest}, {@link #batchTokens});
 * the caller computes those tokens, advances them on each request and calls {@link #finish} for
 * completed ones. Internal arrays are reused, so a step allocates nothing in steady state.
 */
public final class Scheduler {
    private final KvCacheManager manager;
    private final SchedulerConfig config;
    private final List<KvRequest> running = new ArrayList<>();
    private final ArrayList<KvRequest> waiting = new ArrayList<>();
    private KvRequest[] batch = new KvRequest[64];
    private int[] batchTokens = new int[64];
    private int batchSize;
    private boolean preemptedLastStep;
    private long preemptions;

    public Scheduler(KvCacheManager manager, SchedulerConfig config) {
        this.manager = manager;
        this.config = config;
    }

    /** Queues a new request at the tail of the waiting queue. */
    public void add(KvRequest r) {
        if (r.status() != RequestStatus.WAITING) {
            throw new IllegalArgumentException("request " + r.id() + " is " + r.status() + ", not waiting");
        }
        enqueue(r, false);
    }

    /**
     * FCFS and least-computed keep arrival order, victims first; the priority policy keeps the queue
     * ordered by (priority, arrival), as vLLM does, so a preempted low-priority request waits behind
     * more important ones.
     */
    private void enqueue(KvRequest r, boolean victim) {
        if (config.victimPolicy() != VictimPolicy.PRIORITY) {
            if (victim) {
                waiting.addFirst(r);
            } else {
                waiting.addLast(r);
            }
            return;
        }
        int at = waiting.size();
        while (at > 0 && before(r, waiting.get(at - 1))) {
            at--;
        }
        waiting.add(at, r);
    }

    private static boolean before(KvRequest a, KvRequest b) {
        return a.priority() < b.priority() || (a.priority() == b.priority() && a.arrival() < b.arrival());
    }

    public int runningCount() {
        return running.size();
    }

    public int waitingCount() {
        return waiting.size();
    }

    public long preemptions() {
        return preemptions;
    }
    /** Whether the last {@link #schedule} preempted (and therefore admitted nothing). */
    public boolean preemptedLastStep() {
        return preemptedLastStep;
    }
    /** Running requests in admission order (a copy). */
    public List<KvRequest> running() {
        return List.copyOf(running);
    }

    public int batchSize() {
        return batchSize;
    }

    public KvRequest batchRequest(int i) {
        return batch[i];
    }

    public int batchTokens(int i) {
        return batchTokens[i];
    }

    /** Plans one step; see the class comment. Returns the number of requests in the batch. */
    public int schedule() {
        batchSize = 0;
        int budget = config.tokenBudget();
        boolean preempted = false;
        int i = 0;
        while (i < running.size() && budget > 0) {
            KvRequest r = running.get(i);
            int n = Math.min(r.numTokens() - r.numComputed(), budget);
            if (n <= 0) {
                i++;
                continue;
            }
            boolean selfPreempted = false;
            while (!manager.allocateSlots(r, n, config.lookahead())) {
                int v = pickVictim();
                KvRequest victim = running.get(v);
                budget += rollBack(victim);
                manager.preempt(victim, config.preemption());
                running.remove(v);
                enqueue(victim, true);
                preemptions++;
                preempted = true;
                if (victim == r) {
                    selfPreempted = true;
                    break;
                }
                if (v < i) {
                    i--;
                }
            }
            if (selfPreempted) {
                break;
            }
            add(r, n);
            budget -= n;
            i++;
        }
        if (!preempted) {
            admitWaiting(budget);
        }
        preemptedLastStep = preempted;
        return batchSize;
    }

    private void admitWaiting(int budget) {
        while (budget > 0 && !waiting.isEmpty() && running.size() < config.maxRunning()) {
            KvRequest r = waiting.getFirst();
            if (r.status() == RequestStatus.SWAPPED) {
                if (!manager.swapIn(r)) {
                    return;
                }
                waiting.removeFirst();
                running.add(r);
                int n = Math.min(r.numTokens() - r.numComputed(), budget);
                if (n > 0 && manager.allocateSlots(r, n, config.lookahead())) {
                    add(r, n);
                    budget -= n;
                }
                continue;
            }
            int hit = manager.lookupCachedTokens(r);
            int n = Math.min(r.numTokens() - hit, budget);
            if (!manager.allocateSlots(r, n, config.lookahead())) {
                return;
            }
            waiting.removeFirst();
            running.add(r);
            add(r, n);
            budget -= n;
        }
    }

    private int pickVictim() {
        int best = running.size() - 1;
        switch (config.victimPolicy()) {
            case FCFS -> {}
            case PRIORITY -> {
                for (int j = running.size() - 2; j >= 0; j--) {
                    KvRequest c = running.get(j);
                    KvRequest b = running.get(best);
                    if (c.priority() > b.priority() || (c.priority() == b.priority() && c.arrival() > b.arrival())) {
                        best = j;
                    }
                }
            }
            case LEAST_COMPUTED -> {
                for (int j = running.size() - 2; j >= 0; j--) {
                    if (running.get(j).numComputed() < running.get(best).numComputed()) {
                        best = j;
                    }
                }
            }
        }
        return best;
    }

    /** Removes a request's grant from this step's batch; returns the tokens given back. */
    private int rollBack(KvRequest victim) {
        for (int j = 0; j < batchSize; j++) {
            if (batch[j] == victim) {
                int n = batchTokens[j];
                System.arraycopy(batch, j + 1, batch, j, batchSize - j - 1);
                System.arraycopy(batchTokens, j + 1, batchTokens, j, batchSize - j - 1);
                batch[--batchSize] = null;
                return n;
            }
        }
        return 0;
    }

    private void add(KvRequest r, int n) {
        if (batchSize == batch.length) {
            batch = Arrays.copyOf(batch, batchSize * 2);
            batchTokens = Arrays.copyOf(batchTokens, batchSize * 2);
        }
        batch[batchSize] = r;
        batchTokens[batchSize++] = n;
    }

    /** Removes a finished request from the running list and frees its blocks. */
    public void finish(KvRequest r) {
        if (!running.remove(r)) {
            throw new IllegalArgumentException("request " + r.id() + " is not running");
        }
        manager.free(r);
    }
}
