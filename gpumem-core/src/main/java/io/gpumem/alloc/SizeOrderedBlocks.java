package io.gpumem.alloc;

import java.util.ArrayList;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * The free blocks of a pool in PyTorch's best-fit order — stream handle as unsigned, then size, then address
 * ({@code BlockComparatorSize}) — built for speed: a segregated index in front of tiny ordered trees.
 *
 * <h2>Layout</h2>
 * One <em>lane</em> per stream, lanes sorted by unsigned stream handle. A lane splits sizes into classes the
 * way TLSF does ({@link SizeClassIndex}, the one-stream form of this set): the power of two (first level) and 64 linear steps inside it (second level), so a class
 * holds sizes within 1.6% of each other. Each non-empty class has a small intrusive treap (the algorithms of
 * {@link BlockTree}) ordered by (size, address), whose root sits in the lane's {@code roots} array, and two
 * bitmaps record which classes are non-empty.
 *
 * <h2>Operations</h2>
 * Insert and remove touch one class tree (usually holding a handful of blocks) and a couple of bitmap words.
 * {@link #ceiling} looks in the request's own class first, then jumps with one bit scan to the next non-empty
 * class, then to the next lane: the result is exactly the first block not less than the key in the total
 * order, as a single ordered set would give. {@link #next}/{@link #prev} walk the same total order.
 *
 * <p>Invariants: a class bit is set iff its root is non-null; a first-level bit is set iff any of its
 * second-level bits is; {@code size()} equals the number of blocks in all class trees; every block in a class
 * tree has {@code b.lane} and {@code b.sizeClass} pointing at it and {@code b.container == this}. Class is monotone in size, so class order
 * followed by (size, address) inside a class is the global order.
 */
final class SizeOrderedBlocks {
    private static final int SL_BITS = SizeClassIndex.SL_BITS;
    private static final int FL_COUNT = SizeClassIndex.FL_COUNT;

    /** All free blocks of one stream. */
    static final class Lane {
        final SizeOrderedBlocks owner;
        final long stream;
        /** The root of each size class's treap (null: empty class); an {@code OrderedBlock[]}, see {@link BlockTree}. */
        final OrderedBlock<?>[] roots = new OrderedBlock<?>[FL_COUNT << SL_BITS];

        final long[] secondLevel = new long[FL_COUNT];
        long firstLevel;
        int count;

        Lane(SizeOrderedBlocks owner, long stream) {
            this.owner = owner;
            this.stream = stream;
        }
    }

    private Lane[] lanes = new Lane[0];
    /** The lane used last: most operations in a row are on one stream. */
    private @Nullable Lane lastLane;

    private int count;
    /** The xorshift state the treap priorities are drawn from. */
    private int seed = 0x2545F491;

    int size() {
        return count;
    }

    boolean isEmpty() {
        return count == 0;
    }

    boolean contains(Block b) {
        return b.container == this;
    }

    static int sizeClass(long size) {
        return SizeClassIndex.sizeClass(size);
    }

    /** Index of the first lane whose stream is ≥ {@code stream} (unsigned); lanes.length if none. */
    private int laneIndex(long stream) {
        int lo = 0;
        int hi = lanes.length;
        while (lo < hi) {
            int mid = (lo + hi) >>> 1;
            if (Long.compareUnsigned(lanes[mid].stream, stream) < 0) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        return lo;
    }

    private Lane laneFor(long stream) {
        Lane last = lastLane;
        if (last != null && last.stream == stream) {
            return last;
        }
        int i = laneIndex(stream);
        if (i < lanes.length && lanes[i].stream == stream) {
            lastLane = lanes[i];
            return lanes[i];
        }
        Lane lane = new Lane(this, stream);
        lastLane = lane;
        Lane[] grown = new Lane[lanes.length + 1];
        System.arraycopy(lanes, 0, grown, 0, i);
        grown[i] = lane;
        System.arraycopy(lanes, i, grown, i + 1, lanes.length - i);
        lanes = grown;
        return lane;
    }

    void insert(Block b) {
        if (b.container != null) {
            throw new IllegalStateException("block already in a tree: " + b);
        }
        // a block keeps its lane after removal (and a split-off block inherits it), so a re-insert skips the lookup
        Lane lane = b.lane;
        if (lane == null || lane.owner != this || lane.stream != b.stream) {
            lane = laneFor(b.stream);
        }
        int c = sizeClass(b.size);
        OrderedBlock<?>[] roots = lane.roots;
        if (roots[c] == null) {
            int fl = c >>> SL_BITS;
            lane.secondLevel[fl] |= 1L << (c & 63);
            lane.firstLevel |= 1L << fl;
        }
        int priority = BlockTree.nextPriority(seed);
        seed = priority;
        b.priority = priority;
        BlockTree.link(roots, c, b, true);
        b.container = this;
        b.lane = lane;
        b.sizeClass = c;
        lane.count++;
        count++;
    }

    void remove(Block b) {
        if (!contains(b)) {
            throw new IllegalStateException("block not in this pool: " + b);
        }
        Lane lane = laneOf(b);
        int c = b.sizeClass;
        BlockTree.unlink(lane.roots, c, b);
        b.container = null;
        if (lane.roots[c] == null) {
            int fl = c >>> SL_BITS;
            long sl = lane.secondLevel[fl] & ~(1L << (c & 63));
            lane.secondLevel[fl] = sl;
            if (sl == 0) {
                lane.firstLevel &= ~(1L << fl);
            }
        }
        lane.count--;
        count--;
    }

    /** The root of class {@code c}'s tree in {@code lane}, or null (the roots hold only blocks of this set). */
    private static @Nullable Block root(Lane lane, int c) {
        return (Block) lane.roots[c];
    }

    /** The lane of {@code b}, which is in this set ({@link #insert} sets it; it stays set while b is in a set). */
    private static Lane laneOf(Block b) {
        Lane lane = b.lane;
        if (lane == null) {
            throw new IllegalStateException("block in no lane: " + b);
        }
        return lane;
    }

    /** First non-empty class ≥ c in the lane, or −1. */
    private static int nextClass(Lane lane, int c) {
        return SizeClassIndex.nextClass(lane.firstLevel, lane.secondLevel, c);
    }

    /** Last non-empty class ≤ c in the lane, or −1. */
    private static int prevClass(Lane lane, int c) {
        return SizeClassIndex.prevClass(lane.firstLevel, lane.secondLevel, c);
    }

    private static @Nullable Block firstOfLane(Lane lane) {
        if (lane.count == 0) {
            return null;
        }
        return BlockTree.leftmost(root(lane, nextClass(lane, 0)));
    }

    private static @Nullable Block lastOfLane(Lane lane) {
        if (lane.count == 0) {
            return null;
        }
        return BlockTree.rightmost(root(lane, prevClass(lane, (FL_COUNT << SL_BITS) - 1)));
    }

    private @Nullable Block firstFromLane(int i) {
        for (; i < lanes.length; i++) {
            Block b = firstOfLane(lanes[i]);
            if (b != null) {
                return b;
            }
        }
        return null;
    }

    private @Nullable Block lastBeforeLane(int i) {
        for (i--; i >= 0; i--) {
            Block b = lastOfLane(lanes[i]);
            if (b != null) {
                return b;
            }
        }
        return null;
    }

    /** The first block not less than the key (stream, size, ptr), or null. */
    @Nullable
    Block ceiling(long stream, long size, long ptr) {
        Lane lane = lastLane;
        if (lane == null || lane.stream != stream) {
            int i = laneIndex(stream);
            if (i == lanes.length) {
                return null;
            }
            lane = lanes[i];
            if (lane.stream != stream) {
                return firstFromLane(i);
            }
            lastLane = lane;
        }
        if (lane.count > 0) {
            int c = sizeClass(size);
            Block root = root(lane, c);
            if (root != null) {
                Block b = BlockTree.ceiling(root, stream, size, ptr, true);
                if (b != null) {
                    return b;
                }
            }
            return firstAfterClass(lane, c);
        }
        return firstFromLane(laneIndex(stream) + 1);
    }

    /** The first block of {@code lane} in a class above {@code c}, else the first of the lanes after it, or null. */
    private @Nullable Block firstAfterClass(Lane lane, int c) {
        int n = c + 1 < (FL_COUNT << SL_BITS) ? nextClass(lane, c + 1) : -1;
        if (n >= 0) {
            return BlockTree.leftmost(root(lane, n));
        }
        return firstFromLane(laneIndex(lane.stream) + 1);
    }

    @Nullable
    Block first() {
        return firstFromLane(0);
    }

    @Nullable
    Block last() {
        return lastBeforeLane(lanes.length);
    }

    /** Successor of {@code b} (in this set) in the total order, or null. */
    @Nullable
    Block next(Block b) {
        Block n = BlockTree.next(b);
        return n != null ? n : firstAfterClass(laneOf(b), b.sizeClass);
    }

    /** Predecessor of {@code b} (in this set) in the total order, or null. */
    @Nullable
    Block prev(Block b) {
        Block p = BlockTree.prev(b);
        if (p != null) {
            return p;
        }
        Lane lane = laneOf(b);
        int c = b.sizeClass > 0 ? prevClass(lane, b.sizeClass - 1) : -1;
        if (c >= 0) {
            return BlockTree.rightmost(root(lane, c));
        }
        return lastBeforeLane(laneIndex(lane.stream));
    }

    /** Adds a line to {@code violations} for each broken class tree (see {@link BlockTree#checkShape}). */
    void checkTrees(String name, List<String> violations) {
        for (Lane lane : lanes) {
            for (int c = 0; c < lane.roots.length; c++) {
                if (lane.roots[c] != null) {
                    BlockTree.checkShape(root(lane, c), null, this, true, name + " class " + c, violations);
                }
            }
        }
    }

    /** The blocks in order, copied (for passes that mutate the set while walking). */
    List<Block> toList() {
        List<Block> out = new ArrayList<>(count);
        for (Block b = first(); b != null; b = next(b)) {
            out.add(b);
        }
        return out;
    }
}
