package io.gpumem.alloc;

import java.util.ArrayList;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * The free blocks of one stream in best-fit order, (size, address), for an allocator that keeps each stream's
 * blocks apart (a stitch arena): the one-stream form of {@link SizeOrderedBlocks}, and its size classes.
 *
 * <h2>Layout</h2>
 * Sizes fall into classes the way TLSF splits them: the power of two (first level) and 64 linear steps inside it
 * (second level), so a class holds sizes within 1.6% of each other. Each non-empty class keeps its blocks in a
 * small intrusive treap ordered by (size, address) (the algorithms of {@link BlockTree}, rooted in a slot of
 * {@code roots}); two bitmaps record which classes are non-empty. A block's class follows from its size, so
 * the block carries nothing more than its {@link OrderedBlock} fields.
 *
 * <h2>Operations</h2>
 * Insert and remove touch one class's treap (a handful of blocks, where one tree over all of them is some twenty
 * levels deep) and a couple of bitmap words. {@link #ceiling} looks in the request's own class, then jumps with
 * one bit scan to the next non-empty class: the result is exactly the first block not less than the key, as one
 * ordered set would give, so the index changes no placement decision, only its cost.
 *
 * <p>Invariants (checked by {@link #checkShape}): a class bit is set iff its root is non-null; a first-level bit
 * is set iff any of its second-level bits is; every block of a class's treap has a size of that class and
 * {@code container == this}; {@link #size} counts them. All blocks share one stream, so the treaps' order
 * (stream, size, address) is (size, address). A block's size and address change only through
 * {@link #rekeyInPlace} while it is held.
 *
 * @param <B> the block type kept
 */
public final class SizeClassIndex<B extends OrderedBlock<B>> {
    static final int SL_BITS = 6;
    /** 512 = 2^9, the smallest block: smaller sizes share class 0. */
    static final int MIN_FL = 9;

    static final int FL_COUNT = 64 - MIN_FL;
    static final int CLASSES = FL_COUNT << SL_BITS;

    /** The root of each class's treap (null: empty class). */
    private final B[] roots;

    private final long[] secondLevel = new long[FL_COUNT];
    private long firstLevel;
    private int count;
    /** The xorshift state the treap priorities are drawn from (fixed seed: runs are deterministic). */
    private int seed = 0x2545F491;

    @SuppressWarnings("unchecked")
    public SizeClassIndex() {
        roots = (B[]) new OrderedBlock<?>[CLASSES];
    }

    /** The class of {@code size}: monotone in size, so class order then (size, address) is the total order. */
    static int sizeClass(long size) {
        if (size < 512) {
            return 0;
        }
        int fl = 63 - Long.numberOfLeadingZeros(size);
        int sl = (int) (size >>> (fl - SL_BITS)) & ((1 << SL_BITS) - 1);
        return ((fl - MIN_FL) << SL_BITS) | sl;
    }

    /** The first non-empty class ≥ c under the two bitmaps, or −1. */
    static int nextClass(long firstLevel, long[] secondLevel, int c) {
        int fl = c >>> SL_BITS;
        long m = secondLevel[fl] & (-1L << (c & 63));
        if (m != 0) {
            return (fl << SL_BITS) | Long.numberOfTrailingZeros(m);
        }
        long f = fl + 1 >= 64 ? 0 : firstLevel & (-1L << (fl + 1));
        if (f == 0) {
            return -1;
        }
        fl = Long.numberOfTrailingZeros(f);
        return (fl << SL_BITS) | Long.numberOfTrailingZeros(secondLevel[fl]);
    }

    /** The last non-empty class ≤ c under the two bitmaps, or −1. */
    static int prevClass(long firstLevel, long[] secondLevel, int c) {
        int fl = c >>> SL_BITS;
        long m = secondLevel[fl] & (-1L >>> (63 - (c & 63)));
        if (m != 0) {
            return (fl << SL_BITS) | (63 - Long.numberOfLeadingZeros(m));
        }
        long f = firstLevel & ((1L << fl) - 1);
        if (f == 0) {
            return -1;
        }
        fl = 63 - Long.numberOfLeadingZeros(f);
        return (fl << SL_BITS) | (63 - Long.numberOfLeadingZeros(secondLevel[fl]));
    }

    /** The number of blocks held. */
    public int size() {
        return count;
    }

    /** Inserts {@code b}; it must be in no tree and its key must not be present. */
    public void insert(B b) {
        int c = sizeClass(b.size);
        if (b.container != null) {
            throw new IllegalStateException("block already in a tree: " + b);
        }
        if (roots[c] == null) {
            int fl = c >>> SL_BITS;
            secondLevel[fl] |= 1L << (c & 63);
            firstLevel |= 1L << fl;
        }
        seed = BlockTree.nextPriority(seed);
        b.priority = seed;
        BlockTree.link(roots, c, b, true);
        b.container = this;
        count++;
    }

    /** Removes {@code b}, which must be in this index. */
    public void remove(B b) {
        if (b.container != this) {
            throw new IllegalStateException("block not in this index: " + b);
        }
        int c = sizeClass(b.size);
        BlockTree.unlink(roots, c, b);
        b.container = null;
        if (roots[c] == null) {
            int fl = c >>> SL_BITS;
            long sl = secondLevel[fl] & ~(1L << (c & 63));
            secondLevel[fl] = sl;
            if (sl == 0) {
                firstLevel &= ~(1L << fl);
            }
        }
        count--;
    }

    /** The first block not less than (size, ptr) of {@code stream} (the stream all blocks share), or null. */
    public @Nullable B ceiling(long stream, long size, long ptr) {
        int c = sizeClass(size);
        B root = roots[c];
        if (root != null) {
            B b = BlockTree.ceiling(root, stream, size, ptr, true);
            if (b != null) {
                return b;
            }
        }
        int n = c + 1 < CLASSES ? nextClass(firstLevel, secondLevel, c + 1) : -1;
        return n < 0 ? null : BlockTree.leftmost(roots[n]);
    }

    /**
     * Gives {@code b} (in this index) the key ({@code size}, {@code ptr}) without moving it when it stays in its
     * class between its neighbours there: a split or merge that keeps a block's rank costs two neighbour lookups
     * in a small treap instead of a removal and an insertion. Returns false, changing nothing, when b must move.
     */
    public boolean rekeyInPlace(B b, long size, long ptr) {
        if (b.container != this) {
            throw new IllegalStateException("block not in this index: " + b);
        }
        if (sizeClass(size) != sizeClass(b.size)) {
            return false;
        }
        B before = BlockTree.prev(b);
        if (before != null
                && (before.size > size || (before.size == size && Long.compareUnsigned(before.ptr, ptr) >= 0))) {
            return false;
        }
        B after = BlockTree.next(b);
        if (after != null && (after.size < size || (after.size == size && Long.compareUnsigned(after.ptr, ptr) <= 0))) {
            return false;
        }
        b.size = size;
        b.ptr = ptr;
        return true;
    }

    /** The smallest block, or null. */
    public @Nullable B first() {
        int c = nextClass(firstLevel, secondLevel, 0);
        return c < 0 ? null : BlockTree.leftmost(roots[c]);
    }

    /** The block after {@code b} (in this index) in (size, address) order, or null. */
    public @Nullable B next(B b) {
        B n = BlockTree.next(b);
        if (n != null) {
            return n;
        }
        int c = sizeClass(b.size) + 1;
        c = c < CLASSES ? nextClass(firstLevel, secondLevel, c) : -1;
        return c < 0 ? null : BlockTree.leftmost(roots[c]);
    }

    /** Copies the blocks in order into a new list (for passes that mutate the index while walking). */
    public List<B> toList() {
        List<B> out = new ArrayList<>(count);
        for (B b = first(); b != null; b = next(b)) {
            out.add(b);
        }
        return out;
    }

    /**
     * Checks the invariants (each class's treap, its blocks' classes, the bitmaps, the count, the whole order) and
     * adds a line to {@code violations} for each broken one, prefixed with {@code name}. Not the hot path.
     */
    public void checkShape(String name, List<String> violations) {
        int seen = 0;
        for (int c = 0; c < CLASSES; c++) {
            boolean bit = (secondLevel[c >>> SL_BITS] & (1L << (c & 63))) != 0;
            if (bit != (roots[c] != null)) {
                violations.add(name + ": class " + c + " bitmap bit disagrees with its tree");
            }
            B root = roots[c];
            if (root == null) {
                continue;
            }
            seen += BlockTree.checkShape(root, null, this, true, name + " class " + c, violations);
            for (B b = BlockTree.leftmost(root); b != null; b = BlockTree.next(b)) {
                if (sizeClass(b.size) != c) {
                    violations.add(
                            name + ": " + b + " is in class " + c + ", its size's class is " + sizeClass(b.size));
                }
            }
        }
        for (int fl = 0; fl < FL_COUNT; fl++) {
            if ((secondLevel[fl] != 0) != ((firstLevel & (1L << fl)) != 0)) {
                violations.add(name + ": first-level bit " + fl + " disagrees with its classes");
            }
        }
        if (seen != count) {
            violations.add(name + ": holds " + seen + " blocks, counts " + count);
        }
        B b = first();
        if (b != null) {
            for (B n = next(b); n != null; b = n, n = next(n)) {
                if (n.size < b.size || (n.size == b.size && Long.compareUnsigned(n.ptr, b.ptr) <= 0)) {
                    violations.add(name + ": " + n + " does not follow " + b + " in order");
                }
            }
        }
    }
}
