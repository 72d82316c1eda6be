package io.gpumem.trace.replay;

import io.gpumem.device.SimulatedDevice;
import io.gpumem.history.TraceEntry;
import io.gpumem.oom.OutOfMemoryException;
import io.gpumem.alloc.GpuAllocator;
import io.gpumem.plan.LifetimeProblem;
import io.gpumem.policy.PolicySpec;
import io.gpumem.policy.PreparedPolicy;
import io.gpumem.policy.StreamFacts;
import java.util.HashMap;
import java.util.Map;
import io.gpumem.trace.whatif.WhatIfOutcome;

/**
 * What-if replay of a window's request stream under an allocation policy other than the PyTorch-exact allocator
 * ({@code compare --policy}). The start state's live blocks are allocated first, in slot order (their recorded
 * layout means nothing to another policy), then the window's requests run as in {@link WhatIfReplay}, on a
 * {@link SimulatedDevice} of the given capacity. The minimum capacity is searched the same way, in 2 MiB steps.
 *
 * <p>Every policy is prepared once per replay object from the window's {@link StreamFacts} (no steps; the profile
 * is the recorded run: start blocks live from time 0, each window alloc from its op index to the op that frees
 * it, or to the end), so a planning policy plans once and every run of the search reuses the plan.
 */
public final class PolicyReplay {

    private static final long GRANULE = 2L << 20;

    private final WhatIfReplay replay;
    private final RequestStream rs;
    private final StreamFacts facts = StreamFacts.of(false, this::profile);
    private final Map<PolicySpec, PreparedPolicy> prepared = new HashMap<>();

    public PolicyReplay(WhatIfReplay replay) {
        this.replay = replay;
        this.rs = replay.requests();
    }

    /** The window as a profile: request k of the replay is buffer k of the profile. */
    private LifetimeProblem profile() {
        int n = rs.slots;
        long[] lower = new long[n];
        long[] upper = new long[n];
        long[] size = new long[n];
        long[] id = new long[n];
        int[] slot = {0};
        RequestStream.forEachStartBlock(replay.start(), (seg, b) -> {
            size[slot[0]] = b.size();
            slot[0]++;
        });
        java.util.Arrays.fill(upper, rs.length + 1L);
        for (int k = 0; k < rs.length; k++) {
            if (rs.op[k] == RequestStream.ALLOC) {
                lower[rs.slot[k]] = k + 1L;
                size[rs.slot[k]] = Math.max(1, rs.size[k]);
            } else if (rs.op[k] == RequestStream.FREE) {
                upper[rs.slot[k]] = k + 1L;
            }
        }
        for (int i = 0; i < n; i++) {
            id[i] = i;
        }
        return new LifetimeProblem(id, lower, upper, size, 512);
    }

    private GpuAllocator create(PolicySpec spec, SimulatedDevice dev) {
        return prepared.computeIfAbsent(spec, s -> s.prepare(facts)).create(dev);
    }

    /** Runs the window under {@code spec} at {@code capacity} and searches its minimum capacity. */
    public WhatIfOutcome evaluate(PolicySpec spec, long capacity) {
        WhatIfReplay.Outcome at = run(spec, capacity, false);
        long roomy = Math.max(8L << 30, 2 * replay.recorded().peakReserved());
        WhatIfReplay.Outcome unlimited = run(spec, roomy, false);
        for (int tries = 0; unlimited.ooms > 0 && tries < 8; tries++) {
            roomy *= 2;
            unlimited = run(spec, roomy, false);
        }
        long hi = (unlimited.peakReserved + GRANULE - 1) / GRANULE;
        long lo = Math.max(0, unlimited.peakAllocated / GRANULE - 1);
        if (lo >= hi) {
            lo = hi - 1;
        }
        while (hi - lo > 1) {
            long mid = (lo + hi) >>> 1;
            if (run(spec, mid * GRANULE, true).ooms == 0) {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        return new WhatIfOutcome(spec.options(), false, capacity, at.peakAllocated, at.peakReserved, at.deviceAllocs,
                at.deviceFrees, at.retries, at.ooms, hi * GRANULE, spec.name(), at.deviceMaps, at.nsPerPair());
    }

    /**
     * The policy allocator's own snapshot ({@code GpuAllocator.snapshot()}) after the window ran under
     * {@code spec} at {@code capacity} (requests that fail are skipped, as in {@link #evaluate}); {@code null}
     * when even the window's start does not fit. History is recorded as {@code _record_memory_history()} does by
     * default (every entry, stacks at alloc and free): each request carries the stack and time of the recorded
     * entry it replays, so live blocks and the trace show the recorded frames; the start state's blocks have none.
     */
    public io.gpumem.history.MemorySnapshot snapshot(PolicySpec spec, long capacity) {
        io.gpumem.history.MemorySnapshot[] end = {null};
        run(spec, capacity, false, true, policy -> end[0] = policy.snapshot());
        return end[0];
    }

    /** One replay under {@code spec}; with {@code stopAtOom} it returns at the first failed request. */
    WhatIfReplay.Outcome run(PolicySpec spec, long capacity, boolean stopAtOom) {
        return run(spec, capacity, stopAtOom, false, null);
    }

    private WhatIfReplay.Outcome run(PolicySpec spec, long capacity, boolean stopAtOom, boolean history,
                                     java.util.function.Consumer<GpuAllocator> atEnd) {
        WhatIfReplay.Outcome out = new WhatIfReplay.Outcome();
        SimulatedDevice dev = SimulatedDevice.builder().capacity(capacity).build();
        GpuAllocator policy;
        try {
            policy = create(spec, dev);
        } catch (OutOfMemoryException e) {
            out.ooms = 1;
            return out;
        }
        int[] op = {-1};
        if (history) {
            java.util.List<TraceEntry> trace = replay.snapshot().traceOf(replay.device());
            policy.internals().recordHistory(io.gpumem.history.HistoryOptions.all());
            policy.internals().setContextSupplier(() -> {
                java.util.List<io.gpumem.history.Frame> f = op[0] < 0 ? null : trace.get(rs.entry[op[0]]).frames();
                return f == null ? java.util.List.of() : f;
            });
            policy.internals().setClock(() -> op[0] < 0 ? 0 : trace.get(rs.entry[op[0]]).timeUs());
        }
        long[] devStreams = new long[rs.streams.length];
        for (int i = 0; i < devStreams.length; i++) {
            devStreams[i] = rs.streams[i] == 0 ? 0 : dev.createStream();
        }
        long[] address = new long[rs.slots];
        int[] slot = {0};
        boolean[] failed = {false};
        RequestStream.forEachStartBlock(replay.start(), (seg, b) -> {
            int s = slot[0]++;
            if (failed[0]) {
                return;
            }
            try {
                address[s] = policy.malloc(b.size(), devStreams[rs.streamIndexOf(seg.stream())]);
            } catch (OutOfMemoryException e) {
                failed[0] = true;
            }
        });
        if (failed[0]) {
            out.ooms = 1;
            return out;
        }
        long t0 = System.nanoTime();
        for (int k = 0; k < rs.length; k++) {
            op[0] = k;
            switch (rs.op[k]) {
                case RequestStream.ALLOC -> {
                    try {
                        address[rs.slot[k]] = policy.malloc(rs.size[k], devStreams[rs.streamIndex[k]]);
                    } catch (OutOfMemoryException oom) {
                        out.ooms++;
                        if (stopAtOom) {
                            return out;
                        }
                    }
                }
                case RequestStream.FREE -> {
                    long a = address[rs.slot[k]];
                    if (a != 0) {
                        policy.free(a);
                        address[rs.slot[k]] = 0;
                    }
                }
                default -> policy.emptyCache();
            }
        }
        out.finish(System.nanoTime() - t0, rs.allocs, dev, policy.stats());
        if (atEnd != null) {
            atEnd.accept(policy);
        }
        return out;
    }
}
