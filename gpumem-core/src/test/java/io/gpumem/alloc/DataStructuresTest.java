package io.gpumem.alloc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;

/**
 * {@link BlockTree} (the one treap), {@link SizeOrderedBlocks} and {@link SizeClassIndex} (the stitch policy's free
 * index) against {@link TreeSet} and
 * {@link AddressTable} (the one long-keyed map) against {@link HashMap}, seeded.
 */
class DataStructuresTest {
    private static final Comparator<Block> BY_SIZE = (a, b) -> {
        int c = Long.compareUnsigned(a.stream, b.stream);
        if (c != 0) {
            return c;
        }
        c = Long.compare(a.size, b.size);
        return c != 0 ? c : Long.compareUnsigned(a.ptr, b.ptr);
    };

    private static Block block(long stream, long size, long ptr) {
        return new Block(ptr, size, stream, null);
    }

    @Test
    void treeMatchesTreeSetOrderAndCeiling() {
        long seed = System.nanoTime();
        System.out.println("DataStructuresTest tree seed=" + seed);
        SplittableRandom rnd = new SplittableRandom(seed);
        BlockTree<Block> tree = new BlockTree<>(BlockTree.Order.BY_SIZE);
        TreeSet<Block> ref = new TreeSet<>(BY_SIZE);
        List<Block> present = new ArrayList<>();
        long[] streams = {0, 7, -5L}; // -5 is a huge unsigned handle: must sort last
        for (int i = 0; i < 20_000; i++) {
            if (present.isEmpty() || rnd.nextInt(3) > 0) {
                Block b = block(
                        streams[rnd.nextInt(3)], 512L * (1 + rnd.nextInt(64)), 512L * rnd.nextInt(1 << 20) + 4096);
                if (ref.add(b)) {
                    tree.insert(b);
                    present.add(b);
                }
            } else {
                Block b = present.remove(rnd.nextInt(present.size()));
                ref.remove(b);
                tree.remove(b);
            }
            if (i % 97 == 0) {
                long s = streams[rnd.nextInt(3)];
                long size = 512L * (1 + rnd.nextInt(64));
                Block key = block(s, size, 0);
                assertThat(tree.ceiling(s, size, 0)).isSameAs(ref.ceiling(key));
            }
        }
        List<Block> walked = new ArrayList<>();
        for (Block b = tree.first(); b != null; b = BlockTree.next(b)) {
            walked.add(b);
        }
        assertThat(walked).containsExactlyElementsOf(ref);
        List<Block> backwards = new ArrayList<>();
        for (Block b = tree.last(); b != null; b = tree.previous(b)) { // the public walk back
            backwards.add(0, b);
        }
        assertThat(backwards).containsExactlyElementsOf(ref);
        assertThat(tree.size()).isEqualTo(ref.size());
        List<String> violations = new ArrayList<>();
        tree.checkShape("tree", violations);
        assertThat(violations).as("seed %d", seed).isEmpty();
    }

    /** The stitch policy's split and merge: a new key in place when the order allows it, else remove and insert. */
    @Test
    void rekeyInPlaceKeepsTheOrderOrChangesNothing() {
        long seed = System.nanoTime();
        System.out.println("DataStructuresTest rekey seed=" + seed);
        SplittableRandom rnd = new SplittableRandom(seed);
        BlockTree<Block> tree = new BlockTree<>(BlockTree.Order.BY_SIZE);
        TreeSet<Block> ref = new TreeSet<>(BY_SIZE);
        List<Block> present = new ArrayList<>();
        long nextPtr = 512;
        int inPlace = 0;
        for (int op = 0; op < 20_000; op++) {
            int kind = rnd.nextInt(4);
            if (kind == 0 || present.isEmpty()) {
                Block b = block(3, 512L * (1 + rnd.nextInt(64)), nextPtr);
                nextPtr += 512;
                tree.insert(b);
                ref.add(b);
                present.add(b);
            } else if (kind == 1) {
                Block b = present.remove(rnd.nextInt(present.size()));
                tree.remove(b);
                ref.remove(b);
            } else if (kind == 2) {
                Block b = present.get(rnd.nextInt(present.size()));
                long size = 512L * (1 + rnd.nextInt(64));
                long ptr = rnd.nextBoolean() ? b.ptr + 512L * (rnd.nextInt(3) - 1) : nextPtr;
                nextPtr += 512;
                if (ptr == 0 || ref.stream().anyMatch(x -> x != b && x.ptr == ptr)) {
                    continue;
                }
                long oldSize = b.size;
                long oldPtr = b.ptr;
                Block lower = ref.lower(b);
                Block higher = ref.higher(b);
                ref.remove(b);
                if (tree.rekeyInPlace(b, size, ptr)) {
                    inPlace++;
                    assertThat(b.size)
                            .as("seed %d op %d: the new key taken", seed, op)
                            .isEqualTo(size);
                    assertThat(b.ptr)
                            .as("seed %d op %d: the new key taken", seed, op)
                            .isEqualTo(ptr);
                    assertThat(lower == null || BY_SIZE.compare(lower, b) < 0)
                            .as("seed %d op %d", seed, op)
                            .isTrue();
                    assertThat(higher == null || BY_SIZE.compare(b, higher) < 0)
                            .as("seed %d op %d", seed, op)
                            .isTrue();
                } else {
                    assertThat(b.size).isEqualTo(oldSize);
                    assertThat(b.ptr).isEqualTo(oldPtr);
                    tree.remove(b);
                    b.size = size;
                    b.ptr = ptr;
                    tree.insert(b);
                }
                ref.add(b);
            } else {
                long want = 512L * rnd.nextInt(70);
                assertThat(tree.ceiling(3, want, 0))
                        .as("seed %d op %d ceiling(%d)", seed, op, want)
                        .isSameAs(ref.ceiling(block(3, want, 0)));
            }
            assertThat(tree.size()).isEqualTo(ref.size());
        }
        assertThat(tree.toList()).as("seed %d", seed).containsExactlyElementsOf(ref);
        List<String> violations = new ArrayList<>();
        tree.checkShape("tree", violations);
        assertThat(violations).as("seed %d", seed).isEmpty();
        assertThat(inPlace).as("some rekeys keep their place").isPositive();
    }

    @Test
    void checkShapeReportsABlockWhoseKeyChangedInTheTree() {
        BlockTree<Block> tree = new BlockTree<>(BlockTree.Order.BY_SIZE);
        Block small = block(0, 512, 4096);
        Block large = block(0, 4096, 8192);
        tree.insert(small);
        tree.insert(large);
        small.size = 8192; // behind the tree's back: now out of order
        List<String> violations = new ArrayList<>();
        tree.checkShape("free tree", violations);
        assertThat(violations).isNotEmpty().allMatch(v -> v.startsWith("free tree: "));
    }

    @Test
    void sizeOrderedSetMatchesTreeSetIncludingNextPrevAndCeiling() {
        long seed = System.nanoTime();
        System.out.println("DataStructuresTest size-ordered seed=" + seed);
        SplittableRandom rnd = new SplittableRandom(seed);
        SizeOrderedBlocks set = new SizeOrderedBlocks();
        TreeSet<Block> ref = new TreeSet<>(BY_SIZE);
        List<Block> present = new ArrayList<>();
        long[] streams = {0, 7, -5L, 1L << 40};
        for (int i = 0; i < 30_000; i++) {
            if (present.isEmpty() || rnd.nextInt(3) > 0) {
                long size = rnd.nextBoolean() ? 512L * (1 + rnd.nextInt(64)) : 512L * (1 + rnd.nextLong(1L << 28));
                Block b = block(streams[rnd.nextInt(streams.length)], size, 512L * rnd.nextInt(1 << 20) + 4096);
                if (ref.add(b)) {
                    set.insert(b);
                    present.add(b);
                }
            } else {
                Block b = present.remove(rnd.nextInt(present.size()));
                ref.remove(b);
                set.remove(b);
            }
            if (i % 37 == 0) {
                long s = streams[rnd.nextInt(streams.length)];
                long size = rnd.nextBoolean() ? 512L * (1 + rnd.nextInt(64)) : 512L * (1 + rnd.nextLong(1L << 28));
                long ptr = rnd.nextBoolean() ? 0 : 512L * rnd.nextInt(1 << 20);
                Block key = block(s, size, ptr);
                assertThat(set.ceiling(s, size, ptr)).isSameAs(ref.ceiling(key));
                if (!present.isEmpty()) {
                    Block b = present.get(rnd.nextInt(present.size()));
                    assertThat(set.next(b)).isSameAs(ref.higher(b));
                    assertThat(set.prev(b)).isSameAs(ref.lower(b));
                }
            }
        }
        assertThat(set.toList()).containsExactlyElementsOf(ref);
        assertThat(set.first()).isSameAs(ref.isEmpty() ? null : ref.first());
        assertThat(set.last()).isSameAs(ref.isEmpty() ? null : ref.last());
        assertThat(set.size()).isEqualTo(ref.size());
        for (Block b : new ArrayList<>(present)) {
            set.remove(b);
        }
        assertThat(set.isEmpty()).isTrue();
        assertThat(set.first()).isNull();
        assertThat(set.ceiling(0, 512, 0)).isNull();
    }

    @Test
    void sizeClassIndexMatchesTreeSetIncludingRekeysAndCeiling() {
        long seed = System.nanoTime();
        System.out.println("DataStructuresTest size-class index seed=" + seed);
        SplittableRandom rnd = new SplittableRandom(seed);
        SizeClassIndex<Block> index = new SizeClassIndex<>();
        TreeSet<Block> ref = new TreeSet<>(BY_SIZE);
        List<Block> present = new ArrayList<>();
        int inPlace = 0;
        for (int i = 0; i < 30_000; i++) {
            int action = present.isEmpty() ? 0 : rnd.nextInt(4);
            if (action <= 1) {
                long size = rnd.nextBoolean() ? 512L * (1 + rnd.nextInt(64)) : 512L * (1 + rnd.nextLong(1L << 28));
                Block b = block(3, size, 512L * rnd.nextInt(1 << 20) + 4096);
                if (ref.add(b)) {
                    index.insert(b);
                    present.add(b);
                }
            } else if (action == 2) {
                Block b = present.remove(rnd.nextInt(present.size()));
                ref.remove(b);
                index.remove(b);
            } else {
                // a split or merge: the block's size moves by a little (often the same class) or a lot
                Block b = present.get(rnd.nextInt(present.size()));
                long size = Math.max(512, b.size + 512L * (rnd.nextInt(9) - 4) * (rnd.nextBoolean() ? 1 : 4096));
                long ptr = b.ptr + 512L * (rnd.nextInt(3) - 1);
                if (!ref.contains(block(3, size, ptr))) { // keys stay unique
                    ref.remove(b);
                    if (index.rekeyInPlace(b, size, ptr)) {
                        inPlace++;
                        assertThat(b.size)
                                .as("seed %d: the new key taken", seed)
                                .isEqualTo(size);
                        assertThat(b.ptr).as("seed %d: the new key taken", seed).isEqualTo(ptr);
                    } else {
                        index.remove(b);
                        b.size = size;
                        b.ptr = ptr;
                        index.insert(b);
                    }
                    ref.add(b);
                }
            }
            if (i % 37 == 0) {
                long size = rnd.nextBoolean() ? 512L * (1 + rnd.nextInt(64)) : 512L * (1 + rnd.nextLong(1L << 28));
                long ptr = rnd.nextBoolean() ? 0 : 512L * rnd.nextInt(1 << 20);
                assertThat(index.ceiling(3, size, ptr)).as("seed %d", seed).isSameAs(ref.ceiling(block(3, size, ptr)));
                if (!present.isEmpty()) {
                    Block b = present.get(rnd.nextInt(present.size()));
                    assertThat(index.next(b)).as("seed %d", seed).isSameAs(ref.higher(b));
                }
            }
        }
        List<String> violations = new ArrayList<>();
        index.checkShape("index", violations);
        assertThat(violations).as("seed %d", seed).isEmpty();
        assertThat(index.toList()).as("seed %d", seed).containsExactlyElementsOf(ref);
        assertThat(index.first()).isSameAs(ref.isEmpty() ? null : ref.first());
        assertThat(index.size()).isEqualTo(ref.size());
        assertThat(inPlace).as("some rekeys keep their place").isPositive();
        for (Block b : new ArrayList<>(present)) {
            index.remove(b);
        }
        assertThat(index.size()).isZero();
        assertThat(index.first()).isNull();
        assertThat(index.ceiling(3, 512, 0)).isNull();
    }

    @Test
    void sizeClassIndexCheckReportsABlockWhoseSizeLeftItsClass() {
        SizeClassIndex<Block> index = new SizeClassIndex<>();
        Block small = block(0, 512, 4096);
        index.insert(small);
        index.insert(block(0, 1L << 20, 8192));
        small.size = 1L << 30; // behind the index's back: wrong class, out of order
        List<String> violations = new ArrayList<>();
        index.checkShape("free index", violations);
        assertThat(violations).isNotEmpty().allMatch(v -> v.startsWith("free index"));
        assertThatThrownBy(() -> index.insert(small)).isInstanceOf(IllegalStateException.class);
    }

    @Test
    void insertIfDisjointMatchesAScanOfTheRanges() {
        long seed = System.nanoTime();
        System.out.println("DataStructuresTest ranges seed=" + seed);
        SplittableRandom rnd = new SplittableRandom(seed);
        BlockTree<Block> tree = new BlockTree<>(BlockTree.Order.BY_ADDRESS);
        List<Block> ref = new ArrayList<>();
        int inserted = 0;
        int refused = 0;
        for (int i = 0; i < 20_000; i++) {
            if (ref.isEmpty() || rnd.nextInt(3) > 0) {
                // ranges of 1 to 8 units on a grid of 512 units: many touch, many overlap
                long start = 512L * rnd.nextInt(512);
                long size = 512L * (1 + rnd.nextInt(8));
                boolean meets = ref.stream().anyMatch(r -> r.ptr < start + size && start < r.ptr + r.size);
                Block b = block(0, size, start);
                assertThat(tree.insertIfDisjoint(b))
                        .as("seed %d, [%d, +%d)", seed, start, size)
                        .isEqualTo(!meets);
                assertThat(tree.contains(b)).isEqualTo(!meets);
                if (meets) {
                    refused++;
                } else {
                    ref.add(b);
                    inserted++;
                }
            } else {
                tree.remove(ref.remove(rnd.nextInt(ref.size())));
            }
        }
        assertThat(inserted).as("seed %d", seed).isGreaterThan(1000);
        assertThat(refused).as("seed %d", seed).isGreaterThan(1000);
        ref.sort(Comparator.comparingLong(b -> b.ptr));
        assertThat(tree.toList()).as("seed %d", seed).containsExactlyElementsOf(ref);
        List<String> violations = new ArrayList<>();
        tree.checkShape("ranges", violations);
        assertThat(violations).as("seed %d", seed).isEmpty();
        assertThatThrownBy(() -> new BlockTree<Block>(BlockTree.Order.BY_SIZE).insertIfDisjoint(block(0, 512, 512)))
                .isInstanceOf(IllegalStateException.class);
    }

    @Test
    void treeRejectsDuplicatesAndForeignRemoval() {
        BlockTree<Block> t = new BlockTree<>(BlockTree.Order.BY_ADDRESS);
        Block a = block(0, 512, 4096);
        t.insert(a);
        assertThatThrownBy(() -> t.insert(block(0, 1024, 4096))).isInstanceOf(IllegalStateException.class);
        assertThatThrownBy(() -> t.remove(block(0, 512, 8192))).isInstanceOf(IllegalStateException.class);
        assertThatThrownBy(() -> t.previous(block(0, 512, 8192))).isInstanceOf(IllegalStateException.class);
        assertThatThrownBy(() -> t.insert(a)).isInstanceOf(IllegalStateException.class);
    }

    @Test
    void indexMatchesHashMap() {
        long seed = System.nanoTime();
        System.out.println("DataStructuresTest index seed=" + seed);
        SplittableRandom rnd = new SplittableRandom(seed);
        AddressTable<Block> idx = AddressTable.forObjects();
        Map<Long, Block> ref = new HashMap<>();
        List<Long> keys = new ArrayList<>();
        for (int i = 0; i < 50_000; i++) {
            if (keys.isEmpty() || rnd.nextInt(5) < 3) {
                long k = 512L * (1 + rnd.nextInt(1 << 16));
                Block b = block(0, 512, k);
                if (!ref.containsKey(k)) {
                    ref.put(k, b);
                    assertThat(idx.putIfAbsent(k, b)).isTrue();
                    keys.add(k);
                } else if (rnd.nextBoolean()) {
                    assertThat(idx.putIfAbsent(k, b)).isFalse();
                } else {
                    assertThat(idx.put(k, b)).isSameAs(ref.put(k, b));
                }
            } else {
                long k = keys.remove(rnd.nextInt(keys.size()));
                assertThat(idx.remove(k)).isSameAs(ref.remove(k));
            }
            long probe = 512L * (1 + rnd.nextInt(1 << 16));
            assertThat(idx.get(probe)).isSameAs(ref.get(probe));
        }
        assertThat(idx.size()).isEqualTo(ref.size());
        for (Map.Entry<Long, Block> e : ref.entrySet()) {
            assertThat(idx.get(e.getKey())).isSameAs(e.getValue());
        }
        assertThat(idx.remove(3)).isNull();
    }
}
