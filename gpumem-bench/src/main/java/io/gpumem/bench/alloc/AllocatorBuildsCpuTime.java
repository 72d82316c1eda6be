package io.gpumem.bench.alloc;

import io.gpumem.bench.cputime.ThreadCpuTimer;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.reflect.Constructor;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.net.MalformedURLException;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * Before/after for a change to the allocator: gpumem's replay ({@link AllocatorPeersBench#gpumemLoop}) from two
 * or more builds of {@code benchmarks.jar}, measured in one JVM, interleaved, in thread CPU time.
 *
 * <p>Why: on the shared 2-core machine the figure of one build moves by 10-50% between runs minutes apart (other
 * jobs take the caches), which hides a change worth a few percent. Here every build gets its own class loader
 * (so each has its own classes and JIT-compiled code), all replay the same stream in the same process, and
 * round {@code r} measures each build once, in an order rotated every round, for about {@code millis} ms of CPU
 * time. The paired figure, the median over rounds of (build k's ns per pair / the first build's in the same
 * round), cancels most of what the machine does between rounds. A stream that a build does not know is skipped.
 *
 * <p>Then the same for each allocation policy on {@link PolicyPairBench}'s workloads (the stress mix, the recorded
 * lm2.7b and llama offload cycles and the two RMM-style random cycles, one malloc+free pair per call; a workload a build
 * lacks is skipped), for {@code pytorch} and {@code stitch}: each build's
 * benchmark object is set up as JMH would and its method called in batches of {@value #CALLS_PER_PASS}. The call
 * goes through a method handle, a few ns that every build pays alike.
 *
 * <p>Run: {@code java -XX:+UseSerialGC -Xmx2g -cp gpumem-bench/target/benchmarks.jar
 * io.gpumem.bench.alloc.AllocatorBuildsCpuTime ROUNDS MILLIS BEFORE.jar AFTER.jar...} from the project root
 * (copy the "before" jar aside before rebuilding; traces from {@code -Dgpumem.traces.dir}, default
 * {@code ../shared/traces}).
 */
public final class AllocatorBuildsCpuTime {
    private static final List<String> STREAMS =
            List.of("lm2.7b", "llama-offload", "rmm-random", "rmm-64mib", "training-loop");
    private static final List<String> POLICIES = List.of("pytorch", "stitch");
    private static final List<String> POLICY_WORKLOADS =
            List.of("stressPair", "recordedTracePair", "offloadPair", "randomPair", "randomLargePair");
    private static final int CALLS_PER_PASS = 1024;

    private AllocatorBuildsCpuTime() {}

    /** One build's replay of one stream (or batch of policy pairs), reached through its own class loader. */
    private record BuildReplay(Object replay, MethodHandle pass, int pairs, int callsPerRun) {
        void run() {
            try {
                for (int i = 0; i < callsPerRun; i++) {
                    pass.invoke(replay);
                }
            } catch (Throwable e) {
                throw new IllegalStateException("replay failed", e);
            }
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 4) {
            System.err.println("usage: AllocatorBuildsCpuTime ROUNDS MILLIS BEFORE.jar AFTER.jar...");
            System.exit(2);
        }
        int rounds = Integer.parseInt(args[0]);
        long millis = Long.parseLong(args[1]);
        List<Path> jars = new ArrayList<>();
        List<ClassLoader> loaders = new ArrayList<>();
        for (String a : Arrays.asList(args).subList(2, args.length)) {
            Path jar = Path.of(a);
            if (!Files.isRegularFile(jar)) {
                System.err.println("AllocatorBuildsCpuTime: no such jar " + jar);
                System.exit(2);
            }
            jars.add(jar);
            loaders.add(loader(jar));
        }
        for (String stream : STREAMS) {
            List<BuildReplay> replays = new ArrayList<>();
            for (ClassLoader l : loaders) {
                BuildReplay r = replay(l, stream);
                if (r == null) {
                    break;
                }
                replays.add(r);
            }
            if (replays.size() < loaders.size()) {
                System.out.printf("%-14s skipped: not known to every build%n", stream);
                continue;
            }
            measure(stream, jars, replays, rounds, millis);
        }
        for (String policy : POLICIES) {
            for (String workload : POLICY_WORKLOADS) {
                List<BuildReplay> replays = new ArrayList<>();
                for (ClassLoader l : loaders) {
                    BuildReplay r = policyPairs(l, policy, workload);
                    if (r == null) {
                        break;
                    }
                    replays.add(r);
                }
                if (replays.size() < loaders.size()) {
                    System.out.printf("%-26s skipped: not known to every build%n", policy + " " + workload);
                    continue;
                }
                measure(policy + " " + workload, jars, replays, rounds, millis);
            }
        }
        System.out.println("(thread CPU time, " + rounds + " rounds of ~" + millis + " ms per build; load average at"
                + " the end " + ThreadCpuTimer.loadAverage() + ")");
    }

    private static ClassLoader loader(Path jar) throws MalformedURLException {
        return new URLClassLoader(new URL[] {jar.toUri().toURL()}, ClassLoader.getPlatformClassLoader());
    }

    /**
     * The build's replay of {@code stream}, or null when the build does not know the stream. Builds since the
     * benchmarks play the engine's request stream name it {@code BenchStreams.named} and replay it in
     * {@code AllocatorPeersBench.gpumemLoop}; earlier builds had their own {@code RequestStream.named} and
     * {@code AllocatorPeersBench.GpumemReplay}, reached the same way so that a change can be measured against them.
     */
    private static @Nullable BuildReplay replay(ClassLoader loader, String stream) throws ReflectiveOperationException {
        boolean engineStream = loader.getResource("io/gpumem/bench/alloc/BenchStreams.class") != null;
        Class<?> streams = loader.loadClass(
                engineStream ? "io.gpumem.bench.alloc.BenchStreams" : "io.gpumem.bench.alloc.RequestStream");
        Method named = streams.getDeclaredMethod("named", String.class);
        named.setAccessible(true);
        Object requests;
        try {
            requests = named.invoke(null, stream);
        } catch (InvocationTargetException e) {
            if (!(e.getCause() instanceof IllegalArgumentException)) {
                throw e;
            }
            if (!engineStream || !stream.equals("rmm-64mib")) {
                return null;
            }
            // builds before the name existed: the same stream from their own generator
            Method rmm = streams.getDeclaredMethod("rmmRandom", int.class, long.class, long.class, long.class);
            rmm.setAccessible(true);
            Object raw = rmm.invoke(null, 10_000, 64L << 20, 16_000L << 20, 1L);
            Method rawLength = raw.getClass().getMethod("length");
            requests =
                    raw.getClass().getMethod("balanced", int.class, int.class).invoke(raw, 0, rawLength.invoke(raw));
        }
        Method length = named.getReturnType().getDeclaredMethod("length");
        length.setAccessible(true);
        int pairs = (int) length.invoke(requests) / 2;
        Object replay;
        Class<?> replayClass;
        if (engineStream) {
            Method make = loader.loadClass("io.gpumem.bench.alloc.AllocatorPeersBench")
                    .getDeclaredMethod("gpumemLoop", named.getReturnType());
            make.setAccessible(true);
            replay = make.invoke(null, requests);
            replayClass = make.getReturnType();
        } else {
            replayClass = loader.loadClass("io.gpumem.bench.alloc.AllocatorPeersBench$GpumemReplay");
            Constructor<?> make = replayClass.getDeclaredConstructor(streams);
            make.setAccessible(true);
            replay = make.newInstance(requests);
        }
        Method pass = replayClass.getDeclaredMethod("pass");
        pass.setAccessible(true);
        return new BuildReplay(replay, MethodHandles.lookup().unreflect(pass), pairs, 1);
    }

    /**
     * The build's {@link PolicyPairBench} for {@code policy}, set up, calling {@code workload} in batches; null when
     * the build has no such workload. Builds since the workloads are set up one at a time take its name; earlier
     * ones set up all of theirs.
     */
    private static @Nullable BuildReplay policyPairs(ClassLoader loader, String policy, String workload)
            throws ReflectiveOperationException {
        Class<?> bench = loader.loadClass("io.gpumem.bench.alloc.PolicyPairBench");
        Method benchmark;
        try {
            benchmark = bench.getMethod(workload);
        } catch (NoSuchMethodException e) {
            return null;
        }
        Object state = bench.getConstructor().newInstance();
        bench.getField("policy").set(state, policy);
        try {
            bench.getMethod("setUp", String.class).invoke(state, workload);
        } catch (NoSuchMethodException e) {
            bench.getMethod("setUp").invoke(state);
        }
        MethodHandle call = MethodHandles.lookup().unreflect(benchmark);
        return new BuildReplay(state, call, CALLS_PER_PASS, CALLS_PER_PASS);
    }

    private static void measure(String stream, List<Path> jars, List<BuildReplay> replays, int rounds, long millis) {
        int n = replays.size();
        for (BuildReplay r : replays) { // JIT warm-up: 2 s of CPU each
            long end = ThreadCpuTimer.now() + 2_000_000_000L;
            while (ThreadCpuTimer.now() < end) {
                r.run();
            }
        }
        double[][] nsPerPair = new double[n][rounds];
        for (int round = 0; round < rounds; round++) {
            for (int i = 0; i < n; i++) {
                int k = (i + round) % n;
                BuildReplay r = replays.get(k);
                long start = ThreadCpuTimer.now();
                long end = start + millis * 1_000_000L;
                long passes = 0;
                long now;
                do {
                    r.run();
                    passes++;
                    now = ThreadCpuTimer.now();
                } while (now < end);
                nsPerPair[k][round] = (double) (now - start) / (passes * r.pairs());
            }
        }
        StringBuilder line = new StringBuilder(String.format("%-26s", stream));
        for (int k = 0; k < n; k++) {
            double[] v = nsPerPair[k].clone();
            Arrays.sort(v);
            line.append(String.format(
                    "  %s %.1f ns (%.1f-%.1f)", jars.get(k).getFileName(), v[rounds / 2], v[0], v[rounds - 1]));
        }
        for (int k = 1; k < n; k++) {
            double[] ratio = new double[rounds];
            for (int round = 0; round < rounds; round++) {
                ratio[round] = nsPerPair[k][round] / nsPerPair[0][round];
            }
            Arrays.sort(ratio);
            line.append(String.format("  [build %d / build 0, paired: %.3f]", k, ratio[rounds / 2]));
        }
        System.out.println(line);
    }
}
