package io.gpumem.bench.alloc;

import java.util.Arrays;

/**
 * A two-level segregated fit allocator (TLSF, Masmano, Ripoll, Crespo and Real, ECRTS 2004), written here from the
 * published algorithm as the benchmarks' same-run stand-in for the allocator behind Vulkan Memory Allocator's
 * default block metadata: O(1) malloc and free over one address range, with no cache and no stream rules.
 *
 * <h2>Algorithm</h2>
 * Sizes are counted in 512-byte units. A free block of u units is listed in class (fl, sl): fl is the position
 * of u's highest set bit (classes below 2^{@value #SL_BITS} units are one linear first level) and sl the next
 * {@value #SL_BITS} bits, so a class spans sizes within 1/32 of each other. A bitmap over first levels and one
 * per first level over second levels say which lists are non-empty. malloc rounds the request up to the next
 * class boundary first, so that any block of the class found is certain to fit (good fit, not best fit), finds
 * the first non-empty class at or above it with two bit scans, takes the head of its list and splits off the
 * remainder as a new free block. free merges the block with its free physical neighbours at once (boundary tags:
 * the neighbours' ids) and lists the result.
 *
 * <p>Layout: block records are parallel arrays indexed by block id, with a stack of unused ids, sized once for the
 * most blocks the caller will hold live (the blocks never outnumber twice the live ones plus one, since no two
 * free blocks are neighbours), so malloc and free allocate nothing. A live block is named by its id (the
 * handle VMA returns), so free needs no address lookup.
 *
 * <p>Invariants: the blocks tile [0, capacity) in physical order through {@code prevPhys}/{@code nextPhys}; no
 * two free blocks are neighbours; a free block is in exactly the list of its size's class; a list's bit is set
 * iff the list is non-empty.
 */
final class TlsfAllocator {
    static final int SL_BITS = 5;
    private static final int SL_COUNT = 1 << SL_BITS;
    private static final int FL_COUNT = 48;
    private static final int UNIT_SHIFT = 9;
    private static final int NONE = -1;

    private final long[] offset;
    /** Size in units; negative while the block is allocated. */
    private final long[] units;

    private final int[] prevPhys;
    private final int[] nextPhys;
    private final int[] prevFree;
    private final int[] nextFree;
    private final int[] spareIds;
    private int spareCount;
    private int idCount;

    private final int[] heads = new int[FL_COUNT * SL_COUNT];
    private final int[] secondLevel = new int[FL_COUNT];
    private long firstLevel;

    /** An allocator over [0, capacity) bytes (a multiple of 512) for at most {@code maxLive} live blocks at once. */
    TlsfAllocator(long capacity, int maxLive) {
        int records = 2 * maxLive + 2;
        offset = new long[records];
        units = new long[records];
        prevPhys = new int[records];
        nextPhys = new int[records];
        prevFree = new int[records];
        nextFree = new int[records];
        spareIds = new int[records];
        Arrays.fill(heads, NONE);
        int all = newId();
        offset[all] = 0;
        units[all] = capacity >>> UNIT_SHIFT;
        prevPhys[all] = NONE;
        nextPhys[all] = NONE;
        list(all);
    }

    /** The id of a new block of at least {@code bytes}, or -1 when no free block is large enough. */
    int malloc(long bytes) {
        long u = Math.max(1, (bytes + (1 << UNIT_SHIFT) - 1) >>> UNIT_SHIFT);
        long rounded = u;
        if (u >= SL_COUNT) { // round up to the class boundary: every block of the class found then fits
            rounded += (1L << (63 - Long.numberOfLeadingZeros(u) - SL_BITS)) - 1;
        }
        int c = classOf(rounded);
        int fl = c >>> SL_BITS;
        int slMap = secondLevel[fl] & (-1 << (c & (SL_COUNT - 1)));
        if (slMap == 0) {
            long flMap = fl + 1 >= 64 ? 0 : firstLevel & (-1L << (fl + 1));
            if (flMap == 0) {
                return NONE;
            }
            fl = Long.numberOfTrailingZeros(flMap);
            slMap = secondLevel[fl];
        }
        int b = heads[(fl << SL_BITS) | Integer.numberOfTrailingZeros(slMap)];
        unlist(b);
        long rest = units[b] - u;
        if (rest > 0) {
            int r = newId();
            offset[r] = offset[b] + (u << UNIT_SHIFT);
            units[r] = rest;
            prevPhys[r] = b;
            nextPhys[r] = nextPhys[b];
            if (nextPhys[b] != NONE) {
                prevPhys[nextPhys[b]] = r;
            }
            nextPhys[b] = r;
            list(r);
        }
        units[b] = -u;
        return b;
    }

    /** The address of live block {@code id}. */
    long offset(int id) {
        return offset[id];
    }

    /** Frees live block {@code id}, merging it with its free neighbours. */
    void free(int id) {
        int b = id;
        units[b] = -units[b];
        int n = nextPhys[b];
        if (n != NONE && units[n] > 0) {
            unlist(n);
            units[b] += units[n];
            unlinkPhys(n);
        }
        int p = prevPhys[b];
        if (p != NONE && units[p] > 0) {
            unlist(p);
            units[p] += units[b];
            unlinkPhys(b);
            b = p;
        }
        list(b);
    }

    /** The class (fl << SL_BITS | sl) of a block of {@code u} units. */
    private static int classOf(long u) {
        if (u < SL_COUNT) {
            return (int) u;
        }
        int msb = 63 - Long.numberOfLeadingZeros(u);
        int sl = (int) (u >>> (msb - SL_BITS)) & (SL_COUNT - 1);
        return ((msb - SL_BITS + 1) << SL_BITS) | sl;
    }

    private void list(int b) {
        int c = classOf(units[b]);
        int head = heads[c];
        prevFree[b] = NONE;
        nextFree[b] = head;
        if (head != NONE) {
            prevFree[head] = b;
        }
        heads[c] = b;
        secondLevel[c >>> SL_BITS] |= 1 << (c & (SL_COUNT - 1));
        firstLevel |= 1L << (c >>> SL_BITS);
    }

    private void unlist(int b) {
        int p = prevFree[b];
        int n = nextFree[b];
        if (n != NONE) {
            prevFree[n] = p;
        }
        if (p != NONE) {
            nextFree[p] = n;
            return;
        }
        int c = classOf(units[b]);
        heads[c] = n;
        if (n == NONE) {
            int fl = c >>> SL_BITS;
            secondLevel[fl] &= ~(1 << (c & (SL_COUNT - 1)));
            if (secondLevel[fl] == 0) {
                firstLevel &= ~(1L << fl);
            }
        }
    }

    /** Takes block {@code b}, merged into its physical predecessor, out of the physical chain and frees its id. */
    private void unlinkPhys(int b) {
        int p = prevPhys[b];
        int n = nextPhys[b];
        if (p != NONE) {
            nextPhys[p] = n;
        }
        if (n != NONE) {
            prevPhys[n] = p;
        }
        spareIds[spareCount++] = b;
    }

    private int newId() {
        if (spareCount > 0) {
            return spareIds[--spareCount];
        }
        if (idCount == offset.length) {
            throw new IllegalStateException("TLSF peer: more blocks live than it was sized for (" + idCount + ")");
        }
        return idCount++;
    }
}
