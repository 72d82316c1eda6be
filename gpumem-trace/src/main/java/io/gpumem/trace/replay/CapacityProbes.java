package io.gpumem.trace.replay;

import io.gpumem.config.AllocatorConfig;
import java.util.ArrayList;
import java.util.List;

/**
 * The probes of one minimum-capacity search ({@link io.gpumem.trace.whatif.MinimumCapacity#search}) that reuse
 * replayed prefixes instead of replaying the whole window for every capacity tried (issue 13).
 *
 * <p>Why it is exact: for a configuration without expandable segments, the only thing the device's capacity
 * changes in a what-if replay is whether a {@code cudaMalloc} succeeds (the out-of-memory report, which reads the
 * capacity, comes after one failed; the garbage-collection threshold needs a memory fraction, which what-if never
 * sets). A device malloc fails under capacity C exactly when the bytes consumed after it would exceed C. So a run
 * at C does exactly what the unlimited run did up to the first entry after which the unlimited run's consumed
 * bytes exceed C ({@link #divergence}); from the unlimited run's trajectory we know that entry without running.
 * A probe at C therefore forks (deep copies device and allocator, {@link WhatIfReplay.Replay#copy}) the latest
 * checkpoint at or before that entry, on a device of capacity C, replays on to the divergence entry, leaves a
 * checkpoint there for later probes, and replays the rest, stopping at the first failure. A capacity the
 * unlimited run never exceeded runs without replaying at all (the run is the unlimited one); so does the run
 * at the recorded capacity when that capacity is such ({@link #sameAsUnlimited}), whose counters are then the
 * unlimited run's.
 *
 * <p>Invariants: checkpoints are sorted by entry; a checkpoint at entry k has consumed at most the
 * prefix maximum of the trajectory before k, so every probe that uses it (C at least that maximum) can copy it.
 *
 * <p>Not used (full replays, as before) for expandable segments: their reservation is sized from the device's
 * capacity, so runs under different capacities differ from their first segment on; nor when the unlimited run
 * itself failed or had a device allocation refused (its "unlimited" device was not: e.g. a retry that freed
 * the cache and then succeeded, or cached start segments dropped for want of room), nor where the start state
 * alone does not fit under C.
 */
final class CapacityProbes {
    /** Entries a new checkpoint must save over the one it is forked from (a copy costs ~3,000 entries' replay). */
    static final int MIN_CHECKPOINT_GAIN = 4096;

    private final WhatIfReplay replay;
    private final AllocatorConfig config;
    /** Running maximum of the consumed bytes after each entry of the unlimited run. */
    private final long[] peakAfter;
    private final long startConsumed;
    private final List<WhatIfReplay.Replay> checkpoints = new ArrayList<>();

    /** Whether prefix reuse is exact for this configuration and unlimited run. */
    static boolean applies(AllocatorConfig config, WhatIfReplay.Outcome unlimited) {
        return !config.expandableSegments() && unlimited.ooms == 0 && unlimited.refusedForMemory == 0;
    }

    CapacityProbes(WhatIfReplay replay, AllocatorConfig config, long roomy, long[] consumedAfter) {
        this.replay = replay;
        this.config = config;
        WhatIfReplay.Replay first = replay.begin(config, roomy);
        if (first == null) {
            throw new IllegalStateException("the start state fitted the unlimited run but not its checkpoint");
        }
        this.startConsumed = first.dev.consumedBytes();
        checkpoints.add(first);
        // the caller's trajectory becomes its running maximum in place (it is not used otherwise)
        this.peakAfter = consumedAfter;
        long peak = startConsumed;
        for (int k = 0; k < consumedAfter.length; k++) {
            peak = Math.max(peak, consumedAfter[k]);
            peakAfter[k] = peak;
        }
    }

    /** The first entry after which the unlimited run had consumed more than {@code capacity}; length if none. */
    int divergence(long capacity) {
        int lo = 0;
        int hi = peakAfter.length;
        while (lo < hi) {
            int mid = (lo + hi) >>> 1;
            if (peakAfter[mid] > capacity) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        return lo;
    }

    /** Whether a run at {@code capacity} is the unlimited run: the start state and every entry fit in it. */
    boolean sameAsUnlimited(long capacity) {
        return startConsumed <= capacity && divergence(capacity) == peakAfter.length;
    }

    /** Whether the window runs without an out-of-memory error on a device of {@code capacity} bytes. */
    boolean runsWithoutOom(long capacity) {
        if (startConsumed > capacity) {
            return replay.run(config, capacity, true).ooms == 0;
        }
        int d = divergence(capacity);
        if (d == peakAfter.length) {
            return true;        // never more than capacity consumed: this run is the unlimited one, which ran
        }
        WhatIfReplay.Replay base = checkpoints.getFirst();
        int at = 0;
        for (int i = 0; i < checkpoints.size() && checkpoints.get(i).next <= d; i++) {
            base = checkpoints.get(i);
            at = i;
        }
        WhatIfReplay.Replay r = base.copy(capacity);
        replay.replaysBegun.incrementAndGet();
        WhatIfReplay.Outcome out = new WhatIfReplay.Outcome();
        if (r.next < d) {
            replay.play(r, d, out, true, null);
            // a copy costs about as much as replaying a few thousand entries: keep only checkpoints that save more
            if (d - base.next >= replay.checkpointGain) {
                checkpoints.add(at + 1, r.copy(capacity));
            }
        }
        replay.play(r, replay.requests().length, out, true, null);
        return out.ooms == 0;
    }
}
