package io.gpumem.alloc;

import java.util.ArrayList;
import java.util.List;

/**
 * An ordered set of {@link Block}s with the links stored in the blocks themselves (an intrusive treap), so
 * that inserting and removing allocate nothing. It stands in for the {@code std::set<Block*, Comparator>} of
 * PyTorch's {@code BlockPool}: directly for unmapped blocks, and as the per-size-class trees inside
 * {@link SizeOrderedBlocks} for free blocks.
 *
 * <h2>Order</h2>
 * {@link Order#BY_SIZE}: stream handle compared as unsigned, then size, then address (unsigned) —
 * {@code BlockComparatorSize}, used for the free blocks of a size class. {@link Order#BY_ADDRESS}: stream (unsigned), then
 * address — {@code BlockComparatorAddress}, used for unmapped blocks of expandable segments.
 *
 * <h2>Algorithm</h2>
 * A treap: a binary search tree on the order above that is also a max-heap on a random priority drawn at
 * insertion, which keeps the expected depth logarithmic. Insert descends to a leaf and rotates up while the
 * heap property is violated; remove rotates the node down to a leaf and unlinks it. Parent links make
 * in-order successor and predecessor O(1) amortised, which the best-fit walks use.
 *
 * <h2>Roots in an array</h2>
 * The algorithms are static and keep a tree's root in a slot of a {@code Block[]}: a stand-alone tree holds a
 * one-slot array, and {@link SizeOrderedBlocks} keeps the roots of all the size classes of a stream in one array,
 * so that reaching a class's tree is one array load instead of a load of a tree object and then of its root
 * (a cache miss on every free and malloc, measured: issue 13). The caller draws the priority
 * ({@link #nextPriority}) and marks which container holds the block ({@code b.container}).
 *
 * <p>Invariants: the in-order sequence is strictly increasing; every node's priority ≥ its children's; a root's
 * {@code parent} is null; {@code b.container == this} exactly for the nodes in a stand-alone tree. A block must
 * not be mutated in a way that changes its order key (stream, size, ptr) while it is in a tree.
 */
final class BlockTree {
    /** The two orders PyTorch's pools keep blocks in. */
    enum Order {
        /** {@code BlockComparatorSize}: stream, size, address. */
        BY_SIZE,
        /** {@code BlockComparatorAddress}: stream, address. */
        BY_ADDRESS
    }

    /** {@code order == BY_SIZE}, as a plain flag for the comparison on the hot path. */
    private final boolean bySize;
    /** Slot 0 holds the root. */
    private final Block[] root = new Block[1];
    private int count;
    private int seed = 0x2545F491;

    BlockTree(Order order) {
        this.bySize = order == Order.BY_SIZE;
    }

    int size() {
        return count;
    }

    boolean isEmpty() {
        return count == 0;
    }

    boolean contains(Block b) {
        return b.container == this;
    }

    /** Inserts {@code b}; it must not be in any tree and its key must not be present. */
    void insert(Block b) {
        if (b.container != null) {
            throw new IllegalStateException("block already in a tree: " + b);
        }
        seed = nextPriority(seed);
        b.priority = seed;
        link(root, 0, b, bySize);
        b.container = this;
        count++;
    }

    /** Removes {@code b}, which must be in this tree. */
    void remove(Block b) {
        if (b.container != this) {
            throw new IllegalStateException("block not in this tree: " + b);
        }
        unlink(root, 0, b);
        b.container = null;
        count--;
    }

    /** The first block not less than the key (stream, size, ptr); size is ignored in address order. */
    Block ceiling(long stream, long size, long ptr) {
        return ceiling(root[0], stream, size, ptr, bySize);
    }

    Block first() {
        return leftmost(root[0]);
    }

    Block last() {
        return rightmost(root[0]);
    }

    /** Copies the blocks in order into a new list (for passes that mutate the tree while walking). */
    List<Block> toList() {
        List<Block> out = new ArrayList<>(count);
        for (Block b = first(); b != null; b = next(b)) {
            out.add(b);
        }
        return out;
    }

    // ------------------------------------------------------------ the treap, on a root slot

    /** The next value of a xorshift32 sequence: a block's random priority. */
    static int nextPriority(int x) {
        x ^= x << 13;
        x ^= x >>> 17;
        x ^= x << 5;
        return x;
    }

    /** Sign of (b − key) in the order ({@code bySize}: stream, size, address; else stream, address). */
    private static int compare(Block b, long stream, long size, long ptr, boolean bySize) {
        int c = Long.compareUnsigned(b.stream, stream);
        if (c != 0) {
            return c;
        }
        if (bySize && b.size != size) {
            return b.size < size ? -1 : 1;
        }
        return Long.compareUnsigned(b.ptr, ptr);
    }

    /** Links {@code b} (priority already drawn) into the tree rooted at {@code roots[slot]}. */
    static void link(Block[] roots, int slot, Block b, boolean bySize) {
        b.left = null;
        b.right = null;
        Block cur = roots[slot];
        if (cur == null) {
            roots[slot] = b;
            b.parent = null;
            return;
        }
        long stream = b.stream;
        long size = b.size;
        long ptr = b.ptr;
        while (true) {
            int c = compare(cur, stream, size, ptr, bySize);
            if (c > 0) {
                if (cur.left == null) {
                    cur.left = b;
                    break;
                }
                cur = cur.left;
            } else if (c < 0) {
                if (cur.right == null) {
                    cur.right = b;
                    break;
                }
                cur = cur.right;
            } else {
                throw new IllegalStateException("duplicate key in tree: " + b);
            }
        }
        b.parent = cur;
        int priority = b.priority;
        while (b.parent != null && priority > b.parent.priority) {
            if (b == b.parent.left) {
                rotateRight(roots, slot, b.parent);
            } else {
                rotateLeft(roots, slot, b.parent);
            }
        }
    }

    /** Unlinks {@code b} from the tree rooted at {@code roots[slot]}, which must hold it. */
    static void unlink(Block[] roots, int slot, Block b) {
        while (b.left != null && b.right != null) {
            if (b.left.priority > b.right.priority) {
                rotateRight(roots, slot, b);
            } else {
                rotateLeft(roots, slot, b);
            }
        }
        Block child = b.left != null ? b.left : b.right;
        replaceChild(roots, slot, b.parent, b, child);
        b.left = null;
        b.right = null;
        b.parent = null;
    }

    private static void replaceChild(Block[] roots, int slot, Block parent, Block old, Block child) {
        if (child != null) {
            child.parent = parent;
        }
        if (parent == null) {
            roots[slot] = child;
        } else if (parent.left == old) {
            parent.left = child;
        } else {
            parent.right = child;
        }
    }

    private static void rotateRight(Block[] roots, int slot, Block p) {
        Block x = p.left;
        p.left = x.right;
        if (x.right != null) {
            x.right.parent = p;
        }
        replaceChild(roots, slot, p.parent, p, x);
        x.right = p;
        p.parent = x;
    }

    private static void rotateLeft(Block[] roots, int slot, Block p) {
        Block x = p.right;
        p.right = x.left;
        if (x.left != null) {
            x.left.parent = p;
        }
        replaceChild(roots, slot, p.parent, p, x);
        x.left = p;
        p.parent = x;
    }

    /** The first block not less than the key under {@code root}, or null. */
    static Block ceiling(Block root, long stream, long size, long ptr, boolean bySize) {
        Block cur = root;
        Block best = null;
        while (cur != null) {
            if (compare(cur, stream, size, ptr, bySize) >= 0) {
                best = cur;
                cur = cur.left;
            } else {
                cur = cur.right;
            }
        }
        return best;
    }

    /** The smallest block under {@code root}, or null. */
    static Block leftmost(Block root) {
        Block cur = root;
        if (cur == null) {
            return null;
        }
        while (cur.left != null) {
            cur = cur.left;
        }
        return cur;
    }

    /** The largest block under {@code root}, or null. */
    static Block rightmost(Block root) {
        Block cur = root;
        if (cur == null) {
            return null;
        }
        while (cur.right != null) {
            cur = cur.right;
        }
        return cur;
    }

    /** In-order successor of {@code b} (which must be in this tree), or null. */
    static Block next(Block b) {
        if (b.right != null) {
            Block cur = b.right;
            while (cur.left != null) {
                cur = cur.left;
            }
            return cur;
        }
        Block cur = b;
        Block p = b.parent;
        while (p != null && p.right == cur) {
            cur = p;
            p = p.parent;
        }
        return p;
    }

    /** In-order predecessor of {@code b} (which must be in this tree), or null. */
    static Block prev(Block b) {
        if (b.left != null) {
            Block cur = b.left;
            while (cur.right != null) {
                cur = cur.right;
            }
            return cur;
        }
        Block cur = b;
        Block p = b.parent;
        while (p != null && p.left == cur) {
            cur = p;
            p = p.parent;
        }
        return p;
    }
}
