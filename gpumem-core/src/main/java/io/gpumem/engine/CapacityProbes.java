package io.gpumem.engine;

import io.gpumem.engine.MinimumCapacity.Verdict;
import io.gpumem.policy.PreparedPolicy;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.BooleanSupplier;
import org.jspecify.annotations.Nullable;

/**
 * The probes of one minimum-capacity search ({@link MinimumCapacity#search}) that reuse replayed prefixes instead
 * of replaying the whole stream for every capacity tried (issue 13): the search's optional speed-up, used where the
 * allocator is a {@link io.gpumem.alloc.ForkableAllocator} whose decisions the capacity does not shape.
 *
 * <p>Why it is exact: for such an allocator, the only thing the device's capacity changes in a run is whether a
 * device allocation succeeds (an out-of-memory report, which reads the capacity, comes after one failed). A device
 * malloc fails under capacity C exactly when the bytes consumed after it (plus those held outside) would exceed C.
 * So a run at C does exactly what the unlimited run did up to the first op after which the unlimited run's
 * consumed bytes exceed C ({@link #divergence}); from the rises of the unlimited run's peak ({@link PeakRises}) we
 * know that op without running. A probe at C therefore forks (deep copies of device and allocator,
 * {@link Checkpoint#fork}) the latest checkpoint at or before that op, on a device of capacity C (its
 * allocator uncounted: a probe reads no statistics, and their updates were 8-9% of its replay; and so it takes a
 * temporary, a malloc the next op frees, as one lookup,
 * {@link io.gpumem.alloc.ForkableAllocator#tryMallocFreedAtOnce}), replays on to the divergence op, leaves a
 * checkpoint there for later probes, and replays the rest, stopping at the first failure. A capacity the
 * unlimited run never exceeded runs without replaying at all (the run is the unlimited one); so does the run at
 * the compared capacity when that capacity is such ({@link #sameAsUnlimited}), whose counters are then the
 * unlimited run's.
 *
 * <p>Probes answered without replaying: the same argument bounds, for every probe made, the capacities whose run is
 * that probe's run. Each device allocation the probe made was granted or refused; granted ones left at most
 * {@link io.gpumem.device.SimulatedDevice#sameOutcomesFrom()} bytes in use (held outside included), refused ones
 * needed at least {@link io.gpumem.device.SimulatedDevice#sameOutcomesBelow()}. Any capacity in between grants and
 * refuses exactly the same calls, so its run is the probe's run, op for op, and ends the same way. A later probe
 * whose capacity falls in a range already seen ({@link #seen}) takes that run's outcome: the search asks the
 * same questions and gets the same answers, so the search still returns what full replays return, with fewer
 * replays (on a 2,000-step training stream under the default configuration, 4 of its 12 probes replayed).
 *
 * <p>Memory: a checkpoint holds copies of device and allocator and the addresses of the slots live at its op (not
 * one per slot of the stream, which would be 44 MB on a 1 GB snapshot's 5.5 M allocations); a search adds at most
 * {@link #MAX_CHECKPOINTS}: past that the oldest added goes (a search's next probe lies between its latest ones).
 * Which checkpoint a probe starts from changes only how much it replays, never its outcome. A probe plays into a
 * per-slot array a finished one left, cleared: a search allocates one array the size of the stream per probe it
 * runs at once (one, unless {@link ProbeLookahead} runs some ahead on idle workers).
 *
 * <p>Concurrency: the probes of one search may run side by side (the lookahead's); the seen runs, the checkpoints
 * and the spare arrays are guarded by this object, and each probe replays on its own copies, outside the lock. A
 * checkpoint is only read once made (forks copy it under its allocator's lock and its device's monitor).
 *
 * <p>Invariants: checkpoints are sorted by op; the first, at the stream's start, always stays; a checkpoint at op k
 * has consumed at most the unlimited run's peak before k, so every probe that uses it (C at least that
 * maximum) can copy it.
 *
 * <p>Not used (full replays) where the unlimited run itself failed or had a device allocation refused (its
 * "unlimited" device was not: e.g. a retry that freed the cache and then succeeded, or cached start segments
 * dropped for want of room), nor where the start state alone does not fit under C.
 */
final class CapacityProbes implements ProbeLookahead.AbandonableProbe {
    /** Ops a new checkpoint must save over the one it is forked from (a copy costs ~3,000 ops' replay). */
    static final int MIN_CHECKPOINT_GAIN = 4096;

    /** Checkpoints one search may add (at least one is kept), by default. */
    static final int MAX_CHECKPOINTS = 64;

    private final StreamRunner runner;
    private final PreparedPolicy policy;
    private final RunOptions options;
    /** The unlimited run's peak demand as it rose, and at which ops. */
    private final PeakRises rises;
    /** Ops in the stream. */
    private final int length;

    private final long startConsumed;
    private final List<Checkpoint> checkpoints = new ArrayList<>();
    /** The checkpoints added after the first, oldest first. */
    private final ArrayDeque<Checkpoint> added = new ArrayDeque<>();
    /** Per-slot address arrays of finished probes, to be cleared and reused by the next ones. */
    private final ArrayDeque<long[]> spareAddresses = new ArrayDeque<>();

    private final int maxAdded;

    /**
     * Capacity ranges [{@code from}, {@code below}) over which a probe's run is the same run, and how it ended: the op
     * of its first failure, −1 where it ran.
     */
    private record SeenRun(long from, long below, int failedOp) {}

    /** The runs of this search's replayed probes, in the order they were made (a search makes a dozen or so). */
    private final List<SeenRun> seen = new ArrayList<>();

    CapacityProbes(StreamRunner runner, PreparedPolicy policy, RunOptions unlimited, PeakRises rises) {
        this.runner = runner;
        this.policy = policy;
        this.options = unlimited;
        StreamRunner.Replay first = runner.begin(policy, unlimited);
        if (first == null) {
            throw new IllegalStateException("the start state fitted the unlimited run but not its checkpoint");
        }
        long held = unlimited.heldOutside();
        this.startConsumed = first.dev.consumedBytes() + held;
        checkpoints.add(Checkpoint.taking(first));
        this.maxAdded = Math.max(1, runner.maxCheckpoints());
        this.rises = rises;
        this.length = runner.stream().length;
    }

    /**
     * The first op after which the unlimited run had consumed (with the bytes held outside) more than
     * {@code capacity}: the op of its first peak rise above it; 0 when its start state alone did; length if none.
     */
    int divergence(long capacity) {
        if (startConsumed > capacity) {
            return 0;
        }
        int i = rises.firstAbove(capacity);
        return i < 0 ? length : rises.op(i);
    }

    /** Whether a run at {@code capacity} is the unlimited run: the start state and every op fit in it. */
    boolean sameAsUnlimited(long capacity) {
        return divergence(capacity) == length;
    }

    /**
     * Whether the stream runs without an out-of-memory error on a device of {@code capacity} bytes, or null once
     * {@code abandoned} says so: the replay checks it every
     * {@link StreamRunner#CHUNK} ops and stops there, recording no run (a checkpoint it left before stopping stays: it is a
     * state of the stream that every capacity at least its consumed bytes shares). Safe to call from several threads
     * at once: the probes of one search may run side by side ({@link ProbeLookahead}).
     */
    @Override
    public @Nullable Verdict probe(long capacity, BooleanSupplier abandoned) {
        if (startConsumed > capacity) {
            return runner.probe(policy, options.forSearch(capacity), abandoned);
        }
        int d = divergence(capacity);
        if (d == length) {
            return Verdict.RUNS; // never more than capacity consumed: this run is the unlimited one, which ran
        }
        Checkpoint base;
        long[] address;
        synchronized (this) {
            for (SeenRun run : seen) {
                if (run.from() <= capacity && capacity < run.below()) {
                    runner.probesAnsweredBySeenRuns.incrementAndGet();
                    return Verdict.ofRun(run.failedOp(), length); // the same run as a probe already made
                }
            }
            base = checkpoints.getFirst();
            for (int i = 0; i < checkpoints.size() && checkpoints.get(i).next <= d; i++) {
                base = checkpoints.get(i);
            }
            address = spareAddresses.poll();
        }
        if (address == null) {
            address = new long[runner.stream().slots];
        } else {
            Arrays.fill(address, 0);
        }
        StreamRunner.Replay r = base.fork(capacity, address);
        runner.replaysBegun.incrementAndGet();
        StreamRunner.Counters out = new StreamRunner.Counters();
        try {
            if (r.next < d) {
                if (!runner.playUnlessAbandoned(r, d, out, abandoned)) {
                    return null;
                }
                // a copy costs about as much as replaying a few thousand ops: keep only checkpoints that save more
                if (d - base.next >= runner.checkpointGain()) {
                    addCheckpoint(Checkpoint.copying(r));
                }
            }
            if (!runner.playUnlessAbandoned(r, runner.stream().length, out, abandoned)) {
                return null;
            }
        } finally {
            synchronized (this) {
                spareAddresses.push(r.address);
            }
        }
        synchronized (this) {
            seen.add(new SeenRun(
                    r.dev.sameOutcomesFrom(), r.dev.sameOutcomesBelow(), out.ooms == 0 ? -1 : out.failedOp));
        }
        // counted from the stream's start: the same share whichever checkpoint this probe was forked from, and whether
        // prefixes are reused at all, so the search asks the same probes either way
        return Verdict.ofRun(out.ooms == 0 ? -1 : out.failedOp, length);
    }

    /** Adds {@code checkpoint} in op order (unless one at its op is there), dropping the oldest added past the cap. */
    private synchronized void addCheckpoint(Checkpoint checkpoint) {
        int at = 0;
        while (at < checkpoints.size() && checkpoints.get(at).next < checkpoint.next) {
            at++;
        }
        if (at < checkpoints.size() && checkpoints.get(at).next == checkpoint.next) {
            return; // a probe beside this one left the same state there
        }
        checkpoints.add(at, checkpoint);
        added.addLast(checkpoint);
        if (added.size() > maxAdded) {
            Checkpoint oldest = added.removeFirst();
            checkpoints.removeIf(c -> c == oldest);
        }
    }

    /**
     * An unlimited run's peak demand (bytes consumed with those held outside, {@link
     * io.gpumem.device.SimulatedDevice#sameOutcomesFrom()}) each time it rose, with the op that raised it: a handful
     * of entries per segment the run created, where a per-op trajectory held a long for every op of the stream (23 MB
     * on the 276 MB demo snapshot's 2.95 M ops) and cost the replay loop a device read per op. Filled by the
     * unlimited run's device ({@link io.gpumem.device.SimulatedDevice#reportPeakDemandRises}) as the run plays.
     *
     * <p>Invariants: peaks strictly increase; ops never decrease.
     */
    static final class PeakRises {
        private int[] ops = new int[256];
        private long[] peaks = new long[256];
        private int count;

        /** Notes a rise to {@code peak} at op {@code op}. */
        void add(int op, long peak) {
            if (count == ops.length) {
                ops = Arrays.copyOf(ops, count * 2);
                peaks = Arrays.copyOf(peaks, count * 2);
            }
            ops[count] = op;
            peaks[count] = peak;
            count++;
        }

        /** Forgets every rise (a new unlimited run). */
        void clear() {
            count = 0;
        }

        /** The index of the first rise above {@code capacity}, or -1. */
        int firstAbove(long capacity) {
            int lo = 0;
            int hi = count;
            while (lo < hi) {
                int mid = (lo + hi) >>> 1;
                if (peaks[mid] > capacity) {
                    hi = mid;
                } else {
                    lo = mid + 1;
                }
            }
            return lo == count ? -1 : lo;
        }

        int op(int i) {
            return ops[i];
        }
    }
}
