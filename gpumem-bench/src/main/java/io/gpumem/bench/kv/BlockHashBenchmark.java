package io.gpumem.bench.kv;

import io.gpumem.kvcache.hash.BlockHasher;
import io.gpumem.kvcache.hash.HashAlgorithm;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Setup;

/**
 * Prefix-hash cost per token (target: at most 20 ns; vLLM's SHA-256 costs 100–200): the chained keys
 * of a 2,048-token prompt in blocks of 16, for the default fast 128-bit hash and for SHA-256 in the
 * same run. One operation is one token.
 *
 * <p>Run: {@code java -jar gpumem-bench/target/benchmarks.jar BlockHashBenchmark}
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
public class BlockHashBenchmark extends KvMicroBenchmark {
    static final int TOKENS = 2048;
    static final int BLOCK = 16;

    @Param({"FAST128", "SHA256"})
    public String algorithm;

    private BlockHasher hasher;
    private final int[] tokens = new int[TOKENS];
    private final long[] out = new long[2];

    @Setup
    public void setUp() {
        hasher = BlockHasher.create(HashAlgorithm.valueOf(algorithm), 0);
        SplittableRandom r = new SplittableRandom(1);
        for (int i = 0; i < TOKENS; i++) {
            tokens[i] = r.nextInt(32_000);
        }
    }

    @Benchmark
    @OperationsPerInvocation(TOKENS)
    public long chainedPromptKeys() {
        long hi = hasher.rootHi();
        long lo = hasher.rootLo();
        for (int off = 0; off < TOKENS; off += BLOCK) {
            hasher.hash(hi, lo, tokens, off, BLOCK, off == 0 ? 7 : 0, out);
            hi = out[0];
            lo = out[1];
        }
        return hi ^ lo;
    }
}
