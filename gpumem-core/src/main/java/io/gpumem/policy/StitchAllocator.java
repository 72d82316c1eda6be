package io.gpumem.policy;

import io.gpumem.alloc.Pool;
import io.gpumem.device.Device;
import io.gpumem.history.BlockInfo;
import io.gpumem.history.BlockState;
import io.gpumem.history.MemorySnapshot;
import io.gpumem.history.SegmentInfo;
import io.gpumem.stats.MemoryStats;
import io.gpumem.stats.StatKind;
import io.gpumem.stats.StatType;
import io.gpumem.oom.OomReport;
import io.gpumem.oom.OutOfMemoryException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * Policy {@code stitch}: online defragmentation on virtual memory. Blocks live in large virtual arenas (one per
 * stream and size class, like PyTorch's pools) and are placed best fit at 512-byte granularity; physical memory
 * is a set of granule-sized pages, each mapped under at most one arena page at a time. A block's pages are mapped
 * when it is allocated; a freed block keeps its pages mapped as cache. When the device has no memory left for a
 * page a block needs, a mapped page that no live block touches is taken from wherever it is (any arena, any
 * stream), unmapped there and mapped under the new block: free physical memory scattered between live blocks is
 * stitched into one contiguous virtual range instead of asking the driver for more or failing. So a request fails
 * only when the pages it needs exceed the device's free memory plus the pages no live block touches: when free
 * physical memory, counted in whole granules, is truly short.
 *
 * <p>Invariants (checked by {@link #checkInvariants}): the blocks of an arena tile its reservation in address order
 * with no two free neighbours; the free-by-size index holds exactly the free blocks; {@code pins[p]} counts the
 * allocated blocks touching page p, and every pinned page is mapped; a page is on its arena's unpinned list exactly
 * when it is mapped and unpinned; no physical handle is mapped twice (so no two live blocks share physical memory);
 * reserved bytes equal the mapped pages plus the spare handles, allocated bytes the live blocks' sizes. Fixed-offset
 * arenas ({@link PlannedAllocator}'s plan region) keep the page accounting but no tiling: their blocks are placed
 * by the caller and checked not to overlap.
 */
public class StitchAllocator implements AllocatorPolicy {

    /** Requests up to this size go to the small arenas (PyTorch's small-pool limit), so they do not pin big pages. */
    static final long SMALL_LIMIT = 1L << 20;
    static final long ROUND = 512;

    private final Device device;
    private final long page;
    private final long arenaBytes;
    private final Map<Long, Arena> arenasByKey = new HashMap<>();
    final List<Arena> arenas = new ArrayList<>();
    private final Map<Long, Block> live = new HashMap<>();
    private final List<Block> pendingFrees = new ArrayList<>();
    private long[] spare = new long[16];
    private int spareCount;
    private long mappedPages;
    private long allocated;
    private long peakAllocated;
    private long peakReserved;
    private long retries;
    private long ooms;
    private long physicalCreated;
    private long physicalReleased;
    private long maps;
    private long unmaps;
    private long steals;
    private long liveCount;
    private long peakLiveCount;
    private long allocCount;
    private long freeCount;
    private long bytesAllocatedTotal;
    private long bytesFreedTotal;
    private boolean closed;

    public StitchAllocator(Device device) {
        if (!device.supportsVirtualMemory()) {
            throw new IllegalArgumentException("policy stitch needs a device with virtual memory (" + device.name() + ")");
        }
        this.device = device;
        this.page = device.allocationGranularity();
        long want = Math.max(2 * device.totalMemory(), 1L << 30);
        this.arenaBytes = (want + page - 1) / page * page;
    }

    @Override
    public String name() {
        return "stitch";
    }

    @Override
    public Device device() {
        return device;
    }

    /** One address block: allocated, free, or awaiting its streams' events. */
    static final class Block {
        final Arena arena;
        long addr;
        long size;
        boolean free;
        Block prev;
        Block next;
        long stream;
        long[] usedOn;        // streams recorded with recordStream, then their events while pending
        int usedCount;

        Block(Arena arena, long addr, long size, long stream) {
            this.arena = arena;
            this.addr = addr;
            this.size = size;
            this.stream = stream;
        }
    }

    /** One virtual reservation and the physical pages mapped under it. */
    final class Arena {
        final long base;
        final long stream;
        final boolean fixed;
        final long[] handle;
        final int[] pins;
        final int[] prevUnpinned;
        final int[] nextUnpinned;
        int unpinnedHead = -1;
        final TreeSet<Block> freeBySize = new TreeSet<>((a, b) -> a.size != b.size ? Long.compare(a.size, b.size)
                : Long.compare(a.addr, b.addr));
        final TreeMap<Long, Block> fixedBlocks = new TreeMap<>();

        Arena(long stream, boolean fixed, long bytes) {
            this.stream = stream;
            this.fixed = fixed;
            this.base = device.reserveAddressRange(bytes);
            int pages = (int) (bytes / page);
            handle = new long[pages];
            pins = new int[pages];
            prevUnpinned = new int[pages];
            nextUnpinned = new int[pages];
            if (!fixed) {
                Block all = new Block(this, base, bytes, stream);
                all.free = true;
                freeBySize.add(all);
            }
            arenas.add(this);
        }

        void pushUnpinned(int p) {
            prevUnpinned[p] = -1;
            nextUnpinned[p] = unpinnedHead;
            if (unpinnedHead >= 0) {
                prevUnpinned[unpinnedHead] = p;
            }
            unpinnedHead = p;
        }

        void removeUnpinned(int p) {
            int pr = prevUnpinned[p];
            int nx = nextUnpinned[p];
            if (pr >= 0) {
                nextUnpinned[pr] = nx;
            } else {
                unpinnedHead = nx;
            }
            if (nx >= 0) {
                prevUnpinned[nx] = pr;
            }
        }
    }

    private Arena arena(long stream, boolean small) {
        long key = stream * 2 + (small ? 1 : 0);
        Arena a = arenasByKey.get(key);
        if (a == null) {
            a = new Arena(stream, false, arenaBytes);
            arenasByKey.put(key, a);
        }
        return a;
    }

    /** A fixed-offset arena of {@code bytes} (rounded up to pages) for a caller that places blocks itself. */
    Arena newFixedArena(long bytes) {
        return new Arena(-1, true, Math.max(page, (bytes + page - 1) / page * page));
    }

    static long roundSize(long size) {
        return size <= 0 ? ROUND : (size + ROUND - 1) / ROUND * ROUND;
    }

    @Override
    public long malloc(long size, long stream) {
        if (size < 0) {
            throw new IllegalArgumentException("negative size " + size);
        }
        if (closed) {
            throw new IllegalStateException("allocator is closed");
        }
        if (size == 0) {
            return 0;
        }
        long rounded = roundSize(size);
        processPendingFrees(false);
        Arena a = arena(stream, rounded <= SMALL_LIMIT);
        Block b = a.freeBySize.ceiling(probe(a, rounded));
        if (b != null && pinPages(a, b.addr, rounded)) {
            return take(b, rounded, stream);
        }
        if (!pendingFrees.isEmpty()) {
            retries++;
            processPendingFrees(true);
            b = a.freeBySize.ceiling(probe(a, rounded));
            if (b != null && pinPages(a, b.addr, rounded)) {
                return take(b, rounded, stream);
            }
        }
        throw outOfMemory(size, rounded);
    }

    /** Serves a block at {@code offset} of a fixed arena (the caller guarantees it overlaps no live block there). */
    long mallocFixed(Arena a, long offset, long rounded, long stream) {
        long addr = a.base + offset;
        if (!pinPages(a, addr, rounded)) {
            if (!pendingFrees.isEmpty()) {
                retries++;
                processPendingFrees(true);
            }
            if (!pinPages(a, addr, rounded)) {
                throw outOfMemory(rounded, rounded);
            }
        }
        Block b = new Block(a, addr, rounded, stream);
        a.fixedBlocks.put(addr, b);
        allocated(b);
        return addr;
    }

    private final Map<Arena, Block> probes = new IdentityHashMap<>();

    private Block probe(Arena a, long size) {
        Block p = probes.computeIfAbsent(a, x -> new Block(x, Long.MIN_VALUE, 0, 0));
        p.size = size;
        return p;
    }

    private long take(Block b, long rounded, long stream) {
        Arena a = b.arena;
        a.freeBySize.remove(b);
        if (b.size > rounded) {
            Block rest = new Block(a, b.addr + rounded, b.size - rounded, a.stream);
            rest.free = true;
            rest.prev = b;
            rest.next = b.next;
            if (b.next != null) {
                b.next.prev = rest;
            }
            b.next = rest;
            b.size = rounded;
            a.freeBySize.add(rest);
        }
        b.free = false;
        b.stream = stream;
        allocated(b);
        return b.addr;
    }

    private void allocated(Block b) {
        live.put(b.addr, b);
        liveCount++;
        peakLiveCount = Math.max(peakLiveCount, liveCount);
        allocCount++;
        bytesAllocatedTotal += b.size;
        allocated += b.size;
        peakAllocated = Math.max(peakAllocated, allocated);
    }

    /**
     * Pins the pages under [addr, addr+size) of arena a, mapping a physical page under each that has none: a spare
     * handle, a new one from the device, or one taken from a mapped page no live block touches. On failure nothing
     * stays pinned (handles obtained stay as spares) and false is returned.
     */
    private boolean pinPages(Arena a, long addr, long size) {
        int p0 = (int) ((addr - a.base) / page);
        int p1 = (int) ((addr + size - 1 - a.base) / page);
        int missing = 0;
        for (int p = p0; p <= p1; p++) {
            if (a.handle[p] != 0) {
                if (a.pins[p]++ == 0) {
                    a.removeUnpinned(p);
                }
            } else {
                missing++;
            }
        }
        while (spareCount < missing) {
            long h = device.createPhysical(page);
            if (h != 0) {
                physicalCreated++;
            } else {
                h = stealPage();
                if (h == 0) {
                    unpin(a, p0, p1, true);
                    return false;
                }
            }
            addSpare(h);
        }
        for (int p = p0; p <= p1; p++) {
            if (a.handle[p] == 0) {
                long h = spare[--spareCount];
                long va = a.base + (long) p * page;
                device.map(va, page, h);
                device.setAccess(va, page);
                maps++;
                a.handle[p] = h;
                a.pins[p] = 1;
                mappedPages++;
            }
        }
        peakReserved = Math.max(peakReserved, reservedBytes());
        return true;
    }

    /** Unpins pages p0..p1; with {@code onlyMapped} pages without a handle are skipped (a failed pin). */
    private void unpin(Arena a, int p0, int p1, boolean onlyMapped) {
        for (int p = p0; p <= p1; p++) {
            if (onlyMapped && a.handle[p] == 0) {
                continue;
            }
            if (--a.pins[p] == 0) {
                a.pushUnpinned(p);
            }
        }
    }

    /** Unmaps one mapped page that no live block touches and returns its handle, or 0 when there is none. */
    private long stealPage() {
        for (Arena a : arenas) {
            int p = a.unpinnedHead;
            if (p >= 0) {
                a.removeUnpinned(p);
                long h = a.handle[p];
                device.unmap(a.base + (long) p * page, page);
                unmaps++;
                steals++;
                a.handle[p] = 0;
                mappedPages--;
                return h;
            }
        }
        return 0;
    }

    private void addSpare(long h) {
        if (spareCount == spare.length) {
            spare = java.util.Arrays.copyOf(spare, 2 * spareCount);
        }
        spare[spareCount++] = h;
    }

    @Override
    public void free(long ptr) {
        if (ptr == 0) {
            return;
        }
        Block b = live.get(ptr);
        if (b == null) {
            throw new IllegalArgumentException("invalid device pointer: 0x" + Long.toHexString(ptr));
        }
        live.remove(ptr);
        allocated -= b.size;
        liveCount--;
        freeCount++;
        bytesFreedTotal += b.size;
        if (b.usedCount > 0) {
            for (int i = 0; i < b.usedCount; i++) {
                long ev = device.createEvent();
                device.recordEvent(ev, b.usedOn[i]);
                b.usedOn[i] = ev;
            }
            pendingFrees.add(b);
            return;
        }
        release(b);
    }

    @Override
    public void recordStream(long ptr, long stream) {
        Block b = live.get(ptr);
        if (b == null) {
            throw new IllegalArgumentException("invalid device pointer: 0x" + Long.toHexString(ptr));
        }
        if (stream == b.stream) {
            return;
        }
        for (int i = 0; i < b.usedCount; i++) {
            if (b.usedOn[i] == stream) {
                return;
            }
        }
        if (b.usedOn == null) {
            b.usedOn = new long[2];
        } else if (b.usedCount == b.usedOn.length) {
            b.usedOn = java.util.Arrays.copyOf(b.usedOn, 2 * b.usedCount);
        }
        b.usedOn[b.usedCount++] = stream;
    }

    /** Releases blocks whose recorded streams have passed their free (all of them, waiting, when {@code sync}). */
    private void processPendingFrees(boolean sync) {
        if (pendingFrees.isEmpty()) {
            return;
        }
        for (int i = 0; i < pendingFrees.size(); i++) {
            Block b = pendingFrees.get(i);
            boolean done = true;
            for (int e = 0; e < b.usedCount; e++) {
                if (sync) {
                    device.synchronizeEvent(b.usedOn[e]);
                } else if (!device.queryEvent(b.usedOn[e])) {
                    done = false;
                    break;
                }
            }
            if (done) {
                for (int e = 0; e < b.usedCount; e++) {
                    device.destroyEvent(b.usedOn[e]);
                }
                b.usedCount = 0;
                pendingFrees.remove(i--);
                release(b);
            }
        }
    }

    /** Returns a block's address range to its arena and unpins its pages (they stay mapped as cache). */
    private void release(Block b) {
        Arena a = b.arena;
        unpin(a, (int) ((b.addr - a.base) / page), (int) ((b.addr + b.size - 1 - a.base) / page), false);
        if (a.fixed) {
            a.fixedBlocks.remove(b.addr);
            return;
        }
        b.free = true;
        Block p = b.prev;
        if (p != null && p.free) {
            a.freeBySize.remove(p);
            p.size += b.size;
            p.next = b.next;
            if (b.next != null) {
                b.next.prev = p;
            }
            b = p;
        }
        Block n = b.next;
        if (n != null && n.free) {
            a.freeBySize.remove(n);
            b.size += n.size;
            b.next = n.next;
            if (n.next != null) {
                n.next.prev = b;
            }
        }
        a.freeBySize.add(b);
    }

    @Override
    public void emptyCache() {
        processPendingFrees(true);
        for (Arena a : arenas) {
            while (a.unpinnedHead >= 0) {
                int p = a.unpinnedHead;
                a.removeUnpinned(p);
                device.unmap(a.base + (long) p * page, page);
                unmaps++;
                device.releasePhysical(a.handle[p]);
                physicalReleased++;
                a.handle[p] = 0;
                mappedPages--;
            }
        }
        while (spareCount > 0) {
            device.releasePhysical(spare[--spareCount]);
            physicalReleased++;
        }
    }

    private OutOfMemoryException outOfMemory(long requested, long rounded) {
        ooms++;
        return new OutOfMemoryException(new OomReport(requested, rounded, rounded, device.index(),
                device.totalMemory(), device.freeMemory(), -1, allocated, reservedBytes(), List.of(), false));
    }

    @Override
    public MemoryStats stats() {
        return MemoryStats.builder()
                .stat(StatKind.ALLOCATED_BYTES, StatType.ALL,
                        new MemoryStats.Stat(allocated, peakAllocated, bytesAllocatedTotal, bytesFreedTotal))
                .stat(StatKind.ALLOCATION, StatType.ALL,
                        new MemoryStats.Stat(liveCount, peakLiveCount, allocCount, freeCount))
                .stat(StatKind.RESERVED_BYTES, StatType.ALL, new MemoryStats.Stat(reservedBytes(), peakReserved,
                        physicalCreated * page, physicalReleased * page))
                .numAllocRetries(retries)
                .numOoms(ooms)
                .numDeviceAlloc(physicalCreated)
                .numDeviceFree(physicalReleased)
                .build();
    }

    /**
     * The state as PyTorch snapshot segments: one segment per run of mapped pages of an arena, its blocks the
     * allocated or pending blocks inside it and the free space between them (no history is recorded).
     */
    @Override
    public MemorySnapshot snapshot() {
        List<SegmentInfo> segments = new ArrayList<>();
        Map<Arena, TreeMap<Long, Block>> held = new IdentityHashMap<>();
        for (Block b : live.values()) {
            held.computeIfAbsent(b.arena, x -> new TreeMap<>()).put(b.addr, b);
        }
        for (Block b : pendingFrees) {
            held.computeIfAbsent(b.arena, x -> new TreeMap<>()).put(b.addr, b);
        }
        for (Arena a : arenas) {
            TreeMap<Long, Block> inArena = held.getOrDefault(a, new TreeMap<>());
            int p = 0;
            while (p < a.handle.length) {
                if (a.handle[p] == 0) {
                    p++;
                    continue;
                }
                int q = p;
                while (q < a.handle.length && a.handle[q] != 0) {
                    q++;
                }
                long start = a.base + (long) p * page;
                long end = a.base + (long) q * page;
                List<BlockInfo> blocks = new ArrayList<>();
                long at = start;
                long alloc = 0;
                long active = 0;
                for (Block b : inArena.subMap(start, end).values()) {
                    if (b.addr > at) {
                        blocks.add(new BlockInfo(at, b.addr - at, 0, BlockState.INACTIVE, List.of()));
                    }
                    boolean pending = !live.containsKey(b.addr) || live.get(b.addr) != b;
                    blocks.add(new BlockInfo(b.addr, b.size, b.size, pending ? BlockState.ACTIVE_PENDING_FREE
                            : BlockState.ACTIVE_ALLOCATED, List.of()));
                    alloc += pending ? 0 : b.size;
                    active += b.size;
                    at = b.addr + b.size;
                }
                if (at < end) {
                    blocks.add(new BlockInfo(at, end - at, 0, BlockState.INACTIVE, List.of()));
                }
                Pool pool = Pool.LARGE;
                segments.add(new SegmentInfo(device.index(), start, end - start, alloc, active, active,
                        Math.max(0, a.stream), pool, true, List.of(), blocks));
                p = q;
            }
        }
        segments.sort((x, y) -> Long.compareUnsigned(x.address(), y.address()));
        return new MemorySnapshot(segments, List.of(List.of()), Map.of("policy", name()));
    }

    @Override
    public void close() {
        if (!closed) {
            emptyCache();
            closed = true;
        }
    }

    @Override
    public Map<String, Long> memoryStats() {
        Map<String, Long> m = new HashMap<>();
        m.put("allocated_bytes.all.current", allocated);
        m.put("allocated_bytes.all.peak", peakAllocated);
        m.put("reserved_bytes.all.current", reservedBytes());
        m.put("reserved_bytes.all.peak", peakReserved);
        m.put("num_alloc_retries", retries);
        m.put("num_ooms", ooms);
        m.put("num_device_alloc", physicalCreated);
        m.put("num_device_free", physicalReleased);
        m.put("num_device_maps", maps + unmaps);
        m.put("num_stitched_pages", steals);
        return m;
    }

    /** Mapped pages no live block touches (what stitching can take). */
    long stealablePages() {
        long n = 0;
        for (Arena a : arenas) {
            for (int p = a.unpinnedHead; p >= 0; p = a.nextUnpinned[p]) {
                n++;
            }
        }
        return n;
    }

    /** Physical handles held but not mapped. */
    long spareHandles() {
        return spareCount;
    }

    @Override
    public long allocatedBytes() {
        return allocated;
    }

    @Override
    public long reservedBytes() {
        return (mappedPages + spareCount) * page;
    }

    @Override
    public void checkInvariants() {
        long liveBytes = 0;
        for (Block b : live.values()) {
            liveBytes += b.size;
        }
        require(liveBytes == allocated, "allocated bytes " + allocated + " but live blocks hold " + liveBytes);
        java.util.Set<Long> handles = new java.util.HashSet<>();
        long mapped = 0;
        Map<Arena, int[]> expectedPins = new IdentityHashMap<>();
        for (Arena a : arenas) {
            expectedPins.put(a, new int[a.pins.length]);
        }
        List<Block> holding = new ArrayList<>(live.values());
        holding.addAll(pendingFrees);
        for (Block b : holding) {
            int[] e = expectedPins.get(b.arena);
            for (long p = (b.addr - b.arena.base) / page; p <= (b.addr + b.size - 1 - b.arena.base) / page; p++) {
                e[(int) p]++;
            }
        }
        for (Arena a : arenas) {
            int[] e = expectedPins.get(a);
            boolean[] onList = new boolean[a.pins.length];
            for (int p = a.unpinnedHead; p >= 0; p = a.nextUnpinned[p]) {
                require(!onList[p], "page listed twice");
                onList[p] = true;
            }
            for (int p = 0; p < a.pins.length; p++) {
                require(a.pins[p] == e[p], "page " + p + " of arena 0x" + Long.toHexString(a.base) + " has "
                        + a.pins[p] + " pins, " + e[p] + " blocks touch it");
                if (a.handle[p] != 0) {
                    mapped++;
                    require(handles.add(a.handle[p]), "physical handle " + a.handle[p] + " mapped twice");
                } else {
                    require(a.pins[p] == 0, "pinned page " + p + " is not mapped");
                }
                require(onList[p] == (a.handle[p] != 0 && a.pins[p] == 0), "unpinned list wrong at page " + p);
            }
            if (a.fixed) {
                long end = Long.MIN_VALUE;
                for (Block b : a.fixedBlocks.values()) {
                    require(b.addr >= end, "fixed blocks overlap at 0x" + Long.toHexString(b.addr));
                    end = b.addr + b.size;
                }
                continue;
            }
            Block first = null;
            for (Block b : a.freeBySize) {
                require(b.free, "non-free block in the free index");
                if (b.prev == null) {
                    first = b;
                }
            }
            for (Block b : holding) {
                if (b.arena == a && b.prev == null) {
                    first = b;
                }
            }
            long at = a.base;
            int frees = 0;
            for (Block b = first; b != null; b = b.next) {
                require(b.addr == at, "blocks do not tile arena 0x" + Long.toHexString(a.base));
                require(b.next == null || b.next.prev == b, "broken block links");
                require(!(b.free && b.next != null && b.next.free), "two free neighbours");
                frees += b.free ? 1 : 0;
                at += b.size;
            }
            require(at == a.base + (long) a.pins.length * page, "blocks do not cover arena 0x" + Long.toHexString(a.base));
            require(frees == a.freeBySize.size(), "free index holds " + a.freeBySize.size() + " blocks, " + frees + " free");
        }
        require(mapped == mappedPages, "mapped page count " + mappedPages + " but " + mapped + " pages mapped");
        for (int i = 0; i < spareCount; i++) {
            require(handles.add(spare[i]), "spare handle also mapped");
        }
    }

    private static void require(boolean ok, String what) {
        if (!ok) {
            throw new IllegalStateException("stitch allocator invariant broken: " + what);
        }
    }
}
