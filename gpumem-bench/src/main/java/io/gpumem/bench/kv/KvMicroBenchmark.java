package io.gpumem.bench.kv;

import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The run shape of the KV-cache micro-benchmarks, said once: per-thread state, 3 warm-up and 5 measured iterations
 * of one second in one fork (an operation costs nanoseconds, so a second holds millions of them). JMH's annotations
 * are inherited, so a benchmark that extends this class runs so and adds only its mode and unit.
 */
@State(Scope.Thread)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
abstract class KvMicroBenchmark {}
