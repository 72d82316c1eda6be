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
 * is one block allocated and freed; a request of 16 blocks is allocated and freed per invocation, as
 * a scheduler step does. The cached variants add a prefix hit: lookup + touch per block.
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
