package io.gpumem.alloc;

import io.gpumem.device.Device;
import io.gpumem.device.DeviceException;
import java.util.Arrays;
import org.jspecify.annotations.Nullable;

/**
 * One expandable segment (allocator.md §5): a virtual address range reserved once, into which physical pages are
 * mapped and unmapped on demand. PyTorch's {@code ExpandableSegment}.
 *
 * <h2>Layout</h2>
 * The reservation holds {@code pageCount} pages of {@code pageSize} bytes (2 MiB for the small pool, 20 MiB
 * for the large pool); {@code pageCount = ceil((total * 9 / 8) / pageSize)} as PyTorch computes it from the
 * device's total memory. Each mapped page has its own physical handle ({@code handle(i) != 0}). The handle table
 * covers only pages up to the highest ever mapped (it grows by doubling), so memory follows the pages in use,
 * not the size of the reservation: a 3000 TiB device costs nothing until its pages are mapped.
 *
 * <h2>Device protocol</h2>
 * Mapping pages [b, e): create a handle per page, then map each page, then one {@code setAccess} over the
 * range. If a create reports out-of-memory the handles created by this call are released and the call maps
 * nothing (returns 0). If any driver call throws, everything this call did is undone (pages unmapped, handles
 * released) and the exception propagates, so the segment is never left half-mapped. Unmapping synchronises
 * the segment's stream first, then unmaps and releases page by page; if a driver call fails part way it
 * reports how far it got, so the allocator can account exactly the pages that went before rethrowing.
 *
 * <p>Invariant: {@code handle(i) != 0} iff page i is mapped; the allocator's blocks agree (a block is
 * {@code mapped} iff all its pages are).
 */
final class ExpandableSegment {
    final Device device;
    final long base;
    final long pageSize;
    final int pageCount;
    final long stream;
    final BlockPool pool;
    private long[] handles = new long[16];
    private int mappedPages;
    private @Nullable RuntimeException unmapFailure;

    private ExpandableSegment(Device device, long base, long pageSize, int pageCount, long stream, BlockPool pool) {
        this.device = device;
        this.base = base;
        this.pageSize = pageSize;
        this.pageCount = pageCount;
        this.stream = stream;
        this.pool = pool;
    }

    /** PyTorch's reservation size in pages for a device of {@code totalMemory} bytes. */
    static int defaultPageCount(long totalMemory, long pageSize) {
        long count = reservationPages(totalMemory, pageSize);
        if (count < 0) {
            throw new IllegalStateException(cannotSize(totalMemory, pageSize));
        }
        return (int) count;
    }

    /**
     * {@code ceil((totalMemory * 9 / 8) / pageSize)}, or -1 when that is not a page count this model can hold: below
     * one, above {@link Integer#MAX_VALUE}, or past {@code long} in the multiplication.
     */
    private static long reservationPages(long totalMemory, long pageSize) {
        if (totalMemory <= 0 || totalMemory > Long.MAX_VALUE / 9) {
            return -1;
        }
        long count = ((totalMemory * 9) / 8 + pageSize - 1) / pageSize;
        return count > Integer.MAX_VALUE ? -1 : count;
    }

    private static String cannotSize(long totalMemory, long pageSize) {
        return "cannot size an expandable segment for " + totalMemory + " bytes (its reservation, 9/8 of the"
                + " device, must be 1 to " + Integer.MAX_VALUE + " pages of " + pageSize + " bytes)";
    }

    /**
     * Why a device of {@code totalMemory} bytes and this allocation granularity could not hold the expandable
     * segments of either pool, or null when it can: the checks {@link #reserve} and {@link #defaultPageCount} make,
     * asked before a device is built so that a script's {@code device} line fails where it is written.
     */
    static @Nullable String unsupportedDevice(long totalMemory, long granularity) {
        String small = unsupportedDevice(totalMemory, granularity, SizeRules.expandablePageSize(Pool.SMALL));
        return small != null
                ? small
                : unsupportedDevice(totalMemory, granularity, SizeRules.expandablePageSize(Pool.LARGE));
    }

    private static @Nullable String unsupportedDevice(long totalMemory, long granularity, long pageSize) {
        if (!pageFitsGranularity(pageSize, granularity)) {
            return granularityMismatch(pageSize, granularity);
        }
        return reservationPages(totalMemory, pageSize) < 0 ? cannotSize(totalMemory, pageSize) : null;
    }

    /** Reserves a new segment on the device. */
    static ExpandableSegment reserve(Device device, long stream, BlockPool pool, long pageSize, int pageCount) {
        checkGranularity(device, pageSize);
        long base = device.reserveAddressRange(pageSize * pageCount);
        return new ExpandableSegment(device, base, pageSize, pageCount, stream, pool);
    }

    /** Adopts a reservation at a given base (state import); the device must return exactly {@code base}. */
    static ExpandableSegment reserveAt(
            Device device, long expectedBase, long stream, BlockPool pool, long pageSize, int pageCount) {
        checkGranularity(device, pageSize);
        long base = device.reserveAddressRange(pageSize * pageCount);
        if (expectedBase != Device.NULL && base != expectedBase) {
            device.freeAddressRange(base, pageSize * pageCount);
            throw new IllegalArgumentException("device reserved 0x" + Long.toHexString(base)
                    + " instead of the restored segment address 0x" + Long.toHexString(expectedBase));
        }
        return new ExpandableSegment(device, base, pageSize, pageCount, stream, pool);
    }

    private static void checkGranularity(Device device, long pageSize) {
        long g = device.allocationGranularity();
        if (!pageFitsGranularity(pageSize, g)) {
            throw new IllegalStateException(granularityMismatch(pageSize, g));
        }
    }

    /** Pages are mapped whole, in granules: a page must be a whole number of them. */
    private static boolean pageFitsGranularity(long pageSize, long granularity) {
        return granularity > 0 && pageSize % granularity == 0;
    }

    private static String granularityMismatch(long pageSize, long granularity) {
        return "expandable page size " + pageSize + " is not a multiple of the device granularity " + granularity;
    }

    long size() {
        return pageSize * pageCount;
    }

    int mappedPages() {
        return mappedPages;
    }

    boolean isPageMapped(int page) {
        return handle(page) != 0;
    }

    /** Pages the handle table covers: every mapped page is below this (at most {@link #pageCount}). */
    int coveredPages() {
        return Math.min(handles.length, pageCount);
    }

    private long handle(int page) {
        return page < handles.length ? handles[page] : 0;
    }

    /** Makes the handle table cover pages [0, end). */
    private void cover(int end) {
        if (end > handles.length) {
            handles = Arrays.copyOf(handles, (int) Math.min(pageCount, Math.max(end, 2L * handles.length)));
        }
    }

    /** First page index at or after {@code ptr} rounded down ({@code segmentLeft}). */
    int pageFloor(long ptr) {
        return (int) ((ptr - base) / pageSize);
    }

    /** Page index of {@code ptr} rounded up ({@code segmentRight}). */
    int pageCeil(long ptr) {
        return (int) ((ptr - base + pageSize - 1) / pageSize);
    }

    long pageAddress(int page) {
        return base + page * pageSize;
    }

    /**
     * Maps the pages covering [ptr, ptr + size); {@code ptr} must be page-aligned.
     *
     * @return bytes mapped (whole pages), or 0 when the device ran out of physical memory
     * @throws DeviceException after undoing this call's work, for any other driver failure
     */
    long map(long ptr, long size) {
        int begin = pageFloor(ptr);
        int end = pageCeil(ptr + size);
        if (pageAddress(begin) != ptr) {
            throw new IllegalStateException("map of an unaligned range at 0x" + Long.toHexString(ptr));
        }
        return mapPages(begin, end) ? (long) (end - begin) * pageSize : 0;
    }

    /** Maps pages [begin, end); false (and nothing changed) when a create reported out of memory. */
    boolean mapPages(int begin, int end) {
        if (begin < 0 || end > pageCount) {
            throw new IllegalStateException("pages [" + begin + ", " + end + ") are outside segment 0x"
                    + Long.toHexString(base) + " of " + pageCount + " pages");
        }
        cover(end);
        for (int i = begin; i < end; i++) {
            if (handles[i] != 0) {
                throw new IllegalStateException(
                        "page " + i + " of segment 0x" + Long.toHexString(base) + " is already mapped");
            }
        }
        int created = begin;
        int mapped = begin;
        try {
            for (int i = begin; i < end; i++) {
                long h = device.createPhysical(pageSize);
                if (h == Device.NULL) {
                    releaseHandles(begin, created);
                    return false;
                }
                handles[i] = h;
                created = i + 1;
            }
            for (int i = begin; i < end; i++) {
                device.map(pageAddress(i), pageSize, handles[i]);
                mapped = i + 1;
            }
            device.setAccess(pageAddress(begin), (long) (end - begin) * pageSize);
        } catch (RuntimeException e) {
            for (int i = begin; i < mapped; i++) {
                try {
                    device.unmap(pageAddress(i), pageSize);
                } catch (RuntimeException suppressed) {
                    e.addSuppressed(suppressed);
                }
            }
            try {
                releaseHandles(begin, created);
            } catch (RuntimeException suppressed) {
                e.addSuppressed(suppressed);
            }
            throw e;
        }
        mappedPages += end - begin;
        return true;
    }

    private void releaseHandles(int begin, int end) {
        RuntimeException first = null;
        for (int i = begin; i < end; i++) {
            long h = handles[i];
            handles[i] = 0;
            if (h != 0) {
                try {
                    device.releasePhysical(h);
                } catch (RuntimeException e) {
                    if (first == null) {
                        first = e;
                    }
                }
            }
        }
        if (first != null) {
            throw first;
        }
    }

    /**
     * Unmaps pages [begin, end), which must all be mapped; synchronises the segment's stream first.
     *
     * @return the end of the pages actually unmapped: {@code end}, or less when a driver call failed part way
     *         (then {@link #unmapFailure()} holds the exception, for the caller to rethrow once its bookkeeping
     *         matches the pages that really went)
     */
    int unmapPages(int begin, int end) {
        cover(end);
        unmapFailure = null;
        try {
            device.synchronizeStream(stream);
        } catch (RuntimeException e) {
            unmapFailure = e;
            return begin;
        }
        for (int i = begin; i < end; i++) {
            long h = handles[i];
            try {
                device.unmap(pageAddress(i), pageSize);
            } catch (RuntimeException e) {
                unmapFailure = e;
                return i;
            }
            handles[i] = 0;
            mappedPages--;
            try {
                device.releasePhysical(h);
            } catch (RuntimeException e) {
                // the page is unmapped; its handle is lost to us either way
                unmapFailure = e;
                return i + 1;
            }
        }
        return end;
    }

    /** The driver failure of the last {@link #unmapPages} call that stopped early, else null. */
    @Nullable
    RuntimeException unmapFailure() {
        return unmapFailure;
    }

    /** Frees the address reservation; every page must be unmapped. */
    void destroy() {
        if (mappedPages != 0) {
            throw new IllegalStateException(
                    "destroying segment 0x" + Long.toHexString(base) + " with " + mappedPages + " mapped pages");
        }
        device.freeAddressRange(base, size());
    }
}
