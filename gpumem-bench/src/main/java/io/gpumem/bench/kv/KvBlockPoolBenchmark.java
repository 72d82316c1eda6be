package io.gpumem.bench.kv;

import io.gpumem.kvcache.pool.KvBlockPool;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.infra.Blackhole;

/**
 * Block allocate + free throughput, single thread (target: at least 20 million per second), for the
 * primitive-array {@link KvBlockPool} against {@link NaiveObjectBlockPool} in the same run. One operation
 * is one block allocated and freed. The cases, each for both pools:
 *
 * <ul>
 *   <li>{@code AllocateFree}: a request of 16 blocks allocated and freed per invocation, as a scheduler step
 *       does. Uncached blocks go back to the head of the free list, so this reuses the same 16 hot blocks of the
 *       4,096: the cheapest case, a floor, not a typical one.
 *   <li>{@code OneBlock}: one block allocated and freed per call, as vLLM's pool is driven when a running
 *       request grows by a block: the per-call overhead with nothing to amortise it over.
 *   <li>{@code MissEvictInsert}: one block per call on a pool whose free blocks are all cached (every block a
 *       serving run has filled is): the allocation takes the least recently used block and evicts its cache
 *       entry (a map removal), the block is cached under a new key (a map insertion), and its free sends it to
 *       the tail, so successive calls walk the whole pool.
 *   <li>{@code CycleWholePool}: the same with requests of 16 blocks, chained keys as a prompt's blocks have: the
 *       pool is cycled through its whole length (4,096 blocks in 256 calls), every block's state and map entry
 *       visited in turn rather than 16 hot ones.
 *   <li>{@code PrefixHitTouchFree}: a prefix hit, lookup + touch per block, then the free.
 * </ul>
 *
 * <p>Run: {@code java -jar gpumem-bench/target/benchmarks.jar KvBlockPoolBenchmark}
 */
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
public class KvBlockPoolBenchmark extends KvMicroBenchmark {
    static final int BLOCKS = 4096;
    static final int REQUEST = 16;

    private KvBlockPool pool;
    private NaiveObjectBlockPool naive;
    private final int[] table = new int[REQUEST];
    private final int[] tokens = new int[16 * REQUEST];
    private KvBlockPool cachedPool;
    private int[] cachedTable;
    private NaiveObjectBlockPool cachedNaive;
    private List<NaiveObjectBlockPool.KvBlockObject> cachedNaiveTable;
    /** Pools whose free blocks all hold a cache entry, for the eviction cases. */
    private KvBlockPool evictingPool;

    private NaiveObjectBlockPool evictingNaive;
    private final int[] one = new int[1];
    /** The next fresh cache key: every insertion is a new entry, as a new prompt's blocks are. */
    private long nextKey;

    @Setup
    public void setUp() {
        pool = new KvBlockPool(BLOCKS, 16, true);
        naive = new NaiveObjectBlockPool(BLOCKS);
        // a cached request of 16 blocks, idle in the free list, for the prefix-hit variants
        cachedPool = new KvBlockPool(BLOCKS, 16, true);
        cachedTable = new int[REQUEST];
        cachedPool.allocate(REQUEST, cachedTable, 0);
        for (int j = 0; j < REQUEST; j++) {
            cachedPool.cache(
                    cachedTable[j], j, j, j == 0 ? KvBlockPool.NONE : cachedTable[j - 1], tokens, j * 16, 0, 0);
        }
        cachedPool.free(cachedTable, 0, REQUEST);
        cachedNaive = new NaiveObjectBlockPool(BLOCKS);
        cachedNaiveTable = cachedNaive.allocate(REQUEST);
        for (int j = 0; j < REQUEST; j++) {
            cachedNaive.cache(cachedNaiveTable.get(j), j, j);
        }
        cachedNaive.free(cachedNaiveTable);
        evictingPool = new KvBlockPool(BLOCKS, 16, true);
        evictingNaive = new NaiveObjectBlockPool(BLOCKS);
        for (int i = 0; i < BLOCKS; i++) { // every block cached once: from here on each allocation evicts
            poolMissEvictInsert();
            naiveMissEvictInsert();
        }
    }

    @Benchmark
    @OperationsPerInvocation(REQUEST)
    public int poolAllocateFree() {
        pool.allocate(REQUEST, table, 0);
        pool.free(table, 0, REQUEST);
        return table[0];
    }

    @Benchmark
    @OperationsPerInvocation(REQUEST)
    public void naiveAllocateFree(Blackhole bh) {
        List<NaiveObjectBlockPool.KvBlockObject> t = naive.allocate(REQUEST);
        naive.free(t);
        bh.consume(t);
    }

    @Benchmark
    public int poolOneBlock() {
        one[0] = pool.allocate();
        pool.free(one, 0, 1);
        return one[0];
    }

    @Benchmark
    public Object naiveOneBlock() {
        List<NaiveObjectBlockPool.KvBlockObject> t = naive.allocate(1);
        naive.free(t);
        return t;
    }

    @Benchmark
    public int poolMissEvictInsert() {
        int b = evictingPool.allocate();
        long key = nextKey++;
        evictingPool.cache(b, key, ~key, KvBlockPool.NONE, tokens, 0, 0, 0);
        one[0] = b;
        evictingPool.free(one, 0, 1);
        return b;
    }

    @Benchmark
    public Object naiveMissEvictInsert() {
        List<NaiveObjectBlockPool.KvBlockObject> t = evictingNaive.allocate(1);
        long key = nextKey++;
        evictingNaive.cache(t.get(0), key, ~key);
        evictingNaive.free(t);
        return t;
    }

    @Benchmark
    @OperationsPerInvocation(REQUEST)
    public int poolCycleWholePool() {
        evictingPool.allocate(REQUEST, table, 0);
        long key = nextKey;
        nextKey += REQUEST;
        for (int j = 0; j < REQUEST; j++) {
            evictingPool.cache(
                    table[j], key + j, ~(key + j), j == 0 ? KvBlockPool.NONE : table[j - 1], tokens, j * 16, 0, 0);
        }
        evictingPool.free(table, 0, REQUEST);
        return table[0];
    }

    @Benchmark
    @OperationsPerInvocation(REQUEST)
    public Object naiveCycleWholePool() {
        List<NaiveObjectBlockPool.KvBlockObject> t = evictingNaive.allocate(REQUEST);
        long key = nextKey;
        nextKey += REQUEST;
        for (int j = 0; j < REQUEST; j++) {
            evictingNaive.cache(t.get(j), key + j, ~(key + j));
        }
        evictingNaive.free(t);
        return t;
    }

    @Benchmark
    @OperationsPerInvocation(REQUEST)
    public int poolPrefixHitTouchFree() {
        int parent = KvBlockPool.NONE;
        for (int j = 0; j < REQUEST; j++) {
            int b = cachedPool.lookup(j, j, parent, tokens, j * 16, 0, 0);
            cachedPool.touch(b);
            table[j] = b;
            parent = b;
        }
        cachedPool.free(table, 0, REQUEST);
        return parent;
    }

    @Benchmark
    @OperationsPerInvocation(REQUEST)
    public void naivePrefixHitTouchFree(Blackhole bh) {
        for (int j = 0; j < REQUEST; j++) {
            NaiveObjectBlockPool.KvBlockObject b = cachedNaive.lookup(j, j);
            cachedNaive.touch(b);
            cachedNaiveTable.set(j, b);
        }
        cachedNaive.free(cachedNaiveTable);
        bh.consume(cachedNaiveTable);
    }
}
