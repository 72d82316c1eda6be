package io.gpumem.trace.analysis;

import io.gpumem.engine.RunOutcome;
import io.gpumem.size.ByteSize;
import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * Renders an analysis as the plain-text report {@code gpumem analyze} and {@code gpumem demo} print.
 * Layout (fixed so that users can diff reports): a header, the per-pool table, free space per pool and
 * stream, the most wasteful segments, the diagnosis, then the compare table and recommendations.
 */
public final class AnalysisPrinter {
    private AnalysisPrinter() {}

    /** Prints the state part: header, pools, free space, wasteful segments and the diagnosis. */
    public static void printState(StateAnalysis a, PrintWriter out) {
        MemoryState s = a.state();
        out.println("== " + s.label() + " (device " + s.device() + ")");
        s.allocatorConf().ifPresent(c -> out.println("allocator config: " + (c.isEmpty() ? "(defaults)" : c)));
        if (s.capacity() >= 0 || s.deviceFree() >= 0) {
            out.println("device capacity: " + (s.capacity() >= 0 ? ByteSize.formatSigned(s.capacity()) : "unknown")
                    + ", driver free: " + (s.deviceFree() >= 0 ? ByteSize.formatSigned(s.deviceFree()) : "unknown"));
        }
        out.println();
        out.printf(
                Locale.ROOT,
                "%-11s %9s %12s %12s %12s %14s %12s %12s %8s%n",
                "pool",
                "segments",
                "reserved",
                "allocated",
                "active",
                "inactive split",
                "releasable",
                "largest free",
                "ext frag");
        for (PoolUsage u : List.of(a.small(), a.large(), a.all())) {
            out.printf(
                    Locale.ROOT,
                    "%-11s %9d %12s %12s %12s %14s %12s %12s %8s%n",
                    u.scope(),
                    u.segments(),
                    ByteSize.formatSigned(u.reserved()),
                    ByteSize.formatSigned(u.allocated()),
                    ByteSize.formatSigned(u.active()),
                    ByteSize.formatSigned(u.inactiveSplit()),
                    ByteSize.formatSigned(u.releasable()),
                    ByteSize.formatSigned(u.largestFree()),
                    Percent.of(u.externalFragmentation()));
        }
        out.printf(
                Locale.ROOT,
                "reserved/allocated %s, requested %s (rounding slack %s)%n",
                a.all().reservedPerAllocatedText(),
                ByteSize.formatSigned(a.all().requested()),
                ByteSize.formatSigned(a.all().allocated() - a.all().requested()));
        out.println();
        if (a.streamFree().isEmpty()) {
            out.println("free space: no cached free blocks");
        } else {
            out.println("largest free block per pool and stream:");
            for (StreamFree f : a.streamFree()) {
                out.printf(
                        Locale.ROOT,
                        "  %-10s stream %-16d largest %12s of %12s free in %6d blocks (ext frag %s)%n",
                        f.pool().statName(),
                        f.stream(),
                        ByteSize.formatSigned(f.largestFree()),
                        ByteSize.formatSigned(f.totalFree()),
                        f.freeBlocks(),
                        Percent.of(f.externalFragmentation()));
            }
        }
        out.println();
        if (a.topWaste().isEmpty()) {
            out.println("segments that waste most: none wastes a byte");
        } else {
            out.println("segments that waste most (free + rounding slack):");
            for (SegmentWaste w : a.topWaste()) {
                out.printf(
                        Locale.ROOT,
                        "  0x%x %-10s stream %-6d %-10s size %12s waste %12s (free %s, slack %s)%s%n",
                        w.address(),
                        w.pool().statName(),
                        w.stream(),
                        w.expandable() ? "expandable" : "",
                        ByteSize.formatSigned(w.totalSize()),
                        ByteSize.formatSigned(w.waste()),
                        ByteSize.formatSigned(w.freeBytes()),
                        ByteSize.formatSigned(w.slackBytes()),
                        w.pinned() ? ", pinned by live blocks" : ", releasable");
            }
        }
        out.println();
        Diagnosis d = a.diagnosis();
        out.println("diagnosis: " + headline(d.kind()));
        out.println("  because: " + d.trigger());
        for (String e : d.evidence()) {
            out.println("  - " + e);
        }
        out.flush();
    }

    /** Prints the compare table and the recommendations. */
    public static void printRecommendations(Recommender.Result r, PrintWriter out) {
        if (r.baseline() != null) {
            out.println();
            out.println("compare runs:");
            printOutcomes(prepend(r.baseline(), r.alternatives()), out);
        }
        out.println();
        if (r.recommendations().isEmpty()) {
            out.println("recommendation: none");
        } else {
            out.println("recommendations (best first):");
            int i = 1;
            for (Recommendation rec : r.recommendations()) {
                out.println("  " + i++ + ". " + rec.action());
                out.println("     saves " + ByteSize.formatSigned(rec.bytesSaved()) + "; " + rec.basis());
            }
        }
        for (String n : r.notes()) {
            out.println("note: " + n);
        }
        out.flush();
    }

    /** The compare table: one row per run. */
    public static void printOutcomes(List<RunOutcome> outcomes, PrintWriter out) {
        boolean withCapacity = outcomes.stream().anyMatch(o -> o.minCapacity() >= 0);
        int width = 36;
        for (RunOutcome o : outcomes) {
            width = Math.max(width, o.label().length());
        }
        String labelColumn = "  %-" + width + "s";
        out.printf(
                Locale.ROOT,
                labelColumn + " %14s %14s %9s %13s %8s %5s%s%n",
                "config",
                "peak allocated",
                "peak reserved",
                "res/alloc",
                "driver allocs",
                "retries",
                "OOMs",
                withCapacity ? "   min capacity" : "");
        for (RunOutcome o : outcomes) {
            out.printf(
                    Locale.ROOT,
                    labelColumn + " %14s %14s %9.3f %13d %8d %5d%s%n",
                    o.label().isEmpty() ? "(defaults)" : o.label(),
                    ByteSize.formatSigned(o.peakAllocated()),
                    ByteSize.formatSigned(o.peakReserved()),
                    o.reservedPerAllocated(),
                    o.deviceAllocs(),
                    o.retries(),
                    o.ooms(),
                    withCapacity
                            ? String.format(
                                    Locale.ROOT,
                                    " %14s",
                                    o.minCapacity() >= 0 ? ByteSize.formatSigned(o.minCapacity()) : "-")
                            : "");
        }
        out.flush();
    }

    private static List<RunOutcome> prepend(RunOutcome first, List<RunOutcome> rest) {
        ArrayList<RunOutcome> all = new ArrayList<>();
        all.add(first);
        all.addAll(rest);
        return all;
    }

    /** One line per verdict. */
    public static String headline(DiagnosisKind kind) {
        return switch (kind) {
            case NONE -> "no out-of-memory to explain";
            case FRAGMENTATION -> "FRAGMENTATION: enough cached free bytes, but no free block fits";
            case LIVE_TENSORS -> "LIVE TENSORS: allocated memory fills the device";
            case REQUEST_TOO_LARGE -> "REQUEST TOO LARGE: the request alone needs more than the device can give";
            case OUTSIDE_MEMORY -> "MEMORY HELD OUTSIDE THE ALLOCATOR: other users of the device take what is missing";
        };
    }
}
