package io.gpumem.alloc;

import io.gpumem.device.SimulatedDevice;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.Predicate;

/**
 * An independent model of PyTorch's caching allocator with {@code expandable_segments:True} and otherwise default
 * settings, for differential tests of {@link CachingAllocator}. It is written from PyTorch's rules, not from
 * {@link AllocatorCore}: plain lists and linear scans instead of trees and recycled blocks, one free-list walk per
 * request, no stats beyond reserved bytes. Covered: malloc (round_size, pool choice, best fit with the expandable
 * walk, find_expandable_block, map_block in whole pages, the release-and-retry path), free (merging) and
 * empty_cache (release_blocks: unmap whole pages of free blocks, destroy a segment that became one unmapped block).
 * Not covered: record_stream and events, max_split_size, memory fraction, garbage collection, toggling.
 *
 * <p>What this model exists to pin: a reservation whose first map failed holds one unmapped block, which lives in
 * the pool's unmapped set; release_blocks walks only the free mapped blocks, so empty_cache keeps the reservation,
 * and later requests on its stream map pages into it.
 *
 * <p>Physical memory is a byte count against the device's total (a map call fails when its pages do not all fit,
 * as cuMemCreate failing part way does); reservation addresses come from a {@link SimulatedDevice} of its own, so
 * they agree with the allocator's device only if both reserve and free ranges in the same order.
 */
final class ExpandableSegmentsModel {
    private static final long SMALL_PAGE = 2L << 20;
    private static final long LARGE_PAGE = 20L << 20;
    private static final long SMALL_SIZE = 1L << 20;
    private static final long MIN_BLOCK = 512;

    /** One virtual reservation of one (stream, pool). */
    static final class Reservation {
        final long base;
        final long size;
        final long page;
        final long stream;
        final boolean small;
        /** The blocks tiling [base, base + size), by address. */
        final TreeMap<Long, Piece> pieces = new TreeMap<>();
        /** Whether a user's empty_cache ran while it held no page (its first map had failed). */
        boolean keptWithoutPages;

        Reservation(long base, long size, long page, long stream, boolean small) {
            this.base = base;
            this.size = size;
            this.page = page;
            this.stream = stream;
            this.small = small;
        }

        boolean contains(long address) {
            return address >= base && address < base + size;
        }

        Piece before(Piece p) {
            Map.Entry<Long, Piece> e = pieces.lowerEntry(p.ptr);
            return e == null ? null : e.getValue();
        }

        Piece after(Piece p) {
            Map.Entry<Long, Piece> e = pieces.higherEntry(p.ptr);
            return e == null ? null : e.getValue();
        }
    }

    /** A block: allocated, free and mapped, or unmapped. */
    static final class Piece {
        long ptr;
        long size;
        boolean allocated;
        boolean mapped;
        final Reservation owner;

        Piece(long ptr, long size, boolean mapped, Reservation owner) {
            this.ptr = ptr;
            this.size = size;
            this.mapped = mapped;
            this.owner = owner;
        }

        boolean free() {
            return !allocated;
        }
    }

    private final SimulatedDevice addresses;
    private final long total;
    /** In creation order; destroyed ones are removed. */
    private final List<Reservation> reservations = new ArrayList<>();

    private final Map<Long, Piece> live = new HashMap<>();
    private long mappedBytes;

    ExpandableSegmentsModel(long total) {
        this.total = total;
        this.addresses = SimulatedDevice.builder().capacity(total).build();
    }

    long reservedBytes() {
        return mappedBytes;
    }

    List<Reservation> reservations() {
        return reservations;
    }

    /** The reservation holding {@code address}, or null. */
    Reservation reservationOf(long address) {
        for (Reservation r : reservations) {
            if (r.contains(address)) {
                return r;
            }
        }
        return null;
    }

    /** Returns the block's address, or -1 where PyTorch raises out of memory. */
    long malloc(long request, long stream) {
        long size = request < MIN_BLOCK ? MIN_BLOCK : (request + MIN_BLOCK - 1) / MIN_BLOCK * MIN_BLOCK;
        boolean small = size <= SMALL_SIZE;
        Piece b = bestFit(small, stream, size);
        if (b == null) {
            b = grow(small, stream, size);
            if (b == null) {
                releaseCachedBlocks();
                b = grow(small, stream, size);
            }
            if (b == null) {
                return -1;
            }
        }
        if (b.size - size >= MIN_BLOCK) { // should_split: the expandable flag makes every pool split at 512
            Piece rest = new Piece(b.ptr + size, b.size - size, true, b.owner);
            b.size = size;
            b.owner.pieces.put(rest.ptr, rest);
        }
        b.allocated = true;
        live.put(b.ptr, b);
        return b.ptr;
    }

    void free(long ptr) {
        Piece b = live.remove(ptr);
        b.allocated = false;
        mergeNeighbours(b);
    }

    /** torch.cuda.empty_cache(); notes which reservations it kept without a page. */
    void emptyCache() {
        releaseCachedBlocks();
        for (Reservation r : reservations) {
            if (mappedIn(r) == 0) {
                r.keptWithoutPages = true;
            }
        }
    }

    /** release_cached_blocks: large pool, then small pool; free mapped blocks in (stream, size, address) order. */
    private void releaseCachedBlocks() {
        for (boolean small : new boolean[] {false, true}) {
            List<Piece> toUnmap = new ArrayList<>();
            for (Reservation r : reservations) {
                if (r.small == small) {
                    for (Piece p : r.pieces.values()) {
                        if (p.free() && p.mapped) {
                            toUnmap.add(p);
                        }
                    }
                }
            }
            toUnmap.sort(Comparator.comparingLong((Piece p) -> p.owner.stream)
                    .thenComparingLong(p -> p.size)
                    .thenComparingLong(p -> p.ptr));
            for (Piece p : toUnmap) {
                unmap(p);
                Reservation r = p.owner;
                if (r.pieces.size() == 1) {
                    addresses.freeAddressRange(r.base, r.size);
                    reservations.remove(r);
                }
            }
        }
    }

    private static long mappedIn(Reservation r) {
        long bytes = 0;
        for (Piece p : r.pieces.values()) {
            bytes += p.mapped ? p.size : 0;
        }
        return bytes;
    }

    /** get_free_block: smallest free mapped block of the stream that fits, then the walk by growable size. */
    private Piece bestFit(boolean small, long stream, long size) {
        List<Piece> free = pieces(small, stream, p -> p.free() && p.mapped);
        free.sort(Comparator.comparingLong((Piece p) -> p.size).thenComparingLong(p -> p.ptr));
        int i = 0;
        while (i < free.size() && free.get(i).size < size) {
            i++;
        }
        if (i == free.size()) {
            return null;
        }
        while (i + 1 < free.size() && growable(free.get(i + 1)) < growable(free.get(i))) {
            i++;
        }
        return free.get(i);
    }

    /** The blocks of one (stream, pool) that {@code which} accepts, in no particular order. */
    private List<Piece> pieces(boolean small, long stream, Predicate<Piece> which) {
        List<Piece> out = new ArrayList<>();
        for (Reservation r : reservations) {
            if (r.small == small && r.stream == stream) {
                for (Piece p : r.pieces.values()) {
                    if (which.test(p)) {
                        out.add(p);
                    }
                }
            }
        }
        return out;
    }

    private static long growable(Piece p) {
        Piece next = p.owner.after(p);
        return p.size + (next != null && !next.mapped ? next.size : 0);
    }

    /** try_allocate_expandable_block: the lowest run of free or unmapped space, mapped page by page. */
    private Piece grow(boolean small, long stream, long size) {
        Piece c = findRun(small, stream, size);
        if (c == null) {
            long page = small ? SMALL_PAGE : LARGE_PAGE;
            long space = total + total / 8;
            long bytes = (space + page - 1) / page * page;
            Reservation r = new Reservation(addresses.reserveAddressRange(bytes), bytes, page, stream, small);
            reservations.add(r);
            c = new Piece(r.base, r.size, false, r);
            r.pieces.put(c.ptr, c);
            if (c.size < size) {
                return null;
            }
        }
        if (!c.mapped) {
            c = map(c, Math.min(c.size, size));
            if (c == null) {
                return null;
            }
        }
        while (c.size < size) {
            Piece next = c.owner.after(c);
            c = map(next, Math.min(size - c.size, next.size));
            if (c == null) {
                return null;
            }
        }
        return c;
    }

    /** find_expandable_block: unmapped blocks of the stream by address, each with a free block just before it. */
    private Piece findRun(boolean small, long stream, long size) {
        List<Piece> unmapped = pieces(small, stream, p -> !p.mapped);
        unmapped.sort(Comparator.comparingLong(p -> p.ptr));
        for (Piece u : unmapped) {
            Piece start = u;
            Piece before = u.owner.before(u);
            if (before != null && before.free()) {
                start = before;
            }
            long bytes = 0;
            for (Piece p = start; p != null && p.free() && bytes < size; p = p.owner.after(p)) {
                bytes += p.size;
            }
            if (bytes >= size) {
                return start;
            }
        }
        return null;
    }

    /** map_block: maps the whole pages covering the first {@code size} bytes; returns the merged mapped block. */
    private Piece map(Piece u, long size) {
        Reservation r = u.owner;
        long bytes = (size + r.page - 1) / r.page * r.page;
        if (mappedBytes + bytes > total) {
            return null; // a page could not be created: this call's pages are released
        }
        mappedBytes += bytes;
        if (bytes < u.size) {
            Piece rest = new Piece(u.ptr + bytes, u.size - bytes, false, r);
            r.pieces.put(rest.ptr, rest);
            u.size = bytes;
        }
        u.mapped = true;
        return mergeNeighbours(u);
    }

    /** unmap_block: whole pages inside a free mapped block; partial pages at either end stay mapped. */
    private void unmap(Piece p) {
        Reservation r = p.owner;
        long begin = r.base + (p.ptr - r.base + r.page - 1) / r.page * r.page;
        long end = r.base + (p.ptr + p.size - r.base) / r.page * r.page;
        if (begin >= end) {
            return;
        }
        if (p.ptr + p.size > end) {
            Piece after = new Piece(end, p.ptr + p.size - end, true, r);
            r.pieces.put(after.ptr, after);
        }
        if (begin > p.ptr) {
            Piece before = new Piece(p.ptr, begin - p.ptr, true, r);
            r.pieces.remove(p.ptr);
            r.pieces.put(before.ptr, before);
            p.ptr = begin;
            r.pieces.put(p.ptr, p);
        }
        p.size = end - begin;
        p.mapped = false;
        mappedBytes -= p.size;
        mergeNeighbours(p);
    }

    /** try_merge_blocks with both neighbours: free neighbours in the same mapped state join the block. */
    private static Piece mergeNeighbours(Piece b) {
        Reservation r = b.owner;
        Piece before = r.before(b);
        if (before != null && before.free() && before.mapped == b.mapped) {
            r.pieces.remove(b.ptr);
            before.size += b.size;
            b = before;
        }
        Piece after = r.after(b);
        if (after != null && after.free() && after.mapped == b.mapped) {
            r.pieces.remove(after.ptr);
            b.size += after.size;
        }
        return b;
    }
}
