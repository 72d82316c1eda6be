package io.gpumem.engine;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.policy.PolicyRegistry;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.SplittableRandom;
import org.jspecify.annotations.Nullable;

/**
 * Runs a small generated training stream through the exact allocator's what-if paths (an unlimited run that counts,
 * then a capacity search whose probes count nothing and fail with out-of-memory errors) under the configuration
 * families a large command tries, before that command's own runs begin.
 *
 * <h2>Why</h2>
 * C2 compiles a branch its profile never saw as a trap. The first what-if run of a large file counts its statistics
 * under the default configuration; the probes that follow do not count, and a {@code max_split_size_mb} or
 * {@code expandable_segments} run takes branches the default one never took, so each first use cost a
 * deoptimisation and a recompilation of the allocator's hot methods: 133 of them in a cold {@code analyze} of the
 * 276 MB demo snapshot, over a second of C2's time on two cores. Run on a thread of its own while the file is read
 * (one core is otherwise idle then), this stream makes every such branch seen, in the interpreter and C1's profiled
 * code, before C2 first compiles the allocator.
 *
 * <p>It changes no result: it uses its own devices and allocators, and the stream is fixed (seeded), so its work
 * is the same every time. Only the JIT's profiles and the time of compilations differ. Its simulated devices' Flight
 * Recorder events, like those of every what-if run, reach a recording that enables gpumem's events (on the thread
 * {@code gpumem-warm-up}).
 */
public final class AllocatorWarmUp {
    /** The configurations whose branches the warm-up takes: the default, an oversize limit, expandable segments. */
    static final String[] CONFIGURATIONS = {"", "max_split_size_mb:128", "expandable_segments:True"};

    private static final long MIB = 1L << 20;

    /** The device of the compare run: below what the stream needs, so that its run fails requests. */
    private static final long CAPACITY = 512 * MIB;

    /** Where the unlimited run starts: more than the stream ever reserves. */
    private static final long ROOMY = 64L << 30;

    /**
     * The input size from which a command's what-if runs are worth warming up for: the size from which the launcher
     * gives a command C2 at all (scripts/jvm-sizing.sh); below it C1 alone compiles, and C1 compiles every branch.
     */
    public static final long FROM_INPUT_BYTES = 64L << 20;

    private AllocatorWarmUp() {}

    /**
     * Starts the warm-up on a daemon thread when a command's input of {@code inputBytes} is large enough for it to
     * pay ({@link #FROM_INPUT_BYTES}); returns the thread, or null when it did not start. The thread ends by itself
     * (in about a tenth of a second of CPU) or with the JVM; nobody needs to wait for it.
     */
    public static @Nullable Thread startFor(long inputBytes) {
        if (inputBytes < FROM_INPUT_BYTES) {
            return null;
        }
        Thread t = new Thread(AllocatorWarmUp::runQuietly, "gpumem-warm-up");
        t.setDaemon(true);
        t.start();
        return t;
    }

    private static void runQuietly() {
        try {
            run();
        } catch (RuntimeException e) {
            // The stream is fixed and tested (AllocatorWarmUpTest): a failure here is a bug there, and must not
            // reach the output of the command this only speeds up.
        }
    }

    /**
     * Runs the warm-up on the calling thread; returns each configuration's outcome, in {@link #CONFIGURATIONS} order.
     */
    public static List<RunOutcome> run() {
        RequestStream stream = trainingStream(12, 0x5EEDL);
        StreamRunner runner = new StreamRunner(stream);
        List<RunOutcome> outcomes = new ArrayList<>();
        for (String configuration : CONFIGURATIONS) {
            outcomes.add(runner.evaluate(
                    PolicyRegistry.exact(AllocatorConfig.parse(configuration)),
                    RunOptions.builder(CAPACITY).build(),
                    ROOMY));
        }
        return outcomes;
    }

    /**
     * A training loop of {@code steps} steps: weights and optimizer state allocated once, then per step activations
     * whose sizes follow a sequence length drawn per step (small, medium, large and oversize blocks among them),
     * temporaries freed in their phase, activations freed in reverse in the backward pass.
     */
    static RequestStream trainingStream(int steps, long seed) {
        SplittableRandom random = new SplittableRandom(seed);
        RequestStream.Builder b = RequestStream.builder();
        int entry = 0;
        for (int i = 0; i < 8; i++) {
            b.alloc((24 + 8 * i) * MIB, 0, entry++);
            b.alloc(512 + 1024L * i, 0, entry++);
        }
        Deque<Integer> activations = new ArrayDeque<>();
        for (int step = 0; step < steps; step++) {
            b.step(entry++);
            long length = 64L + random.nextInt(192);
            for (int layer = 0; layer < 12; layer++) {
                activations.push(b.alloc(length * 768 * 4, 0, entry++));
                activations.push(b.alloc(length * length * 96, 0, entry++));
                activations.push(b.alloc(2048 + random.nextInt(4096), 0, entry++));
                int temporary = b.alloc(length * 3 * MIB, 0, entry++);
                b.free(temporary, entry++);
            }
            while (!activations.isEmpty()) {
                b.free(activations.pop(), entry++);
            }
        }
        return b.build();
    }
}
