package io.gpumem.trace.analysis;

import io.gpumem.alloc.Pool;
import io.gpumem.alloc.SizeRules;
import io.gpumem.size.ByteSize;
import java.util.ArrayList;
import java.util.List;

/**
 * The rules that turn a {@link StateAnalysis} into a {@link Diagnosis}; the thresholds are the public
 * constants below (documented in README-analysis.md).
 *
 * <p>The rules rest on one identity for a device of capacity C: C = allocated + (reserved − allocated)
 * + driver free + outside. A request of R bytes failed; the question is which term would have to shrink
 * for it to fit.
 * When no cached block fits, the driver must supply a new segment of S = {@link SizeRules#allocationSize}(R) bytes
 * (20 MiB for a request of 1 to 10 MiB), so S, not R, is what driver free is measured against.
 * <ol>
 *   <li><b>Fragmentation</b>: something is cached (reserved-but-unallocated U &gt; 0), and U ≥ R or U plus
 *       driver free ≥ S. The bytes exist, yet no free block of the request's pool and stream is large enough
 *       (PyTorch has already released whole free segments in its retry, so what is left is pinned between live
 *       blocks).</li>
 *   <li><b>Request too large</b>: otherwise, when S exceeds reserved plus driver free (capacity less what is held
 *       outside; capacity itself when driver free is unknown): the request fails with no tensor live.</li>
 *   <li><b>Memory outside the allocator</b>: otherwise, when capacity is known, and the outside bytes are at
 *       least {@link #OUTSIDE_SHARE} of capacity and would cover what is still missing.</li>
 *   <li><b>Live tensors</b>: otherwise; the shortfall (S less cached and driver-free bytes, at most what is
 *       allocated) is what live tensors must shrink by.</li>
 * </ol>
 * Without an {@code oom} entry a state is diagnosed only when it is near capacity: the used share, not
 * counting cached bytes {@code empty_cache()} (and so PyTorch's OOM retry) would return, is at least
 * {@link #NEAR_CAPACITY}. Then the largest term decides: free bytes pinned between live blocks at least
 * {@link #FRAGMENTED_CACHE_SHARE} of reserved mean fragmentation, outside ≥ {@link #OUTSIDE_SHARE} of capacity means outside memory, else
 * live tensors.
 */
public final class DiagnosisRules {
    /** A device whose used share (capacity − driver free, or reserved; less releasable cache) reaches this is near capacity. */
    public static final double NEAR_CAPACITY = 0.90;
    /** Memory outside the allocator counts when it is at least this share of capacity. */
    public static final double OUTSIDE_SHARE = 0.05;
    /** Near capacity without an OOM, pinned free bytes at least this share of reserved mean fragmentation. */
    public static final double FRAGMENTED_CACHE_SHARE = 0.10;
    /** Reserved / allocated above this counts as severe waste (STAlloc's rule of thumb, 90% utilisation). */
    public static final double SEVERE_WASTE_RATIO = 1.11;

    private DiagnosisRules() {}

    static Diagnosis diagnose(StateAnalysis a) {
        MemoryState state = a.state();
        PoolUsage all = a.all();
        long capacity = state.capacity();
        long deviceFree = state.deviceFree();
        long outside = capacity >= 0 && deviceFree >= 0 ? Math.max(0, capacity - all.reserved() - deviceFree) : -1;
        List<String> evidence = new ArrayList<>();
        if (state.oom().isPresent()) {
            return diagnoseOom(a, state.oom().get(), capacity, Math.max(0, deviceFree), outside, evidence);
        }
        String verdict;
        if (capacity > 0) {
            long used = (deviceFree >= 0 ? capacity - deviceFree : all.reserved()) - all.releasable();
            double share = (double) used / capacity;
            if (share >= NEAR_CAPACITY) {
                return diagnoseNearCapacity(a, capacity, outside, share, evidence);
            }
            verdict = "no oom entry and " + Percent.of(share) + " of capacity in use (below "
                    + Percent.of(NEAR_CAPACITY) + ")";
        } else {
            verdict =
                    "no oom entry and device capacity unknown (pass --capacity to check how near capacity the state is)";
        }
        evidence.add("reserved/allocated = " + all.reservedPerAllocatedText()
                + (all.reservedPerAllocated() > SEVERE_WASTE_RATIO
                        ? " (above " + SEVERE_WASTE_RATIO + ": severe waste)"
                        : ""));
        return new Diagnosis(DiagnosisKind.NONE, verdict, evidence, 0, outside);
    }

    private static Diagnosis diagnoseOom(
            StateAnalysis a, OomEvent oom, long capacity, long deviceFree, long outside, List<String> evidence) {
        PoolUsage all = a.all();
        long request = oom.requestBytes();
        Pool pool = SizeRules.poolFor(request);
        long largest = a.largestFree(pool, oom.stream());
        long unallocated = all.unallocated();
        String where = oom.entryIndex() < 0
                ? "oom"
                : (oom.replayed() ? "replayed oom at entry #" : "oom entry #") + oom.entryIndex();
        String trigger = where + ": a request of " + ByteSize.formatSigned(request) + " on stream " + oom.stream()
                + " (" + pool.statName() + ") failed";
        evidence.add("largest free block of " + pool.statName() + " on stream " + oom.stream() + ": "
                + ByteSize.formatSigned(largest) + " (< " + ByteSize.formatSigned(request) + ")");
        evidence.add("reserved but unallocated: " + ByteSize.formatSigned(unallocated) + " in " + all.freeBlocks()
                + " free blocks (" + ByteSize.formatSigned(all.pinnedFree())
                + " pinned between live blocks); driver free: "
                + (a.state().deviceFree() >= 0 ? ByteSize.formatSigned(deviceFree) : "unknown"));
        // What the driver must hand out when no cached block fits: a whole new segment (20 MiB for a 1-10 MiB
        // request), not the request; comparing driver free with the request called a failed segment fragmentation.
        long segment = SizeRules.allocationSize(request);
        // Fragmentation needs cached bytes: with none cached no block can be too small, whatever the driver holds.
        if (unallocated > 0 && (unallocated >= request || unallocated + deviceFree >= segment)) {
            // (U + F >= S >= R: the sum covers the request too)
            evidence.add((unallocated + deviceFree >= segment
                            ? "unallocated + driver free = " + ByteSize.formatSigned(unallocated + deviceFree)
                            : "unallocated " + ByteSize.formatSigned(unallocated))
                    + " >= request: the bytes exist but no block fits (external fragmentation "
                    + Percent.of(all.externalFragmentation()) + ")");
            return new Diagnosis(DiagnosisKind.FRAGMENTATION, trigger, evidence, 0, outside);
        }
        long missing = segment - unallocated - deviceFree;
        // All the allocator holds or could get is reserved + driver free (capacity less what is held outside); a
        // request past that fits however few tensors live, so live tensors must not take the blame. Unknown driver
        // free: capacity is the bound.
        long reachable = a.state().deviceFree() >= 0 ? all.reserved() + deviceFree : capacity;
        if (reachable >= 0 && segment > reachable) {
            long beyond = segment - reachable;
            evidence.add("the request needs a segment of " + ByteSize.formatSigned(segment) + ", more than "
                    + (a.state().deviceFree() >= 0
                            ? "reserved + driver free (" + ByteSize.formatSigned(reachable) + ")"
                            : "the device's capacity (" + ByteSize.formatSigned(capacity) + ")")
                    + " by " + ByteSize.formatSigned(beyond)
                    + ": it would fail with no tensor live");
            if (outside > 0) {
                evidence.add("held outside the allocator (capacity - reserved - driver free): "
                        + ByteSize.formatSigned(outside) + " of " + ByteSize.formatSigned(capacity)
                        + (segment <= capacity
                                ? "; the request fits the device only if that memory is freed"
                                : "; the request is larger than the whole device"));
            }
            return new Diagnosis(DiagnosisKind.REQUEST_TOO_LARGE, trigger, evidence, beyond, outside);
        }
        if (outside >= 0) {
            evidence.add("held outside the allocator (capacity - reserved - driver free): "
                    + ByteSize.formatSigned(outside) + " of " + ByteSize.formatSigned(capacity));
            if (outside >= OUTSIDE_SHARE * capacity && outside >= missing) {
                evidence.add("even every cached byte leaves " + ByteSize.formatSigned(missing)
                        + " missing, which the outside memory would cover");
                return new Diagnosis(DiagnosisKind.OUTSIDE_MEMORY, trigger, evidence, missing, outside);
            }
        } else {
            evidence.add("capacity unknown: memory held outside the allocator cannot be measured (pass --capacity)");
        }
        long base = capacity > 0 ? capacity : all.reserved() + deviceFree;
        evidence.add("allocated: " + ByteSize.formatSigned(all.allocated()) + " = "
                + Percent.of((double) all.allocated() / base) + " of "
                + (capacity > 0 ? "capacity" : "reserved + driver free")
                + "; even with every cached byte the request lacks " + ByteSize.formatSigned(missing));
        // (with driver free unknown, counted as 0, missing can exceed what is live; no shrinking frees more)
        return new Diagnosis(
                DiagnosisKind.LIVE_TENSORS, trigger, evidence, Math.min(missing, all.allocated()), outside);
    }

    private static Diagnosis diagnoseNearCapacity(
            StateAnalysis a, long capacity, long outside, double share, List<String> evidence) {
        PoolUsage all = a.all();
        String trigger = "no oom entry, but " + Percent.of(share) + " of capacity (" + ByteSize.formatSigned(capacity)
                + ") in use (near capacity from " + Percent.of(NEAR_CAPACITY) + ")";
        evidence.add("reserved " + ByteSize.formatSigned(all.reserved()) + ", allocated "
                + ByteSize.formatSigned(all.allocated())
                + ", unallocated " + ByteSize.formatSigned(all.unallocated()) + " ("
                + ByteSize.formatSigned(all.pinnedFree()) + " free but pinned, "
                + ByteSize.formatSigned(all.releasable()) + " releasable)");
        if (outside >= 0) {
            evidence.add("held outside the allocator: " + ByteSize.formatSigned(outside));
        }
        if (all.reserved() > 0 && all.pinnedFree() >= FRAGMENTED_CACHE_SHARE * all.reserved()) {
            evidence.add("free bytes pinned between live blocks are "
                    + Percent.of((double) all.pinnedFree() / all.reserved())
                    + " of reserved (>= " + Percent.of(FRAGMENTED_CACHE_SHARE) + "); largest free block "
                    + ByteSize.formatSigned(all.largestFree()) + ", external fragmentation "
                    + Percent.of(all.externalFragmentation()));
            return new Diagnosis(DiagnosisKind.FRAGMENTATION, trigger, evidence, 0, outside);
        }
        if (outside >= 0 && outside >= OUTSIDE_SHARE * capacity) {
            evidence.add("outside memory is " + Percent.of((double) outside / capacity) + " of capacity (>= "
                    + Percent.of(OUTSIDE_SHARE) + ")");
            return new Diagnosis(DiagnosisKind.OUTSIDE_MEMORY, trigger, evidence, 0, outside);
        }
        evidence.add("allocated is " + Percent.of((double) all.allocated() / capacity) + " of capacity");
        return new Diagnosis(DiagnosisKind.LIVE_TENSORS, trigger, evidence, 0, outside);
    }
}
