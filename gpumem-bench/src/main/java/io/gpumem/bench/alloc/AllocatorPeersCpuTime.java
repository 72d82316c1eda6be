package io.gpumem.bench.alloc;

import io.gpumem.bench.cputime.ThreadCpuTimer;
import io.gpumem.engine.RequestStream;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.LongSupplier;

/**
 * The {@link AllocatorPeersBench} comparison measured in thread CPU time instead of wall time, for a shared
 * machine: on the project's 2-core VM, with other builds running, a JMH thread gets a varying fraction of a core,
 * so wall-clock scores of benchmarks run one after another move with the load, not with the code. CPU time
 * charged to the benchmark thread moves far less (caches and frequency still do).
 *
 * <p>Method: for every stream, the six replayers (gpumem's exact allocator, its {@code stitch} policy, our TLSF,
 * Netty, bump pointer, the {@code rmm-pool} model of RMM's pool) are warmed up (JIT), then
 * measured in {@code rounds} interleaved rounds; in each round each replayer runs {@code reps} repetitions of
 * whole passes totalling about {@code millis} ms of CPU time, and a repetition's figure is CPU ns per
 * malloc+free pair. Printed: the median and the spread (min–max) over all repetitions, the ratios of the medians
 * (stitch / exact, exact / TLSF, exact / Netty, exact / bump, rmm-pool / exact, as time ratios), and the load average before and
 * after. One JVM for all, so the streams share the JIT's profile as a library user's process would; every ratio
 * RESULTS.md gives between allocators comes from one such run.
 *
 * <p>Run: {@code java -XX:+UseSerialGC -Xmx2g -cp gpumem-bench/target/benchmarks.jar
 * io.gpumem.bench.alloc.AllocatorPeersCpuTime [rounds reps millis]} (defaults 5, 10, 100) from the project root
 * (traces from {@code -Dgpumem.traces.dir}, default {@code ../shared/traces}). The collector options are those
 * of the JMH fork and matter: under the default G1 the bump pointer's garbage (boxed keys, ~104 B a pair) makes
 * its own thread refine cards, which measured it at 350-370 ns a pair on lm2.7b instead of 25-30 ns, and G1's
 * write barriers cost gpumem's tree links some 5-30% more.
 * To compare two builds of the allocator, use {@link AllocatorBuildsCpuTime}.
 */
public final class AllocatorPeersCpuTime {

    private AllocatorPeersCpuTime() {}

    public static void main(String[] args) {
        int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 5;
        int reps = args.length > 1 ? Integer.parseInt(args[1]) : 10;
        long millis = args.length > 2 ? Long.parseLong(args[2]) : 100;
        System.out.println("load average at the start " + ThreadCpuTimer.loadAverage());
        System.out.printf("%-14s %-8s %10s %20s%n", "stream", "peer", "ns/pair", "spread (min-max)");
        for (String name : BenchStreams.NAMES) {
            RequestStream s = BenchStreams.named(name);
            int pairs = s.allocs();
            StreamLoop gpumem = AllocatorPeersBench.gpumemLoop(s);
            StreamLoop stitch = PolicyPairBench.loop("stitch", s);
            StreamLoop rmmPool = PolicyPairBench.loop("rmm-pool", s);
            AllocatorPeersBench.TlsfReplay tlsf = new AllocatorPeersBench.TlsfReplay(s);
            AllocatorPeersBench.NettyReplay netty = new AllocatorPeersBench.NettyReplay(s);
            AllocatorPeersBench.BumpReplay bump = new AllocatorPeersBench.BumpReplay(s);
            String[] peers = {"gpumem", "stitch", "tlsf", "netty", "bump", "rmm-pool"};
            LongSupplier[] pass = {gpumem::pass, stitch::pass, tlsf::pass, netty::pass, bump::pass, rmmPool::pass};
            // warm-up: JIT the three loops (about as long as one round)
            for (LongSupplier p : pass) {
                ThreadCpuTimer.spin(p, millis * reps * 1_000_000L / 2);
            }
            List<List<Double>> perPeer = new ArrayList<>();
            for (int k = 0; k < peers.length; k++) {
                perPeer.add(new ArrayList<>());
            }
            for (int round = 0; round < rounds; round++) {
                for (int k = 0; k < pass.length; k++) {
                    for (int r = 0; r < reps; r++) {
                        perPeer.get(k).add(ThreadCpuTimer.nsPerPass(pass[k], millis) / pairs);
                    }
                }
            }
            double[] median = new double[peers.length];
            for (int k = 0; k < peers.length; k++) {
                double[] v = perPeer.get(k).stream()
                        .mapToDouble(Double::doubleValue)
                        .sorted()
                        .toArray();
                median[k] = v[v.length / 2];
                System.out.printf("%-14s %-8s %10.1f %10.1f-%.1f%n", name, peers[k], median[k], v[0], v[v.length - 1]);
            }
            System.out.printf(
                    "%-14s time ratios (< 1 = the first faster): stitch/gpumem %.2f, gpumem/tlsf %.2f, gpumem/netty"
                            + " %.2f, gpumem/bump %.2f, rmm-pool/gpumem %.2f%n",
                    name,
                    median[1] / median[0],
                    median[0] / median[2],
                    median[0] / median[3],
                    median[0] / median[4],
                    median[5] / median[0]);
        }
        System.out.println("(thread CPU time, " + rounds + " interleaved rounds x " + reps + " repetitions of ~"
                + millis + " ms; load average at the end "
                + Arrays.toString(new double[] {ThreadCpuTimer.loadAverage()}) + ")");
    }
}
