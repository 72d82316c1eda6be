package io.gpumem.policy;

import java.util.List;

/**
 * The free blocks of one stitch arena, ordered by (size, address), for best-fit lookups without garbage: a treap
 * whose nodes are the blocks themselves (their {@code left}, {@code right} and {@code priority} fields), so adding
 * or removing a block allocates nothing, unlike a {@code TreeSet} entry per insertion.
 *
 * <p>Invariants: in-order traversal is strictly increasing in (size, address) (addresses are unique within an
 * arena); every node's priority is at least its children's, which keeps the expected depth logarithmic. The
 * priorities come from a fixed-seed generator, so a run's decisions are deterministic. A block's size or address
 * must not change while it is in the tree: callers remove it first. Design notes: policies.md §2.1, §2.2.
 */
final class FreeBlockTree {
    private StitchBlock root;
    private int count;
    private long seed = 0x2545F4914F6CDD1DL;

    int size() {
        return count;
    }

    void add(StitchBlock b) {
        long x = seed;
        x ^= x << 13;
        x ^= x >>> 7;
        x ^= x << 17;
        seed = x;
        b.priority = (int) (x >>> 33);
        b.left = null;
        b.right = null;
        root = insert(root, b);
        count++;
    }

    void remove(StitchBlock b) {
        root = remove(root, b);
        b.left = null;
        b.right = null;
        count--;
    }

    /** The smallest block (lowest address among equals) of at least {@code size} bytes, or null. */
    StitchBlock ceiling(long size) {
        StitchBlock best = null;
        for (StitchBlock t = root; t != null; ) {
            if (t.size >= size) {
                best = t;
                t = t.left;
            } else {
                t = t.right;
            }
        }
        return best;
    }

    /**
     * Gives block b the key (size, addr) without moving it when that keeps the in-order sequence (the new key lies
     * strictly between b's neighbours in the order): one read-only descent instead of a removal and an insertion.
     * Returns false, changing nothing, when b would have to move.
     */
    boolean rekeyInPlace(StitchBlock b, long size, long addr) {
        StitchBlock pred = null;
        StitchBlock succ = null;
        for (StitchBlock t = root; t != null; ) {
            if (t == b) {
                // b's neighbours in order: the largest key of its left subtree, the smallest of its right one
                for (StitchBlock l = t.left; l != null; l = l.right) {
                    pred = l;
                }
                for (StitchBlock r = t.right; r != null; r = r.left) {
                    succ = r;
                }
                break;
            }
            if (less(b, t)) {
                succ = t;
                t = t.left;
            } else {
                pred = t;
                t = t.right;
            }
        }
        if ((pred != null && !lessKey(pred.size, pred.addr, size, addr))
                || (succ != null && !lessKey(size, addr, succ.size, succ.addr))) {
            return false;
        }
        b.size = size;
        b.addr = addr;
        return true;
    }

    private static boolean lessKey(long size, long addr, long otherSize, long otherAddr) {
        return size != otherSize ? size < otherSize : addr < otherAddr;
    }

    /** Appends the blocks in (size, address) order (diagnostics and invariant checks, not the hot path). */
    void addTo(List<StitchBlock> out) {
        addTo(root, out);
    }

    private static void addTo(StitchBlock t, List<StitchBlock> out) {
        if (t != null) {
            addTo(t.left, out);
            out.add(t);
            addTo(t.right, out);
        }
    }

    /** Whether the tree is ordered and heap-ordered throughout (for the invariant checker). */
    boolean wellFormed() {
        return wellFormed(root, null, null);
    }

    private static boolean wellFormed(StitchBlock t, StitchBlock lo, StitchBlock hi) {
        if (t == null) {
            return true;
        }
        if ((lo != null && !less(lo, t)) || (hi != null && !less(t, hi))) {
            return false;
        }
        if ((t.left != null && t.left.priority > t.priority) || (t.right != null && t.right.priority > t.priority)) {
            return false;
        }
        return wellFormed(t.left, lo, t) && wellFormed(t.right, t, hi);
    }

    private static boolean less(StitchBlock a, StitchBlock b) {
        return a.size != b.size ? a.size < b.size : a.addr < b.addr;
    }

    private static StitchBlock insert(StitchBlock t, StitchBlock b) {
        if (t == null) {
            return b;
        }
        if (less(b, t)) {
            t.left = insert(t.left, b);
            if (t.left.priority > t.priority) {
                StitchBlock l = t.left;
                t.left = l.right;
                l.right = t;
                return l;
            }
        } else {
            t.right = insert(t.right, b);
            if (t.right.priority > t.priority) {
                StitchBlock r = t.right;
                t.right = r.left;
                r.left = t;
                return r;
            }
        }
        return t;
    }

    private static StitchBlock remove(StitchBlock t, StitchBlock b) {
        if (t == null) {
            throw new IllegalStateException("block 0x" + Long.toHexString(b.addr) + " is not in the free tree");
        }
        if (t == b) {
            return merge(t.left, t.right);
        }
        if (less(b, t)) {
            t.left = remove(t.left, b);
        } else {
            t.right = remove(t.right, b);
        }
        return t;
    }

    private static StitchBlock merge(StitchBlock a, StitchBlock b) {
        if (a == null) {
            return b;
        }
        if (b == null) {
            return a;
        }
        if (a.priority > b.priority) {
            a.right = merge(a.right, b);
            return a;
        }
        b.left = merge(a, b.left);
        return b;
    }
}
