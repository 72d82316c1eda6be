package io.gpumem.policy;

/**
 * The mapped runs of one stitch arena that no live block touches, as an intrusive doubly linked list over page
 * indices: newest at the head, the oldest (the one stealing takes first) at the tail. Each run is listed once, by
 * its start page. Two int arrays sized to the arena's pages hold the links, so pushing and removing allocate
 * nothing; -1 ends the list.
 *
 * <p>Invariant (checked by {@link StitchInvariants}): walking {@link #next} from {@link #head} visits every listed
 * run once and ends at {@link #tail}; {@code prev} mirrors {@code next}.
 */
final class UnpinnedPages {
    private final int[] prev;
    private final int[] next;
    private int head = -1;
    private int tail = -1;

    UnpinnedPages(int pages) {
        prev = new int[pages];
        next = new int[pages];
    }

    /** Lists the run starting at page {@code p} as the newest. */
    void push(int p) {
        prev[p] = -1;
        next[p] = head;
        if (head >= 0) {
            prev[head] = p;
        } else {
            tail = p;
        }
        head = p;
    }

    /** Unlists the run starting at page {@code p}, which must be listed. */
    void remove(int p) {
        int pr = prev[p];
        int nx = next[p];
        if (pr >= 0) {
            next[pr] = nx;
        } else {
            head = nx;
        }
        if (nx >= 0) {
            prev[nx] = pr;
        } else {
            tail = pr;
        }
    }

    /** The newest listed run's start page, or -1. */
    int head() {
        return head;
    }

    /** The oldest listed run's start page, or -1. */
    int tail() {
        return tail;
    }

    /** The start page of the run listed after {@code p} (older), or -1. */
    int next(int p) {
        return next[p];
    }
}
