package io.gpumem.engine;

import io.gpumem.alloc.RestoredBlock;
import io.gpumem.alloc.SegmentRestorer;
import io.gpumem.alloc.SizeRules;
import io.gpumem.device.Device;
import io.gpumem.history.BlockInfo;
import io.gpumem.history.SegmentInfo;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.function.LongUnaryOperator;
import org.jspecify.annotations.Nullable;

/**
 * Loads a start state (segments with their blocks, as a trace window's rebuilt start holds them) into a fresh
 * allocator that can restore segments ({@link SegmentRestorer}).
 *
 * <p>Classic segments are restored one by one. Expandable mapped runs are grouped per (stream, pool) into one
 * reservation of PyTorch's default size, with unmapped blocks for the space before, between and after the runs. It
 * starts at the lowest run, or lower with recorded addresses when that reservation would reach into the next one
 * (reservations are handed out one after another; pages before the lowest run may have been unmapped before the
 * window). Without recorded addresses (what-if replays) wholly free segments
 * are restored last and dropped when the device has no room for them. With {@link RecordedAddresses} the device
 * must hand out the recorded addresses (it is offered each one first); otherwise the device chooses, and the
 * returned shifts say where each segment went. {@code asClassic} restores expandable runs as ordinary segments
 * (what-if replays under configurations without expandable segments keep the recorded layout as it was).
 */
public final class StartStateLoader {

    /** A device that must hand out recorded addresses (the oracle replay's): offered each one before its call. */
    public interface RecordedAddresses {
        void offerMalloc(long address);

        void offerMap(long address);
    }

    private StartStateLoader() {}

    /**
     * Restores every segment of {@code start}; returns, per segment (in list order), how far the copy lies from
     * the recorded address (0 when the device handed out the recorded one).
     *
     * @param oracle  recorded addresses to keep, or null to let the device choose
     * @param streams the device's stream for each recorded stream handle
     */
    public static long[] load(
            SegmentRestorer allocator,
            Device device,
            List<SegmentInfo> start,
            @Nullable RecordedAddresses oracle,
            boolean asClassic,
            LongUnaryOperator streams) {
        long[] shifts = new long[start.size()];
        IdentityHashMap<SegmentInfo, Integer> index = new IdentityHashMap<>();
        Map<List<Long>, List<SegmentInfo>> expandableGroups = new HashMap<>();
        List<Integer> cachedOnly = new ArrayList<>();
        for (int si = 0; si < start.size(); si++) {
            SegmentInfo seg = start.get(si);
            boolean expandable = seg.expandable() && !asClassic;
            if (oracle == null && !expandable && allocatedBytes(seg) == 0) {
                cachedOnly.add(si);
                continue;
            }
            if (expandable) {
                index.put(seg, si);
                expandableGroups
                        .computeIfAbsent(List.of(seg.stream(), (long) seg.pool().ordinal()), k -> new ArrayList<>())
                        .add(seg);
                continue;
            }
            List<RestoredBlock> blocks = new ArrayList<>(seg.blocks().size());
            for (BlockInfo b : seg.blocks()) {
                blocks.add(restored(b));
            }
            if (oracle != null) {
                oracle.offerMalloc(seg.address());
            }
            long base;
            try {
                base = allocator.restoreSegment(
                        oracle != null ? seg.address() : Device.NULL,
                        seg.totalSize(),
                        streams.applyAsLong(seg.stream()),
                        seg.pool(),
                        false,
                        blocks);
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException(
                        "device " + seg.device() + ", segment at 0x" + Long.toHexString(seg.address()) + " ("
                                + seg.totalSize() + " bytes): " + e.getMessage(),
                        e);
            }
            shifts[si] = base - seg.address();
        }
        // Groups from the highest address down: a group's reservation must end at or below the next one's base.
        List<List<SegmentInfo>> groups = new ArrayList<>(expandableGroups.values());
        for (List<SegmentInfo> runs : groups) {
            runs.sort((a, b) -> Long.compare(a.address(), b.address()));
        }
        groups.sort((a, b) -> Long.compare(b.getFirst().address(), a.getFirst().address()));
        long nextBase = Long.MAX_VALUE;
        for (List<SegmentInfo> runs : groups) {
            SegmentInfo first = runs.getFirst();
            long page = SizeRules.expandablePageSize(first.pool());
            long reservation = page * ((device.totalMemory() * 9 / 8 + page - 1) / page);
            // The reservation starts at or below its lowest mapped run: pages before it may have been unmapped
            // before the window. With recorded addresses it starts low enough to end at the next reservation's base
            // (the driver hands reservations out one after another); without them the device chooses anyway.
            long base = first.address();
            if (oracle != null
                    && nextBase != Long.MAX_VALUE
                    && nextBase - reservation < base
                    && nextBase - reservation >= 0
                    && (base - (nextBase - reservation)) % page == 0) {
                base = nextBase - reservation;
            }
            nextBase = base;
            List<RestoredBlock> blocks = new ArrayList<>();
            long cursor = base;
            for (SegmentInfo run : runs) {
                if (run.address() > cursor) {
                    blocks.add(RestoredBlock.unmapped(run.address() - cursor));
                }
                for (BlockInfo b : run.blocks()) {
                    blocks.add(restored(b));
                }
                cursor = run.address() + run.totalSize();
            }
            long end = base + reservation;
            if (end > cursor) {
                blocks.add(RestoredBlock.unmapped(end - cursor));
            }
            if (oracle != null) {
                oracle.offerMap(base);
            }
            long restored = allocator.restoreSegment(
                    oracle != null ? base : Device.NULL,
                    Math.max(reservation, cursor - base),
                    streams.applyAsLong(first.stream()),
                    first.pool(),
                    true,
                    blocks);
            for (SegmentInfo run : runs) {
                shifts[Objects.requireNonNull(index.get(run))] = restored - base;
            }
        }
        // Wholly free cached segments last, after the expandable runs too: on a device too small for them, the OOM
        // retry would have released them before any request of the window failed, so they are left out instead of
        // taking the room of live blocks and failing the replay.
        for (int si : cachedOnly) {
            SegmentInfo seg = start.get(si);
            try {
                allocator.restoreSegment(
                        Device.NULL,
                        seg.totalSize(),
                        streams.applyAsLong(seg.stream()),
                        seg.pool(),
                        false,
                        List.of(RestoredBlock.free(seg.totalSize())));
            } catch (IllegalStateException noRoom) {
                // released, as PyTorch's empty-cache-and-retry would have done
            }
        }
        return shifts;
    }

    private static long allocatedBytes(SegmentInfo seg) {
        long n = 0;
        for (BlockInfo b : seg.blocks()) {
            if (RequestStream.isLive(b)) {
                n += b.size();
            }
        }
        return n;
    }

    private static RestoredBlock restored(BlockInfo b) {
        return RequestStream.isLive(b)
                ? RestoredBlock.allocated(b.size(), Math.max(1, Math.min(b.requestedSize(), b.size())))
                : RestoredBlock.free(b.size(), b.requestedSize());
    }
}
