package io.gpumem.alloc;

import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.TreeSet;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** {@link BlockTree} against {@link TreeSet} and {@link AddressTable} against {@link HashMap}, seeded. */
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
        Block b = new Block();
        b.reset(ptr, size, stream, null);
        return b;
    }

    @Test
    void treeMatchesTreeSetOrderAndCeiling() {
        long seed = System.nanoTime();
        System.out.println("DataStructuresTest tree seed=" + seed);
        SplittableRandom rnd = new SplittableRandom(seed);
        BlockTree tree = new BlockTree(BlockTree.Order.BY_SIZE);
        TreeSet<Block> ref = new TreeSet<>(BY_SIZE);
        List<Block> present = new ArrayList<>();
        long[] streams = {0, 7, -5L}; // -5 is a huge unsigned handle: must sort last
        for (int i = 0; i < 20_000; i++) {
            if (present.isEmpty() || rnd.nextInt(3) > 0) {
                Block b = block(streams[rnd.nextInt(3)], 512 * (1 + rnd.nextInt(64)), 512L * rnd.nextInt(1 << 20) + 4096);
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
                long size = 512 * (1 + rnd.nextInt(64));
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
        for (Block b = tree.last(); b != null; b = BlockTree.prev(b)) {
            backwards.add(0, b);
        }
        assertThat(backwards).containsExactlyElementsOf(ref);
        assertThat(tree.size()).isEqualTo(ref.size());
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
                long size = rnd.nextBoolean() ? 512 * (1 + rnd.nextInt(64)) : 512L * (1 + rnd.nextLong(1L << 28));
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
                long size = rnd.nextBoolean() ? 512 * (1 + rnd.nextInt(64)) : 512L * (1 + rnd.nextLong(1L << 28));
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
    void treeRejectsDuplicatesAndForeignRemoval() {
        BlockTree t = new BlockTree(BlockTree.Order.BY_ADDRESS);
        Block a = block(0, 512, 4096);
        t.insert(a);
        assertThatThrownBy(() -> t.insert(block(0, 1024, 4096))).isInstanceOf(IllegalStateException.class);
        assertThatThrownBy(() -> t.remove(block(0, 512, 8192))).isInstanceOf(IllegalStateException.class);
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
                if (!ref.containsKey(k)) {
                    Block b = block(0, 512, k);
                    ref.put(k, b);
                    assertThat(idx.putIfAbsent(k, b)).isTrue();
                    keys.add(k);
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
