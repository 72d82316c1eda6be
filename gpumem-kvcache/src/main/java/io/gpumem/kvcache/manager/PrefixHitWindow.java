package io.gpumem.kvcache.manager;

/**
 * Prefix-cache hit rate over the most recent N lookups (vLLM's {@code PrefixCachingMetrics}): a ring of
 * (queried tokens, hit tokens) per request with running sums; rate = hits / queries in the window. Only the lookups of
 * requests never preempted are recorded, as vLLM records them.
 */
final class PrefixHitWindow {
    private final long[] queried;
    private final long[] hits;
    private int next;
    private int filled;
    private long sumQueried;
    private long sumHits;
    private long totalQueried;
    private long totalHits;

    PrefixHitWindow(int size) {
        queried = new long[size];
        hits = new long[size];
    }

    void record(long queriedTokens, long hitTokens) {
        if (filled == queried.length) {
            sumQueried -= queried[next];
            sumHits -= hits[next];
        } else {
            filled++;
        }
        queried[next] = queriedTokens;
        hits[next] = hitTokens;
        sumQueried += queriedTokens;
        sumHits += hitTokens;
        totalQueried += queriedTokens;
        totalHits += hitTokens;
        next = (next + 1) % queried.length;
    }

    double rate() {
        return sumQueried == 0 ? 0.0 : (double) sumHits / sumQueried;
    }

    long totalQueried() {
        return totalQueried;
    }

    long totalHits() {
        return totalHits;
    }
}
