package io.gpumem.bench.kv;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedList;
import java.util.List;
import java.util.Map;

/**
 * Baseline for {@link KvBlockPoolBenchmark}: the straightforward object-oriented port of vLLM's block
 * pool that the real {@code KvBlockPool} is measured against. One object per block, a
 * {@link LinkedList} as the free queue (a node allocated per release), a {@link HashMap} keyed by a
 * key record (an object per lookup and per cached block), and the same LRU and reverse-free rules.
 */
final class NaiveObjectBlockPool {
    record Key(long hi, long lo) {}

    static final class KvBlockObject {
        final int id;
        int refCount;
        Key key;

        KvBlockObject(int id) {
            this.id = id;
        }
    }

    private final KvBlockObject[] blocks;
    // Error Prone's JdkObsolete would have an ArrayDeque here: the node allocated per release is what this
    // baseline measures
    @SuppressWarnings("JdkObsolete")
    private final LinkedList<KvBlockObject> free = new LinkedList<>();

    private final Map<Key, KvBlockObject> cached = new HashMap<>();

    NaiveObjectBlockPool(int numBlocks) {
        blocks = new KvBlockObject[numBlocks];
        for (int i = 0; i < numBlocks; i++) {
            blocks[i] = new KvBlockObject(i);
            if (i > 0) {
                free.add(blocks[i]);
            }
        }
    }

    List<KvBlockObject> allocate(int n) {
        if (n > free.size()) {
            throw new IllegalStateException("only " + free.size() + " free");
        }
        List<KvBlockObject> out = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            KvBlockObject b = free.removeFirst();
            if (b.key != null) {
                cached.remove(b.key);
                b.key = null;
            }
            b.refCount = 1;
            out.add(b);
        }
        return out;
    }

    void free(List<KvBlockObject> table) {
        for (int i = table.size() - 1; i >= 0; i--) {
            KvBlockObject b = table.get(i);
            if (--b.refCount == 0) {
                if (b.key == null) {
                    free.addFirst(b);
                } else {
                    free.addLast(b);
                }
            }
        }
    }

    void cache(KvBlockObject b, long hi, long lo) {
        b.key = new Key(hi, lo);
        cached.put(b.key, b);
    }

    KvBlockObject lookup(long hi, long lo) {
        return cached.get(new Key(hi, lo));
    }

    void touch(KvBlockObject b) {
        if (b.refCount++ == 0) {
            free.remove(b);
        }
    }
}
