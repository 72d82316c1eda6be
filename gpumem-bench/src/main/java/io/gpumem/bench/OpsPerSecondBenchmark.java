package io.gpumem.bench;

import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;

/**
 * What the throughput benchmarks report, said once: operations per second (JMH's throughput mode), so that their
 * scores read alike (a pair, a trace entry, whatever each counts as its operation). JMH's annotations are
 * inherited: a benchmark that extends this class keeps its own state scope, iterations and fork settings.
 */
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
public abstract class OpsPerSecondBenchmark {}
