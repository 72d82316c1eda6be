package io.gpumem.engine;

import io.gpumem.alloc.Pool;
import io.gpumem.alloc.RestoredBlock;
import io.gpumem.alloc.SegmentRestorer;
import io.gpumem.alloc.SizeRules;
import io.gpumem.device.Device;
import io.gpumem.history.BlockInfo;
import io.gpumem.history.SegmentInfo;
import java.util.ArrayList;
import java.util.Arrays;
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
 * reservation of PyTorch's default size, with unmapped blocks for the space before, between and after the runs.
 * Pages before the lowest run may have been unmapped before the window, so with recorded addresses the reservations
 * are placed as the driver hands them out, one after another, with the ranges the recording reserves later (given
 * back before the start) among them ({@link #reservationBases}); otherwise each starts at its lowest run. Without
 * recorded addresses (what-if replays) wholly free segments are restored last and dropped when the device has no
 * room for them. With {@link RecordedAddresses} the device
 * must hand out the recorded addresses (it is offered each one first); otherwise the device chooses, and the
 * returned shifts say where each segment went. {@code asClassic} restores expandable runs as ordinary segments
 * (what-if replays under configurations without expandable segments keep the recorded layout as it was).
 */
public final class StartStateLoader {

    /** A device that must hand out recorded addresses (the oracle replay's): offered each one before its call. */
    public interface RecordedAddresses {
        void offerMalloc(long address);

        void offerMap(long address);

        /**
         * The expandable reservations the recording makes later, base address to pool: ranges free at the start
         * (given back before it, or not yet handed out), which the start's reservations are placed around
         * ({@link #reservationBases}). None unless the recording shows some.
         */
        default Map<Long, Pool> reservedLater() {
            return Map.of();
        }

        /**
         * How far the recording maps in a start reservation above its highest run: that run's address to the end of
         * the highest range mapped there. The reservation reaches at least that far, so it is not placed to end at
         * the run ({@link #reservationBases}). None unless the recording shows some.
         */
        default Map<Long, Long> reservationReach() {
            return Map.of();
        }

        /**
         * How far the recording maps in a start reservation below its lowest run: that run's address to the lowest
         * address mapped there. The reservation begins at or below it, so it is not placed to begin at the run
         * ({@link #reservationBases}). None unless the recording shows some.
         */
        default Map<Long, Long> reservationFloor() {
            return Map.of();
        }
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
        List<List<SegmentInfo>> groups = new ArrayList<>(expandableGroups.values());
        for (List<SegmentInfo> runs : groups) {
            runs.sort((a, b) -> Long.compare(a.address(), b.address()));
        }
        groups.sort((a, b) -> Long.compare(a.getFirst().address(), b.getFirst().address()));
        long[] bases = oracle != null
                ? reservationBases(
                        groups,
                        device.totalMemory(),
                        oracle.reservedLater(),
                        oracle.reservationReach(),
                        oracle.reservationFloor())
                : null;
        for (int g = 0; g < groups.size(); g++) {
            List<SegmentInfo> runs = groups.get(g);
            SegmentInfo first = runs.getFirst();
            long reservation = reservationSize(first, device.totalMemory());
            long base = bases != null ? bases[g] : first.address();
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

    /** PyTorch's reservation for an expandable segment of {@code run}'s pool: 1.125 x device memory, in pages. */
    private static long reservationSize(SegmentInfo run, long totalMemory) {
        return reservationSize(run.pool(), totalMemory);
    }

    private static long reservationSize(Pool pool, long totalMemory) {
        long page = SizeRules.expandablePageSize(pool);
        return page * ((totalMemory * 9 / 8 + page - 1) / page);
    }

    /**
     * A reservation to place: its lowest mapped address, the end of its highest run, its pool, and its base where
     * known ({@link #UNKNOWN} otherwise).
     */
    private record Slot(long first, long end, Pool pool, long base) {
        static final long UNKNOWN = -1;
    }

    /**
     * Where each expandable reservation starts, for groups of mapped runs in ascending address order. A reservation
     * starts at or below its lowest run (pages before it may have been unmapped before the window) and ends at or
     * above its highest. The driver hands reservations out one after another, so groups are taken as chains of
     * adjacent reservations: a chain's bases follow from its lowest base and the reservation sizes, which is taken as
     * high as every group of the chain allows (no group's base above its lowest run, runs on its page grid). A group
     * that cannot follow the one before (its runs out of reach, or off the grid) starts a new chain.
     */
    static long[] reservationBases(List<List<SegmentInfo>> ascending, long totalMemory) {
        return reservationBases(ascending, totalMemory, Map.of(), Map.of(), Map.of());
    }

    /**
     * As {@link #reservationBases(List, long)}, with the reservations made later ({@code reservedLater}, base to
     * pool) in the chains too: each was a range given back before the start (or never handed out yet), a link of its
     * chain whose base is known, so a reservation below one ends where it begins. Or it is a start reservation's own
     * range, given back in the window and made again: the driver hands a range out whole, to a reservation of its
     * size only, so one of the group's pool whose reach holds the group's runs is the group's base. A group's
     * reservation also reaches as far as the recording maps in it: up to {@code reach} (by the address of its highest
     * run), which may keep it from following the reservation below it, and down to {@code floor} (by the address of its
     * lowest run), below which it cannot begin, so a reservation that follows no other begins there, not at its run.
     */
    static long[] reservationBases(
            List<List<SegmentInfo>> ascending,
            long totalMemory,
            Map<Long, Pool> reservedLater,
            Map<Long, Long> reach,
            Map<Long, Long> floor) {
        List<Slot> slots = new ArrayList<>(ascending.size() + reservedLater.size());
        List<Integer> groupOf = new ArrayList<>();
        for (int g = 0; g < ascending.size(); g++) {
            List<SegmentInfo> runs = ascending.get(g);
            SegmentInfo last = runs.getLast();
            long lowestRun = runs.getFirst().address();
            long first = Math.min(lowestRun, floor.getOrDefault(lowestRun, lowestRun));
            long end = Math.max(last.address() + last.totalSize(), reach.getOrDefault(last.address(), 0L));
            Pool pool = runs.getFirst().pool();
            // A reservation made later in a range that holds this group's runs is this one's range, given back in the
            // window and handed out again whole (the driver reuses a range for a reservation of its size only).
            long base = Slot.UNKNOWN;
            for (Map.Entry<Long, Pool> later : reservedLater.entrySet()) {
                long at = later.getKey();
                if (later.getValue() == pool && at <= first && end - at <= reservationSize(pool, totalMemory)) {
                    base = at;
                }
            }
            slots.add(new Slot(first, end, pool, base));
            groupOf.add(g);
        }
        reservedLater.forEach((base, pool) -> {
            for (Slot slot : slots) {
                if (slot.base() == base) {
                    return; // (a start reservation's own range)
                }
            }
            slots.add(new Slot(base, base, pool, base));
            groupOf.add(-1);
        });
        Integer[] order = new Integer[slots.size()];
        for (int i = 0; i < order.length; i++) {
            order[i] = i;
        }
        Arrays.sort(
                order, (x, y) -> Long.compare(slots.get(x).first(), slots.get(y).first()));
        List<Slot> sorted = new ArrayList<>(order.length);
        for (int i : order) {
            sorted.add(slots.get(i));
        }
        long[] slotBases = slotBases(sorted, totalMemory);
        long[] bases = new long[ascending.size()];
        for (int k = 0; k < order.length; k++) {
            int g = groupOf.get(order[k]);
            if (g >= 0) {
                bases[g] = slotBases[k];
            }
        }
        return bases;
    }

    /** The bases of {@code ascending}'s reservations, in chains (see {@link #reservationBases(List, long)}). */
    private static long[] slotBases(List<Slot> ascending, long totalMemory) {
        int n = ascending.size();
        long[] bases = new long[n];
        int chain = 0;
        while (chain < n) {
            long[] offsets = new long[n];
            long high = Long.MAX_VALUE; // the chain's base is at most this
            long low = Long.MIN_VALUE; // and at least this
            long offset = 0;
            int end = chain;
            for (int i = chain; i < n; i++) {
                Slot slot = ascending.get(i);
                long size = reservationSize(slot.pool(), totalMemory);
                long h = Math.min(high, slot.first() - offset);
                long l = Math.max(low, slot.end() - size - offset);
                if (slot.base() != Slot.UNKNOWN) {
                    h = Math.min(h, slot.base() - offset);
                    l = Math.max(l, slot.base() - offset);
                }
                offsets[i] = offset;
                h = onGridBelow(ascending, chain, i, offsets, h);
                if (h < l || h < 0) {
                    break;
                }
                high = h;
                low = l;
                offset += size;
                end = i + 1;
            }
            if (end == chain) { // (a single group always fits: its runs lie within one reservation)
                Slot alone = ascending.get(chain);
                bases[chain] = alone.base() != Slot.UNKNOWN ? alone.base() : alone.first();
                chain++;
                continue;
            }
            for (int i = chain; i < end; i++) {
                bases[i] = high + offsets[i];
            }
            chain = end;
        }
        return bases;
    }

    /**
     * The highest chain base at or below {@code high} that puts every lowest run of {@code from..to} on its page grid,
     * or {@link Long#MIN_VALUE}. Page sizes divide one another (2 and 20 MiB), so the largest page's grid gives the one
     * candidate: the others hold there or nowhere.
     */
    private static long onGridBelow(List<Slot> slots, int from, int to, long[] offsets, long high) {
        int widest = from;
        for (int i = from; i <= to; i++) {
            if (SizeRules.expandablePageSize(slots.get(i).pool())
                    > SizeRules.expandablePageSize(slots.get(widest).pool())) {
                widest = i;
            }
        }
        long page = SizeRules.expandablePageSize(slots.get(widest).pool());
        long base = high - Math.floorMod(high - (slots.get(widest).first() - offsets[widest]), page);
        return onGrid(slots, from, to, offsets, base) ? base : Long.MIN_VALUE;
    }

    /** Whether, with the chain based at {@code base}, every slot's lowest run of {@code from..to} is on its grid. */
    private static boolean onGrid(List<Slot> slots, int from, int to, long[] offsets, long base) {
        for (int i = from; i <= to; i++) {
            Slot slot = slots.get(i);
            if ((slot.first() - base - offsets[i]) % SizeRules.expandablePageSize(slot.pool()) != 0) {
                return false;
            }
        }
        return true;
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
