package io.gpumem.alloc;

import static io.gpumem.testing.TestSizes.GiB;
import static io.gpumem.testing.TestSizes.MiB;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.device.SimulatedDevice;
import org.junit.jupiter.api.Test;

/**
 * The invariant checker finds what it promises to find. Every randomised test of the allocator leans on it, so a
 * check that silently checked nothing would make them all pass vacuously (PIT could remove the free sets' order
 * check, their tree shape checks and the stat comparisons without a test noticing, docs/testing.md). Each test
 * here breaks one invariant of a real state by hand and expects the violation to be named; the valid states
 * around the boundaries (a block of exactly {@code max_split_size}, expandable blocks starting on page
 * boundaries) must pass.
 */
class InvariantCheckerTest {

    private static AllocatorCore core(String conf) {
        return new AllocatorCore(SimulatedDevice.builder().capacity(4 * GiB).build(), AllocatorConfig.parse(conf));
    }

    /** A malloc as {@link CachingAllocator} makes it: the block indexed by its address. */
    private static Block malloc(AllocatorCore core, long size, long stream) {
        Block b = core.malloc(size, stream);
        core.allocatedBlocks().put(b.ptr, b);
        return b;
    }

    private static void free(AllocatorCore core, Block b) {
        core.allocatedBlocks().remove(b.ptr);
        core.free(b);
    }

    /** Two whole free 12 MiB segments of stream 0, in best-fit order: one size class, so one tree of two blocks. */
    private record TwoFreeBlocks(AllocatorCore core, Block first, Block second) {}

    private static TwoFreeBlocks twoEqualFreeSegments() {
        AllocatorCore core = core("");
        Block a = malloc(core, 12 * MiB, 0);
        Block b = malloc(core, 12 * MiB, 0);
        free(core, a);
        free(core, b);
        InvariantChecker.check(core);
        Block first = core.largeBlocks.blocks.first();
        assertThat(first).isNotNull();
        Block second = core.largeBlocks.blocks.next(first);
        assertThat(second).isNotNull();
        assertThat(second.size).isEqualTo(first.size);
        return new TwoFreeBlocks(core, first, second);
    }

    private static void expectViolation(AllocatorCore core, String named) {
        assertThatThrownBy(() -> InvariantChecker.check(core))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("allocator invariants violated")
                .hasMessageContaining(named);
        // the allocator's public hook runs the same check
        assertThatThrownBy(() -> new AllocatorInternals(new AllocatorLock(), core).checkInvariants())
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining(named);
    }

    @Test
    void aBlockNamingASlotWithoutASessionIsNamed() {
        AllocatorCore core = core("");
        Block b = malloc(core, 3 * MiB, 0);
        InvariantChecker.check(core);
        b.sessionSlot = 7; // as if a slot session had left it behind
        expectViolation(core, "names slot 7 without an open session");
    }

    /** Gives the child of a two-block treap a higher priority than its root, breaking only the heap order. */
    private static void invertHeapOrder(Block one, Block other) {
        Block root = one.parent == null ? one : other;
        Block child = root == one ? other : one;
        assertThat(child.parent).isSameAs(root);
        root.priority = Integer.MIN_VALUE;
        child.priority = Integer.MAX_VALUE;
    }

    @Test
    void statesOnTheBoundariesPass() {
        // a block and its segment of exactly max_split_size count as oversize, as the allocator counts them
        AllocatorCore capped = core("max_split_size_mb:40");
        Block exact = malloc(capped, 40 * MiB, 0);
        assertThat(exact.size).isEqualTo(40 * MiB);
        assertThat(capped.stats.oversizeAllocationsCurrent()).isEqualTo(1);
        assertThat(capped.stats.oversizeSegmentsCurrent()).isEqualTo(1);
        InvariantChecker.check(capped);

        // expandable blocks begin on page boundaries, free, allocated and unmapped, in both pools
        AllocatorCore expandable = core("expandable_segments:True");
        Block big = malloc(expandable, 60 * MiB, 0);
        Block next = malloc(expandable, 20 * MiB, 0);
        malloc(expandable, MiB, 0);
        free(expandable, big);
        assertThat(next.ptr).isEqualTo(big.ptr + 60 * MiB);
        InvariantChecker.check(expandable);
    }

    @Test
    void aStatThatDisagreesWithTheBlocksIsNamedByPoolAndKey() {
        AllocatorCore core = core("");
        malloc(core, MiB, 0);
        malloc(core, 30 * MiB, 0);
        InvariantChecker.check(core);

        core.stats.increase(DeviceStats.ALLOCATED_BYTES, DeviceStats.SMALL_POOL, 512);
        expectViolation(core, "allocated_bytes.small_pool.current is " + (MiB + 512));
        core.stats.decrease(DeviceStats.ALLOCATED_BYTES, DeviceStats.SMALL_POOL, 512);
        InvariantChecker.check(core);

        core.stats.increase(DeviceStats.ALLOCATED_BYTES, DeviceStats.LARGE_POOL, 512);
        expectViolation(core, "allocated_bytes.large_pool.current is " + (30 * MiB + 512));
        core.stats.decrease(DeviceStats.ALLOCATED_BYTES, DeviceStats.LARGE_POOL, 512);

        core.stats.updateOversizeAllocations(1);
        expectViolation(core, "oversize_allocations.current is 1, recomputed 0");
        core.stats.updateOversizeAllocations(-1);
        core.stats.updateOversizeSegments(1);
        expectViolation(core, "oversize_segments.current is 1, recomputed 0");
        core.stats.updateOversizeSegments(-1);
        InvariantChecker.check(core);
    }

    @Test
    void reservedBytesThatDisagreeWithTheSegmentsAreNamed() {
        AllocatorCore counted = core("");
        malloc(counted, MiB, 0);
        counted.totalAllocatedMemory += 2 * MiB;
        expectViolation(counted, "total_allocated_memory is " + 4 * MiB);

        // an uncounted core keeps no stats: its reserved bytes are total_allocated_memory, checked against the blocks
        AllocatorCore uncounted =
                new AllocatorCore(SimulatedDevice.builder().capacity(GiB).build(), AllocatorConfig.defaults(), false);
        malloc(uncounted, MiB, 0);
        InvariantChecker.check(uncounted);
        uncounted.totalAllocatedMemory += 2 * MiB;
        expectViolation(uncounted, "reserved − allocated (cached bytes) is " + 3 * MiB + ", recomputed " + MiB);
    }

    @Test
    void aFreeSetOutOfOrderIsNamed() {
        TwoFreeBlocks two = twoEqualFreeSegments();
        // equal sizes, so address decides; swapping the addresses puts the two out of (size, address) order
        long p = two.first().ptr;
        two.first().ptr = two.second().ptr;
        two.second().ptr = p;
        expectViolation(two.core(), "large free set: out of order at");
    }

    @Test
    void aFreeSetTreeOutOfHeapOrderIsNamed() {
        TwoFreeBlocks two = twoEqualFreeSegments();
        invertHeapOrder(two.first(), two.second());
        expectViolation(two.core(), "heap order broken under");
    }

    @Test
    void anUnmappedTreeOutOfHeapOrderIsNamed() {
        AllocatorCore core = core("expandable_segments:True");
        // one large expandable segment per stream, each with an unmapped tail: two blocks in one unmapped tree
        malloc(core, 30 * MiB, 0);
        malloc(core, 30 * MiB, core.device.createStream());
        BlockTree<Block> unmapped = core.largeBlocks.unmapped;
        assertThat(unmapped.size()).isEqualTo(2);
        Block first = unmapped.first();
        Block last = unmapped.last();
        assertThat(first).isNotNull();
        assertThat(last).isNotNull();
        invertHeapOrder(first, last);
        expectViolation(core, "large unmapped tree: heap order broken under");
    }

    @Test
    void aBlockOfNoSizeAndAPendingBlockWithoutEventsAreNamed() {
        AllocatorCore core = core("");
        Block a = malloc(core, MiB, 0);
        Block b = malloc(core, MiB, 0);
        assertThat(b.ptr).isEqualTo(a.ptr + a.size);
        b.size = 0;
        expectViolation(core, "non-positive size 0");

        AllocatorCore withEvents = core("");
        Block used = malloc(withEvents, MiB, 0);
        used.addStreamUse(withEvents.device.createStream());
        free(withEvents, used);
        InvariantChecker.check(withEvents);
        assertThat(used.eventCount).isEqualTo(1);
        used.eventCount = 0;
        expectViolation(withEvents, "pending block in a tree or without events");
    }

    @Test
    void anUnmappedBlockOverAMappedPageIsNamed() {
        AllocatorCore core = core("expandable_segments:True");
        Block live = malloc(core, 30 * MiB, 0); // two 20 MiB pages: the block, 10 MiB free, then the unmapped tail
        Block free = live.next;
        assertThat(free).isNotNull();
        assertThat(free.mapped).isTrue();
        InvariantChecker.check(core);
        core.largeBlocks.blocks.remove(free);
        free.mapped = false; // the page under it stays mapped
        core.largeBlocks.unmapped.insert(free);
        expectViolation(core, "unmapped block over mapped page 1");
    }
}
