package io.gpumem.policy;

import static io.gpumem.testing.TestSizes.MiB;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.device.SimulatedDevice;
import io.gpumem.policy.StitchAllocator.Arena;
import org.junit.jupiter.api.Test;

/**
 * The stitching allocator's invariant checker finds what policies.md §2.9 says it checks. The policy's randomised
 * tests lean on it after every step, and before this test PIT could remove any of its checks without one failing
 * (docs/testing.md). Each test breaks one invariant of a real state by hand and expects it named.
 */
class StitchInvariantsTest {

    /** Four live 2 MiB blocks, the second and fourth freed: an online arena with free and pinned pages. */
    private static StitchAllocator withFreeAndLivePages() {
        StitchAllocator st =
                new StitchAllocator(SimulatedDevice.builder().capacity(64 * MiB).build());
        long[] p = new long[4];
        for (int i = 0; i < p.length; i++) {
            p[i] = st.malloc(2 * MiB, 0);
        }
        st.free(p[1]);
        st.free(p[3]);
        StitchInvariants.check(st);
        return st;
    }

    private static void expectBroken(StitchAllocator st, String named) {
        assertThatThrownBy(() -> StitchInvariants.check(st))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("stitch allocator invariant broken: " + named);
        assertThatThrownBy(() -> st.internals().checkInvariants())
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining(named);
    }

    private static Arena onlineArena(StitchAllocator st) {
        return st.arenas.stream().filter(a -> !a.fixed).findFirst().orElseThrow();
    }

    @Test
    void countersThatDisagreeWithTheBlocksAreNamed() {
        StitchAllocator st = withFreeAndLivePages();
        st.counts.allocated += 512;
        expectBroken(st, "allocated bytes " + (4 * MiB + 512) + " but live blocks hold " + 4 * MiB);
        st.counts.allocated -= 512;
        st.mapper.mappedPages++;
        expectBroken(st, "mapped page count");
    }

    @Test
    void aBlockMarkedInUseInTheFreeIndexIsNamed() {
        StitchAllocator st = withFreeAndLivePages();
        StitchBlock free = onlineArena(st).freeBySize.toList().getFirst();
        free.free = false;
        expectBroken(st, "non-free block in the free index");
    }

    @Test
    void blocksThatNoLongerTileTheirArenaAreNamed() {
        StitchAllocator st = withFreeAndLivePages();
        StitchBlock live = st.liveBlocks().getFirst();
        assertThat(live.next).isNotNull();
        live.next.prev = null; // the links no longer mirror each other
        expectBroken(st, "broken block links");
    }

    @Test
    void blocksWithTwoFreeNeighboursOrNotCoveringTheirArenaAreNamed() {
        StitchAllocator st = withFreeAndLivePages();
        st.liveBlocks().getFirst().free = true; // the first block, followed by the free second one
        expectBroken(st, "two free neighbours");

        st = withFreeAndLivePages();
        StitchBlock last = st.liveBlocks().getFirst();
        while (last.next != null) {
            last = last.next;
        }
        last.size -= st.page;
        expectBroken(st, "blocks do not cover arena 0x" + Long.toHexString(onlineArena(st).base));
    }

    @Test
    void aFreeBlockOfAnotherStreamThanItsArenasIsNamed() {
        StitchAllocator st = withFreeAndLivePages();
        Arena a = onlineArena(st);
        StitchBlock free = a.freeBySize.toList().getFirst();
        free.stream = 7;
        expectBroken(st, "free block 0x" + Long.toHexString(free.ptr) + " has stream 7, its arena " + a.stream);
    }

    @Test
    void aFreePageTheUnpinnedRunsDoNotListIsNamed() {
        StitchAllocator st = withFreeAndLivePages();
        Arena a = onlineArena(st);
        int lo = a.unpinned.head();
        a.unpinned.remove(lo);
        expectBroken(
                st,
                "page " + lo + " of arena 0x" + Long.toHexString(a.base)
                        + " is touched by 0 blocks but not listed as unpinned");
    }

    @Test
    void pagesTheirMappingDoesNotHoldAreNamed() {
        StitchAllocator st = withFreeAndLivePages();
        Arena a = onlineArena(st);
        a.handle[0] = 0; // the first live block's page, unmapped under it
        expectBroken(st, "page 0 of arena 0x" + Long.toHexString(a.base) + " is touched by 1 blocks but not mapped");

        st = withFreeAndLivePages();
        onlineArena(st).mapLength[0] = 2; // a one-page mapping said to reach over the next page's own
        expectBroken(st, "mapping at page 0 broken");
    }

    @Test
    void aPhysicalHandleMappedTwiceIsNamed() {
        StitchAllocator st = withFreeAndLivePages();
        Arena a = onlineArena(st);
        int first = -1;
        int second = -1;
        for (int p = 0; p < a.handle.length; p++) {
            if (a.handle[p] != 0 && a.mapStart[p] == p && a.mapLength[p] == 1) {
                if (first < 0) {
                    first = p;
                } else if (second < 0) {
                    second = p;
                }
            }
        }
        assertThat(second).as("two single-page mappings").isPositive();
        a.handle[second] = a.handle[first];
        expectBroken(st, "physical handle " + a.handle[first] + " mapped twice");
    }

    @Test
    void aFixedArenasPinCountThatDisagreesWithItsBlocksIsNamed() {
        PlannedAllocator planned = new PlannedAllocator(
                SimulatedDevice.builder().capacity(64 * MiB).build(), new long[] {4 * MiB}, new long[] {0});
        planned.malloc(4 * MiB, 0);
        StitchAllocator st = planned.memory();
        StitchInvariants.check(st);
        Arena fixed = st.arenas.stream().filter(a -> a.fixed).findFirst().orElseThrow();
        int p = 0;
        while (fixed.handle[p] == 0 || fixed.mapStart[p] != p) {
            p++;
        }
        fixed.pins[p]++;
        expectBroken(st, "mapping at page " + p + " of arena 0x" + Long.toHexString(fixed.base) + " has ");
    }
}
