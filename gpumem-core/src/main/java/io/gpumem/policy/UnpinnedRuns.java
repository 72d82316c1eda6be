package io.gpumem.policy;

import java.util.Arrays;

/**
 * The mapped pages of one stitch arena that no block touches, as <em>runs</em>: a run is a range of pages
 * {@code lo..hi}, all mapped, made of whole mappings, that became unpinned together (the pages a freed block
 * touched alone, or, in a fixed arena, one mapping). Runs are kept in the order they became unpinned, newest at
 * the head, oldest at the tail; the mappings of one run count as unpinned in address order, so the oldest unpinned
 * mapping of the arena is the first mapping of the tail run, and stealing takes it first. Listing or unlisting a
 * run, or cutting pages off either end of one, is O(1) whatever its length: a freed block's pages are listed by
 * one {@link #push}, not page by page.
 *
 * <p>A run is known by its first page {@code lo}: four int arrays sized to the arena's covered pages hold, at {@code lo},
 * the run's last page plus one (0 where no run starts) and its links in the order, and, at {@code hi}, its first
 * page plus one (0 where no run ends), so nothing is allocated. -1 ends the order.
 *
 * <p>Invariant (checked by {@link StitchInvariants}): runs are disjoint; walking {@link #next} from {@link #head}
 * visits every run once and ends at {@link #tail}; {@code prev} mirrors {@code next}; {@link #startEndingAt}
 * and {@link #end} mirror each other.
 */
final class UnpinnedRuns {
    private int[] prev;
    private int[] next;
    /** At a run's first page: its last page + 1; 0 elsewhere. */
    private int[] endAt;
    /** At a run's last page: its first page + 1; 0 elsewhere. */
    private int[] startAt;

    private int head = -1;
    private int tail = -1;

    UnpinnedRuns(int pages) {
        prev = new int[pages];
        next = new int[pages];
        endAt = new int[pages];
        startAt = new int[pages];
    }

    /** Covers {@code pages} pages (more than now), none of the new ones in a run, as the arena's arrays grow. */
    void grow(int pages) {
        prev = Arrays.copyOf(prev, pages);
        next = Arrays.copyOf(next, pages);
        endAt = Arrays.copyOf(endAt, pages);
        startAt = Arrays.copyOf(startAt, pages);
    }

    /** Lists pages {@code lo..hi}, which must be listed in no run, as the newest run. */
    void push(int lo, int hi) {
        endAt[lo] = hi + 1;
        startAt[hi] = lo + 1;
        prev[lo] = -1;
        next[lo] = head;
        setPrev(head, lo);
        head = lo;
    }

    /** Unlists the run starting at page {@code lo}, which must be one. */
    void remove(int lo) {
        int pr = prev[lo];
        int nx = next[lo];
        setNext(pr, nx);
        setPrev(nx, pr);
        startAt[endAt[lo] - 1] = 0;
        endAt[lo] = 0;
    }

    /**
     * Unlists the pages before {@code newLo} of the run starting at page {@code lo}; the rest keeps the run's
     * place in the order. The whole run when {@code newLo} is past its end.
     */
    void cutFront(int lo, int newLo) {
        int hi = endAt[lo] - 1;
        if (newLo > hi) {
            remove(lo);
            return;
        }
        int pr = prev[lo];
        int nx = next[lo];
        prev[newLo] = pr;
        next[newLo] = nx;
        setNext(pr, newLo);
        setPrev(nx, newLo);
        endAt[newLo] = hi + 1;
        endAt[lo] = 0;
        startAt[hi] = newLo + 1;
    }

    /** Unlists the pages after {@code newHi} of the run starting at page {@code lo} (the whole run if before it). */
    void cutBack(int lo, int newHi) {
        if (newHi < lo) {
            remove(lo);
            return;
        }
        startAt[endAt[lo] - 1] = 0;
        endAt[lo] = newHi + 1;
        startAt[newHi] = lo + 1;
    }

    /** Links run {@code to} after run {@code pr} in the order (at the head when {@code pr} is -1). */
    private void setNext(int pr, int to) {
        if (pr >= 0) {
            next[pr] = to;
        } else {
            head = to;
        }
    }

    /** Links run {@code to} before run {@code nx} in the order (at the tail when {@code nx} is -1). */
    private void setPrev(int nx, int to) {
        if (nx >= 0) {
            prev[nx] = to;
        } else {
            tail = to;
        }
    }

    /** The last page of the run starting at page {@code lo}, or -1 when no run starts there. */
    int end(int lo) {
        return endAt[lo] - 1;
    }

    /** The first page of the run ending at page {@code hi}, or -1 when no run ends there. */
    int startEndingAt(int hi) {
        return startAt[hi] - 1;
    }

    /** The newest run's first page, or -1. */
    int head() {
        return head;
    }

    /** The oldest run's first page, or -1. */
    int tail() {
        return tail;
    }

    /** The first page of the run listed after the one starting at {@code lo} (older), or -1. */
    int next(int lo) {
        return next[lo];
    }

    /** The first page of the run listed before the one starting at {@code lo} (newer), or -1. */
    int prev(int lo) {
        return prev[lo];
    }
}
