package io.gpumem.bench.cputime;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.function.LongSupplier;

/**
 * The measuring loop of the thread-CPU-time harnesses ({@code AllocatorPeersCpuTime}, {@code ReplayCpuTime},
 * {@code AllocatorBuildsCpuTime}): on the shared 2-core build machine wall-clock scores move many times over with
 * the load, while the CPU time a thread spends on a fixed piece of work barely does.
 *
 * <p>A pass returns a value that is folded into a sink the JIT cannot prove unused, so the work is not removed.
 */
public final class ThreadCpuTimer {
    private static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();

    private ThreadCpuTimer() {}

    /** CPU time of the calling thread, in nanoseconds. */
    public static long now() {
        return THREADS.getCurrentThreadCpuTime();
    }

    /** Runs {@code pass} until about {@code cpuNanos} of this thread's CPU time are spent (JIT warm-up). */
    public static void spin(LongSupplier pass, long cpuNanos) {
        long end = now() + cpuNanos;
        long sink = 0;
        while (now() < end) {
            sink ^= pass.getAsLong();
        }
        keep(sink);
    }

    /** CPU nanoseconds per pass, over whole passes totalling about {@code millis} ms of this thread's CPU time. */
    public static double nsPerPass(LongSupplier pass, long millis) {
        long start = now();
        long end = start + millis * 1_000_000L;
        long passes = 0;
        long sink = 0;
        long now;
        do {
            sink ^= pass.getAsLong();
            passes++;
            now = now();
        } while (now < end);
        keep(sink);
        return (double) (now - start) / passes;
    }

    /** The system load average over the last minute, as the harnesses print it beside their figures. */
    public static double loadAverage() {
        return ManagementFactory.getOperatingSystemMXBean().getSystemLoadAverage();
    }

    private static void keep(long sink) {
        if (sink == 42) {
            System.out.print(""); // keeps the passes' results alive
        }
    }
}
