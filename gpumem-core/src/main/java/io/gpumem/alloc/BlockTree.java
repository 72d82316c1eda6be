package io.gpumem.alloc;

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
 * <p>Invariants: the in-order sequence is strictly increasing; every node's priority ≥ its children's;
 * {@code b.tree == this} exactly for the nodes in this tree. A block must not be mutated in a way that changes
 * its order key (stream, size, ptr) while it is in a tree.
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
    /** The {@link SizeOrderedBlocks} this tree is a size class of, or null for a stand-alone tree. */
    Object owner;
    private Block root;
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
        return b.tree == this;
    }

    /** Sign of (b − key) in this tree's order. */
    private int compare(Block b, long stream, long size, long ptr) {
        int c = Long.compareUnsigned(b.stream, stream);
        if (c != 0) {
            return c;
        }
        if (bySize && b.size != size) {
            return b.size < size ? -1 : 1;
        }
        return Long.compareUnsigned(b.ptr, ptr);
    }

    private int nextPriority() {
        int x = seed;
        x ^= x << 13;
        x ^= x >>> 17;
        x ^= x << 5;
        seed = x;
        return x;
    }

    /** Inserts {@code b}; it must not be in any tree and its key must not be present. */
    void insert(Block b) {
        if (b.tree != null) {
            throw new IllegalStateException("block already in a tree: " + b);
        }
        b.left = null;
        b.right = null;
        b.priority = nextPriority();
        if (root == null) {
            root = b;
            b.parent = null;
        } else {
            Block cur = root;
            while (true) {
                int c = compare(cur, b.stream, b.size, b.ptr);
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
            while (b.parent != null && b.priority > b.parent.priority) {
                if (b == b.parent.left) {
                    rotateRight(b.parent);
                } else {
                    rotateLeft(b.parent);
                }
            }
        }
        b.tree = this;
        count++;
    }

    /** Removes {@code b}, which must be in this tree. */
    void remove(Block b) {
        if (b.tree != this) {
            throw new IllegalStateException("block not in this tree: " + b);
        }
        while (b.left != null && b.right != null) {
            if (b.left.priority > b.right.priority) {
                rotateRight(b);
            } else {
                rotateLeft(b);
            }
        }
        Block child = b.left != null ? b.left : b.right;
        replaceChild(b.parent, b, child);
        b.left = null;
        b.right = null;
        b.parent = null;
        b.tree = null;
        count--;
    }

    private void replaceChild(Block parent, Block old, Block child) {
        if (child != null) {
            child.parent = parent;
        }
        if (parent == null) {
            root = child;
        } else if (parent.left == old) {
            parent.left = child;
        } else {
            parent.right = child;
        }
    }

    private void rotateRight(Block p) {
        Block x = p.left;
        p.left = x.right;
        if (x.right != null) {
            x.right.parent = p;
        }
        replaceChild(p.parent, p, x);
        x.right = p;
        p.parent = x;
    }

    private void rotateLeft(Block p) {
        Block x = p.right;
        p.right = x.left;
        if (x.left != null) {
            x.left.parent = p;
        }
        replaceChild(p.parent, p, x);
        x.left = p;
        p.parent = x;
    }

    /** The first block not less than the key (stream, size, ptr); size is ignored in address order. */
    Block ceiling(long stream, long size, long ptr) {
        Block cur = root;
        Block best = null;
        while (cur != null) {
            if (compare(cur, stream, size, ptr) >= 0) {
                best = cur;
                cur = cur.left;
            } else {
                cur = cur.right;
            }
        }
        return best;
    }

    Block first() {
        Block cur = root;
        if (cur == null) {
            return null;
        }
        while (cur.left != null) {
            cur = cur.left;
        }
        return cur;
    }

    Block last() {
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

    /** Copies the blocks in order into a new list (for passes that mutate the tree while walking). */
    java.util.ArrayList<Block> toList() {
        java.util.ArrayList<Block> out = new java.util.ArrayList<>(count);
        for (Block b = first(); b != null; b = next(b)) {
            out.add(b);
        }
        return out;
    }
}
