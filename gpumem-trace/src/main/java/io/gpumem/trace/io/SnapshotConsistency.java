package io.gpumem.trace.io;

import io.gpumem.alloc.SizeRules;
import io.gpumem.history.BlockInfo;
import io.gpumem.history.BlockState;
import io.gpumem.history.SegmentInfo;
import io.gpumem.size.ByteSize;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.Consumer;

/**
 * Checks a snapshot's end-state segments before anything reads figures from them: an allocator's segments never
 * overlap on one device, a segment's blocks lie inside it, add up to its {@code total_size} and are in one of the
 * three states an allocator writes (allocator.md §10.3), and an expandable segment (one mapped run) is whole pages. A file that breaks these was edited, truncated or produced by something else, and every
 * figure drawn from it (reserved bytes, fragmentation, the window's start state) would be wrong without a word.
 *
 * <p>Each problem names the file, the device and the segment's address. Readers stay permissive (they read what
 * the file says); the commands that analyse or replay a snapshot call {@link #check} and refuse the file, or,
 * when the user asks for leniency, warn and go on. Cost: one pass over the blocks plus a sort of each device's
 * segments.
 */
public final class SnapshotConsistency {

    /** At most this many problems are listed one by one; the rest are counted. */
    static final int LISTED = 10;

    private SnapshotConsistency() {}

    /** Every inconsistency of {@code snapshot}'s segments, in device then address order; empty when none. */
    public static List<String> problems(TraceSnapshot snapshot) {
        Map<Integer, List<SegmentInfo>> byDevice = new HashMap<>();
        for (SegmentInfo s : snapshot.segments()) {
            byDevice.computeIfAbsent(s.device(), d -> new ArrayList<>()).add(s);
        }
        List<String> problems = new ArrayList<>();
        byDevice.keySet().stream().sorted().forEach(device -> {
            List<SegmentInfo> segments = byDevice.get(device);
            segments.sort(Comparator.comparingLong(SegmentInfo::address));
            SegmentInfo previous = null;
            for (SegmentInfo s : segments) {
                if (previous != null && s.address() < previous.end()) {
                    problems.add(name(s) + " overlaps the segment at 0x" + Long.toHexString(previous.address())
                            + " (which ends at 0x" + Long.toHexString(previous.end()) + ")");
                }
                checkBlocks(s, problems);
                if (previous == null || s.end() > previous.end()) {
                    previous = s;
                }
            }
        });
        return problems;
    }

    private static void checkBlocks(SegmentInfo s, List<String> problems) {
        long page = SizeRules.expandablePageSize(s.pool());
        if (s.expandable() && s.totalSize() % page != 0) {
            // an expandable segment is reported one mapped run at a time, and runs are whole pages
            problems.add(name(s) + " is expandable, but its total_size " + s.totalSize() + " is not a whole number of"
                    + " the " + s.pool().name().toLowerCase(Locale.ROOT) + " pool's " + ByteSize.format(page)
                    + " pages");
            return;
        }
        long sum = 0;
        boolean overflow = false;
        for (BlockInfo b : s.blocks()) {
            if (b.address() < s.address() || b.size() < 0 || b.address() + b.size() > s.end()) {
                problems.add(name(s) + " (" + ByteSize.formatSigned(s.totalSize()) + ") holds the block at 0x"
                        + Long.toHexString(b.address()) + " of " + b.size() + " bytes, outside it");
                return;
            }
            if (b.state() == BlockState.UNKNOWN) {
                problems.add(name(s) + " holds the block at 0x" + Long.toHexString(b.address()) + " in state '"
                        + b.stateName() + "', which no allocator writes (active_allocated, active_pending_free or"
                        + " inactive)");
                return;
            }
            long next = sum + b.size();
            overflow |= next < sum;
            sum = next;
        }
        if (overflow || sum != s.totalSize()) {
            problems.add(name(s) + " declares total_size " + s.totalSize() + " (" + ByteSize.formatSigned(s.totalSize())
                    + ") but its " + s.blocks().size() + " block(s) add up to "
                    + (overflow ? "more than 2^63 bytes" : sum + " (" + ByteSize.formatSigned(sum) + ")"));
        }
    }

    private static String name(SegmentInfo s) {
        return "segment 0x" + Long.toHexString(s.address()) + " on device " + s.device();
    }

    /**
     * Refuses an inconsistent snapshot, or lets it through with warnings.
     *
     * @param lenient  {@code false}: throw on the first problem; {@code true}: pass each problem to {@code warnings}
     * @param warnings receives one line per problem (file and segment named), then a count of any not listed
     * @throws InconsistentSnapshotException naming the file and the first inconsistent segment (with how many more
     *                                       there are) unless {@code lenient}
     */
    public static void check(TraceSnapshot snapshot, boolean lenient, Consumer<String> warnings) {
        List<String> problems = problems(snapshot);
        if (problems.isEmpty()) {
            return;
        }
        if (!lenient) {
            String more = problems.size() == 1 ? "" : " (and " + (problems.size() - 1) + " more inconsistencies)";
            throw new InconsistentSnapshotException(snapshot.source(), "segments", problems.getFirst() + more);
        }
        for (int i = 0; i < Math.min(LISTED, problems.size()); i++) {
            warnings.accept(
                    "warning: " + snapshot.source() + ": " + InconsistentSnapshotException.WHAT + problems.get(i));
        }
        if (problems.size() > LISTED) {
            warnings.accept("warning: " + snapshot.source() + ": " + (problems.size() - LISTED)
                    + " more inconsistencies not listed");
        }
    }
}
