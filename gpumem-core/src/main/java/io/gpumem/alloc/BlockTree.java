package io.gpumem.alloc;

import java.util.ArrayList;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * An ordered set of blocks with the links stored in the blocks themselves (an intrusive treap), so that
 * inserting and removing allocate nothing. The project's one balanced tree: the exact allocator uses it for the
 * {@code std::set<Block*, Comparator>} of PyTorch's {@code BlockPool} (directly for unmapped blocks, and as the
 * per-size-class trees inside {@link SizeOrderedBlocks} for free blocks), the stitch policy for the free blocks
 * of an arena. Any {@link OrderedBlock} subclass can be kept; the algorithms read only its fields (no virtual
 * call on the hot path, so one compiled copy serves every block type).
 *
 * <h2>Order</h2>
 * {@link Order#BY_SIZE}: stream handle compared as unsigned, then size, then address (unsigned) —
 * {@code BlockComparatorSize}, used for free blocks (a stitch arena's blocks all share the arena's stream, so
 * there it is (size, address)). {@link Order#BY_ADDRESS}: stream (unsigned), then address —
 * {@code BlockComparatorAddress}, used for unmapped blocks of expandable segments.
 *
 * <h2>Algorithm</h2>
 * A treap: a binary search tree on the order above that is also a max-heap on a random priority drawn at
 * insertion, which keeps the expected depth logarithmic. Insert descends to a leaf and rotates up while the
 * heap property is violated; remove rotates the node down to a leaf and unlinks it. Parent links make
 * in-order successor and predecessor O(1) amortised, which the best-fit walks and {@link #rekeyInPlace} use.
 * Priorities come from a fixed-seed xorshift sequence, so runs are deterministic.
 *
 * <h2>Roots in an array</h2>
 * The algorithms are static and keep a tree's root in a slot of an array: a stand-alone tree holds a
 * one-slot array, and {@link SizeOrderedBlocks} keeps the roots of all the size classes of a stream in one array,
 * so that reaching a class's tree is one array load instead of a load of a tree object and then of its root
 * (a cache miss on every free and malloc, measured: issue 13). Every such array is an {@code OrderedBlock[]} at
 * run time, whatever block type it holds: the JIT checks each store into it against the array's type as profiled,
 * and a second array type met after the first compilation (a {@code Block[]} beside the one-slot arrays) cost a
 * deoptimisation and a recompilation of the allocator's hot methods. The caller draws the priority
 * ({@link #nextPriority}) and marks which container holds the block ({@code b.container}).
 *
 * <p>Invariants (checked by {@link #checkShape}): the in-order sequence is strictly increasing; every node's
 * priority ≥ its children's; a child's {@code parent} is its parent and a root's is null;
 * {@code b.container == this} exactly for the nodes in a stand-alone tree. A block's order key (stream, size,
 * ptr) must not change while it is in a tree, except through {@link #rekeyInPlace}.
 *
 * @param <B> the block type kept
 */
public final class BlockTree<B extends OrderedBlock<B>> {
    /** The two orders PyTorch's pools keep blocks in. */
    public enum Order {
        /** {@code BlockComparatorSize}: stream, size, address. */
        BY_SIZE,
        /** {@code BlockComparatorAddress}: stream, address. */
        BY_ADDRESS
    }

    /** {@code order == BY_SIZE}, as a plain flag for the comparison on the hot path. */
    private final boolean bySize;
    /** Slot 0 holds the root. */
    private final B[] root;

    private int count;
    private int seed = 0x2545F491;

    @SuppressWarnings("unchecked")
    public BlockTree(Order order) {
        this.bySize = order == Order.BY_SIZE;
        this.root = (B[]) new OrderedBlock<?>[1];
    }

    public int size() {
        return count;
    }

    public boolean isEmpty() {
        return count == 0;
    }

    public boolean contains(B b) {
        return b.container == this;
    }

    /** Inserts {@code b}; it must not be in any tree and its key must not be present. */
    public void insert(B b) {
        if (b.container != null) {
            throw new IllegalStateException("block already in a tree: " + b);
        }
        seed = nextPriority(seed);
        b.priority = seed;
        link(root, 0, b, bySize);
        b.container = this;
        count++;
    }

    /**
     * Inserts {@code b} unless its range {@code [ptr, ptr + size)} meets the range of a block of its stream already
     * here; returns whether it was inserted. For an address-ordered tree whose blocks never overlap (a device's
     * handed-out ranges): the one descent that finds b's leaf passes both of its neighbours, so the test costs no
     * search of its own (a ceiling, a predecessor and then an insert walked the tree three times).
     */
    public boolean insertIfDisjoint(B b) {
        if (bySize) {
            throw new IllegalStateException("ranges are kept in address order");
        }
        if (b.container != null) {
            throw new IllegalStateException("block already in a tree: " + b);
        }
        B cur = root[0];
        B leaf = null;
        B below = null;
        B above = null;
        while (cur != null) {
            leaf = cur;
            int c = compare(cur, b.stream, 0, b.ptr, false);
            if (c == 0) {
                return false;
            }
            if (c > 0) {
                above = cur;
                cur = cur.left;
            } else {
                below = cur;
                cur = cur.right;
            }
        }
        if ((below != null && below.stream == b.stream && below.ptr + below.size > b.ptr)
                || (above != null && above.stream == b.stream && above.ptr < b.ptr + b.size)) {
            return false;
        }
        seed = nextPriority(seed);
        b.priority = seed;
        b.left = null;
        b.right = null;
        b.parent = leaf;
        if (leaf == null) {
            root[0] = b;
        } else if (same(leaf, above)) { // the descent's last step went left
            leaf.left = b;
        } else {
            leaf.right = b;
        }
        siftUp(root, 0, b);
        b.container = this;
        count++;
        return true;
    }

    /** Removes {@code b}, which must be in this tree. */
    public void remove(B b) {
        if (b.container != this) {
            throw new IllegalStateException("block not in this tree: " + b);
        }
        unlink(root, 0, b);
        b.container = null;
        count--;
    }

    /** The first block not less than the key (stream, size, ptr), or null; size is ignored in address order. */
    public @Nullable B ceiling(long stream, long size, long ptr) {
        return ceiling(root[0], stream, size, ptr, bySize);
    }

    /** The block just before {@code b} (which must be in this tree) in the tree's order, or null. */
    public @Nullable B previous(B b) {
        if (b.container != this) {
            throw new IllegalStateException("block not in this tree: " + b);
        }
        return prev(b);
    }

    public @Nullable B first() {
        return leftmost(root[0]);
    }

    public @Nullable B last() {
        return rightmost(root[0]);
    }

    /** Copies the blocks in order into a new list (for passes that mutate the tree while walking). */
    public List<B> toList() {
        List<B> out = new ArrayList<>(count);
        for (B b = first(); b != null; b = next(b)) {
            out.add(b);
        }
        return out;
    }

    /**
     * Gives {@code b} (in this tree) the key (its stream, {@code size}, {@code ptr}) without moving it when that
     * keeps the in-order sequence, i.e. the new key lies strictly between b's neighbours: a split or a merge that
     * keeps a block's rank costs two neighbour lookups instead of a removal and an insertion. Returns false,
     * changing nothing, when b would have to move.
     */
    public boolean rekeyInPlace(B b, long size, long ptr) {
        if (b.container != this) {
            throw new IllegalStateException("block not in this tree: " + b);
        }
        B before = prev(b);
        if (before != null && compare(before, b.stream, size, ptr, bySize) >= 0) {
            return false;
        }
        B after = next(b);
        if (after != null && compare(after, b.stream, size, ptr, bySize) <= 0) {
            return false;
        }
        b.size = size;
        b.ptr = ptr;
        return true;
    }

    /**
     * Checks this tree's invariants (order, heap, parent links, membership marks, count) and adds a line to
     * {@code violations} for each broken one, prefixed with {@code name}. For the allocators' invariant checkers;
     * not the hot path.
     */
    public void checkShape(String name, List<String> violations) {
        int seen = checkShape(root[0], null, this, bySize, name, violations);
        B b = first();
        if (b != null) {
            for (B n = next(b); n != null; b = n, n = next(n)) {
                if (compare(n, b.stream, b.size, b.ptr, bySize) <= 0) {
                    violations.add(name + ": " + n + " does not follow " + b + " in order");
                }
            }
        }
        if (seen != count) {
            violations.add(name + ": holds " + seen + " blocks, counts " + count);
        }
    }

    /** {@link #checkShape} for a tree rooted at {@code top} whose nodes must have {@code container == owner}. */
    static <B extends OrderedBlock<B>> int checkShape(
            @Nullable B top, @Nullable B parent, Object owner, boolean bySize, String name, List<String> violations) {
        if (top == null) {
            return 0;
        }
        if (!same(top.parent, parent)) {
            violations.add(name + ": wrong parent link at " + top);
        }
        if (!same(top.container, owner)) {
            violations.add(name + ": " + top + " not marked as held by this tree");
        }
        if (top.left != null) {
            checkChild(top, top.left, true, bySize, name, violations);
        }
        if (top.right != null) {
            checkChild(top, top.right, false, bySize, name, violations);
        }
        int n = 1 + checkShape(top.left, top, owner, bySize, name, violations);
        n += checkShape(top.right, top, owner, bySize, name, violations);
        return n;
    }

    private static <B extends OrderedBlock<B>> void checkChild(
            B top, B child, boolean left, boolean bySize, String name, List<String> violations) {
        if (child.priority > top.priority) {
            violations.add(name + ": heap order broken under " + top);
        }
        int c = compare(child, top.stream, top.size, top.ptr, bySize);
        if (left ? c >= 0 : c <= 0) {
            violations.add(name + ": " + child + " out of order under " + top);
        }
    }

    // ------------------------------------------------------------ the treap, on a root slot

    /**
     * Whether {@code a} and {@code b} are the same node (or the same container): identity is what the links mean,
     * and no block type has any other equality ({@code Block} and the stitch policy's block are final and keep
     * Object's equals). Error Prone's ReferenceEquality cannot prove that, because {@link OrderedBlock} has to stay
     * open to the policy package's block (outside a named module a sealed class cannot permit a subclass in another
     * package); this is the one place that says so. Inlined by the JIT: the links are compared as before.
     */
    @SuppressWarnings("ReferenceEquality")
    private static boolean same(@Nullable Object a, @Nullable Object b) {
        return a == b;
    }

    /** The next value of a xorshift32 sequence: a block's random priority. */
    static int nextPriority(int x) {
        x ^= x << 13;
        x ^= x >>> 17;
        x ^= x << 5;
        return x;
    }

    /** Sign of (b − key) in the order ({@code bySize}: stream, size, address; else stream, address). */
    private static <B extends OrderedBlock<B>> int compare(B b, long stream, long size, long ptr, boolean bySize) {
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
    @SuppressWarnings("unchecked")
    static <B extends OrderedBlock<B>> void link(OrderedBlock<?>[] roots, int slot, B b, boolean bySize) {
        b.left = null;
        b.right = null;
        B cur = (B) roots[slot];
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
        siftUp(roots, slot, b);
    }

    /** Rotates the newly linked leaf {@code b} up while its priority beats its parent's (the heap order). */
    private static <B extends OrderedBlock<B>> void siftUp(OrderedBlock<?>[] roots, int slot, B b) {
        int priority = b.priority;
        for (B p = b.parent; p != null && priority > p.priority; p = b.parent) {
            if (same(b, p.left)) {
                rotateRight(roots, slot, p, b);
            } else {
                rotateLeft(roots, slot, p, b);
            }
        }
    }

    /** Unlinks {@code b} from the tree rooted at {@code roots[slot]}, which must hold it. */
    static <B extends OrderedBlock<B>> void unlink(OrderedBlock<?>[] roots, int slot, B b) {
        for (B l = b.left, r = b.right; l != null && r != null; l = b.left, r = b.right) {
            if (l.priority > r.priority) {
                rotateRight(roots, slot, b, l);
            } else {
                rotateLeft(roots, slot, b, r);
            }
        }
        B child = b.left != null ? b.left : b.right;
        replaceChild(roots, slot, b.parent, b, child);
        b.left = null;
        b.right = null;
        b.parent = null;
    }

    private static <B extends OrderedBlock<B>> void replaceChild(
            OrderedBlock<?>[] roots, int slot, @Nullable B parent, B old, @Nullable B child) {
        if (child != null) {
            child.parent = parent;
        }
        if (parent == null) {
            roots[slot] = child;
        } else if (same(parent.left, old)) {
            parent.left = child;
        } else {
            parent.right = child;
        }
    }

    /** Rotates {@code p}'s left child {@code x} up into p's place. */
    private static <B extends OrderedBlock<B>> void rotateRight(OrderedBlock<?>[] roots, int slot, B p, B x) {
        p.left = x.right;
        if (x.right != null) {
            x.right.parent = p;
        }
        replaceChild(roots, slot, p.parent, p, x);
        x.right = p;
        p.parent = x;
    }

    /** Rotates {@code p}'s right child {@code x} up into p's place. */
    private static <B extends OrderedBlock<B>> void rotateLeft(OrderedBlock<?>[] roots, int slot, B p, B x) {
        p.right = x.left;
        if (x.left != null) {
            x.left.parent = p;
        }
        replaceChild(roots, slot, p.parent, p, x);
        x.left = p;
        p.parent = x;
    }

    /** The first block not less than the key under {@code root}, or null. */
    static <B extends OrderedBlock<B>> @Nullable B ceiling(
            @Nullable B root, long stream, long size, long ptr, boolean bySize) {
        B cur = root;
        B best = null;
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
    static <B extends OrderedBlock<B>> @Nullable B leftmost(@Nullable B root) {
        B cur = root;
        if (cur == null) {
            return null;
        }
        while (cur.left != null) {
            cur = cur.left;
        }
        return cur;
    }

    /** The largest block under {@code root}, or null. */
    static <B extends OrderedBlock<B>> @Nullable B rightmost(@Nullable B root) {
        B cur = root;
        if (cur == null) {
            return null;
        }
        while (cur.right != null) {
            cur = cur.right;
        }
        return cur;
    }

    /** In-order successor of {@code b} (which must be in this tree), or null. */
    static <B extends OrderedBlock<B>> @Nullable B next(B b) {
        if (b.right != null) {
            B cur = b.right;
            while (cur.left != null) {
                cur = cur.left;
            }
            return cur;
        }
        B cur = b;
        B p = b.parent;
        while (p != null && same(p.right, cur)) {
            cur = p;
            p = p.parent;
        }
        return p;
    }

    /** In-order predecessor of {@code b} (which must be in this tree), or null. */
    static <B extends OrderedBlock<B>> @Nullable B prev(B b) {
        if (b.left != null) {
            B cur = b.left;
            while (cur.right != null) {
                cur = cur.right;
            }
            return cur;
        }
        B cur = b;
        B p = b.parent;
        while (p != null && same(p.left, cur)) {
            cur = p;
            p = p.parent;
        }
        return p;
    }
}
