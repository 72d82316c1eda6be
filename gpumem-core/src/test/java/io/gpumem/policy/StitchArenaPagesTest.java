package io.gpumem.policy;

import static io.gpumem.testing.TestSizes.GiB;
import static io.gpumem.testing.TestSizes.MiB;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.device.SimulatedDevice;
import io.gpumem.policy.StitchAllocator.Arena;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * A stitch arena reserves twice the device's memory, in pages indexed by int: a device too large for that is refused
 * with a clear error, and a large one costs per-page arrays for the pages its blocks use, not for its capacity.
 */
class StitchArenaPagesTest {
    private static final long TiB = 1024 * GiB;

    @Test
    void anArenaOfMorePagesThanAnIntIndexesIsRefusedNamingItsSize() {
        // 3000 TiB: the arena of 6000 TiB has 3,145,728,000 pages of 2 MiB, which an int cast made negative
        StitchAllocator st = new StitchAllocator(
                SimulatedDevice.builder().capacity(3000 * TiB).build());
        assertThatThrownBy(() -> st.malloc(MiB, 0))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("policy stitch cannot reserve an arena of " + 6000 * TiB + " bytes")
                .hasMessageContaining("3145728000 pages of 2097152 bytes are more than 2^31 - 1");
    }

    @Test
    void aLargeDeviceCostsPageArraysForThePagesItsBlocksUseNotForItsCapacity() {
        long seed = new SplittableRandom().nextLong();
        System.out.println("StitchArenaPagesTest seed=" + seed);
        SplittableRandom rnd = new SplittableRandom(seed);
        // 64 TiB: an arena of 64 M pages, 2 GiB of arrays each when sized by the reservation
        StitchAllocator st =
                new StitchAllocator(SimulatedDevice.builder().capacity(64 * TiB).build());
        List<Long> live = new ArrayList<>();
        // per arena, the highest page any block touched
        IdentityHashMap<Arena, Long> highest = new IdentityHashMap<>();
        for (int i = 0; i < 300; i++) {
            if (live.isEmpty() || rnd.nextInt(3) > 0) {
                live.add(st.malloc(1 + rnd.nextLong(rnd.nextBoolean() ? MiB : 256 * MiB), 0));
                for (StitchBlock b : st.liveBlocks()) {
                    long page = (b.ptr + b.size - 1 - b.arena().base) / (2 * MiB);
                    highest.merge(b.arena(), page, Math::max);
                }
            } else {
                st.free(live.remove(rnd.nextInt(live.size())));
            }
            StitchInvariants.check(st);
        }
        assertThat(highest).isNotEmpty();
        for (Arena a : st.arenas) {
            // doubling: at most twice the pages up to the highest touched, never the 64 M of the reservation
            long used = highest.getOrDefault(a, 0L) + 1;
            assertThat((long) a.handle.length)
                    .as("pages covered by an arena whose blocks reached page %d", used - 1)
                    .isLessThanOrEqualTo(Math.max(StitchPageMapper.INITIAL_PAGES, 2 * used));
        }
        for (Long p : live) {
            st.free(p);
        }
        StitchInvariants.check(st);
    }
}
